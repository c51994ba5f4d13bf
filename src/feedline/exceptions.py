"""Every exception feedline raises on purpose, in one module.

Errors subclass the matching built-in so that ``except ValueError`` keeps working, and
carry the facts a user needs to find the problem: the file, the record index and the
byte offset (or line), the pipeline stage, the worker.

Hierarchy::

    FeedlineError
    ├── DataError (ValueError)                 bad data met while reading or converting
    │   ├── CorruptRecordError                 framing/CRC/length/magic/protobuf damage
    │   ├── DecodeError                        a payload that does not decode (image, CSV field)
    │   ├── MissingFeatureError (KeyError too) a required feature/column is absent
    │   ├── ComposeNotAligned                  ``compose`` readers of different lengths
    │   ├── FeedError                          a sample the DataFeeder cannot convert
    │   └── IncompleteShardSetError            a ``-of-N`` shard set whose writer did not finish
    ├── StateError (RuntimeError)              iterator state problems
    │   ├── StateNotSupportedError             the pipeline cannot capture its position
    │   └── InvalidStateError (ValueError)     a state whose values do not fit the pipeline
    ├── OutOfRangeError (EOFError)             a queue-style input (``compat.tf_v1``) is used up
    ├── PipelineError (RuntimeError)           the runtime failed
    │   ├── WorkerError                        a worker process or thread raised
    │   ├── WorkerDiedError                    a worker process died (signal, OOM killer)
    │   ├── ClusterUnavailableError (ConnectionError)  the Ray cluster is gone
    │   └── StageTimeoutError (TimeoutError)   a ``map(timeout=)`` element took too long
    ├── SharedMemoryError (OSError)            /dev/shm is missing or too small
    ├── RemoteReadError (OSError)              a remote read failed after feedline's retries
    │   └── IncompleteDownloadError            a short, cut or changed download (never cached)
    ├── ContextFieldError (AttributeError)     a runner context field read before its item set it
    └── CheckpointError (ValueError)           a checkpoint that is truncated or does not match

Arguments that are wrong at construction time raise plain ``ValueError``/``TypeError``
with a message such as "`batch_size` must be a positive int, got 0"; see
:mod:`feedline._internal.validate`.

>>> from feedline.exceptions import CorruptRecordError
>>> err = CorruptRecordError("data CRC mismatch", path="a.tfrecord", index=3, offset=120)
>>> str(err)
'a.tfrecord: record 3 at byte 120: data CRC mismatch'
>>> isinstance(err, ValueError)
True
"""

from __future__ import annotations

__all__ = [
    "FeedlineError",
    "DataError",
    "CorruptRecordError",
    "DecodeError",
    "MissingFeatureError",
    "ComposeNotAligned",
    "FeedError",
    "IncompleteShardSetError",
    "StateError",
    "StateNotSupportedError",
    "InvalidStateError",
    "OutOfRangeError",
    "PipelineError",
    "WorkerError",
    "WorkerDiedError",
    "ClusterUnavailableError",
    "StageTimeoutError",
    "SharedMemoryError",
    "RemoteReadError",
    "IncompleteDownloadError",
    "CheckpointError",
    "ContextFieldError",
    "RemoteTraceback",
]


class FeedlineError(Exception):
    """Base class of every error feedline raises on purpose."""


class DataError(FeedlineError, ValueError):
    """Bad data met while reading, decoding or converting.

    ``path``, ``index`` (record index, 0-based) and ``offset`` (byte offset of the record,
    or ``line`` for text formats) locate the problem; any of them may be ``None`` when
    the source has no such notion.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        index: int | None = None,
        offset: int | None = None,
        line: int | None = None,
    ) -> None:
        self.message = message
        self.path = None if path is None else str(path)
        self.index = index
        self.offset = offset
        self.line = line
        super().__init__(self._format())

    def _format(self) -> str:
        where = []
        if self.path is not None:
            where.append(self.path)
        loc = []
        if self.index is not None:
            loc.append(f"record {self.index}")
        if self.line is not None:
            loc.append(f"line {self.line}")
        if self.offset is not None:
            loc.append(f"at byte {self.offset}")
        if loc:
            where.append(" ".join(loc))
        return ": ".join([*where, self.message]) if where else self.message

    def __reduce__(self):  # keep the keyword fields across pickling (worker processes)
        return (
            _rebuild_data_error,
            (type(self), self.message, self.path, self.index, self.offset, self.line),
        )


def _rebuild_data_error(cls, message, path, index, offset, line):
    return cls(message, path=path, index=index, offset=offset, line=line)


class CorruptRecordError(DataError):
    """A record whose framing is damaged: CRC mismatch, impossible length, truncated
    tail, bad magic word, malformed protobuf."""


class DecodeError(DataError):
    """A payload whose framing is fine but whose content does not decode (a corrupt
    JPEG, a CSV field that is not a number)."""


class MissingFeatureError(DataError, KeyError):
    """A required feature or column is absent from a record."""

    def __str__(self) -> str:  # KeyError would otherwise quote the message
        return self._format()


class ComposeNotAligned(DataError):
    """``compose(..., check_alignment=True)`` met readers that end at different items."""


class FeedError(DataError):
    """A sample that the DataFeeder cannot convert to its declared input type.

    The message names the input, the sample's index in the batch, what was expected and
    what came.
    """


class IncompleteShardSetError(DataError):
    """A set of ``-of-N`` shards that :class:`feedline.sharded.ShardedWriter` did not finish
    committing (its manifest is pending), or whose files no longer match the manifest
    (a shard missing or of another size). ``path`` is the manifest."""


class StateError(FeedlineError, RuntimeError):
    """An iterator state that cannot be used (wrong pipeline, wrong version)."""


class StateNotSupportedError(StateError):
    """A stage cannot capture its position, e.g. a one-shot Python generator source."""


class InvalidStateError(StateError, ValueError):
    """A resume state whose values do not fit the pipeline it is given to: a wrong type,
    a position past the end, a path outside the directory it must stay in. Raised before
    the state is used."""


class OutOfRangeError(FeedlineError, EOFError):
    """The input of a :mod:`feedline.compat.tf_v1` pipeline is used up (its epoch limit
    reached): TensorFlow's ``tf.errors.OutOfRangeError``, the end of the training loop."""


class PipelineError(FeedlineError, RuntimeError):
    """The runtime failed: a stage, thread or worker process could not go on."""


class WorkerError(PipelineError):
    """A worker raised an exception that could not be re-raised as its own type."""


class WorkerDiedError(PipelineError):
    """A worker process ended without reporting (killed by a signal, the OOM killer)."""


class ClusterUnavailableError(PipelineError, ConnectionError):
    """The Ray cluster a ``backend="ray"`` stage runs on is gone or unreachable; the
    message names the stage and the items it was waiting for."""


class StageTimeoutError(PipelineError, TimeoutError):
    """An element of a ``map(..., timeout=seconds)`` stage was not done in time.

    ``stage`` names the stage (``"map(decode)"``), ``index`` the element's position in the
    stage's input (0-based, counted from where the iterator started), ``timeout`` the
    limit in seconds.

    >>> err = StageTimeoutError("map(slow)", 7, 2.5)
    >>> str(err)
    'map(slow): element 7 not done after 2.5 s (timeout=2.5)'
    >>> isinstance(err, TimeoutError)
    True
    """

    def __init__(self, stage: str, index: int | None, timeout: float) -> None:
        self.stage, self.index, self.timeout = stage, index, timeout
        where = f"element {index}" if index is not None else "an element"
        super().__init__(f"{stage}: {where} not done after {timeout:g} s (timeout={timeout:g})")

    def __reduce__(self):
        return (type(self), (self.stage, self.index, self.timeout))


class SharedMemoryError(FeedlineError, OSError):
    """Shared memory (``/dev/shm``) is missing or too small for the requested buffers."""


class RemoteReadError(FeedlineError, OSError):
    """A read of a remote object (``s3://...``) that failed after feedline's retries and
    timeouts: a connection reset or cut body, a read timeout, a throttling reply
    (``SlowDown``), a server gone. ``path`` is the URL, ``offset`` the byte where the read
    began. It is not a :class:`DataError`, so ``on_error="skip"`` never hides it.

    >>> err = RemoteReadError("connection reset", path="s3://b/a.rec", offset=4096)
    >>> str(err), isinstance(err, OSError)
    ('s3://b/a.rec: at byte 4096: connection reset', True)
    """

    def __init__(self, message: str, *, path: str | None = None,
                 offset: int | None = None) -> None:
        self.message, self.path, self.offset = message, path, offset
        where = [str(path)] if path is not None else []
        if offset is not None:
            where.append(f"at byte {offset}")
        super().__init__(": ".join([*where, message]))

    def __reduce__(self):
        return (_rebuild_remote_error, (type(self), self.message, self.path, self.offset))


def _rebuild_remote_error(cls, message, path, offset):
    return cls(message, path=path, offset=offset)


class IncompleteDownloadError(RemoteReadError):
    """A download that came back short, empty, cut, with a ``Content-Range`` other than
    the one asked for, or from an object that changed meanwhile: it is never renamed into
    a cache."""


class CheckpointError(FeedlineError, ValueError):
    """A checkpoint file that is truncated, corrupt, or made for a different model."""


class ContextFieldError(FeedlineError, AttributeError):
    """A :class:`~feedline.train.RunnerContext` field read before the item that sets it
    has run; the message names that item. An ``AttributeError``, so ``hasattr`` and
    ``getattr(context, name, default)`` keep working."""


class RemoteTraceback(Exception):
    """Carries the formatted traceback of an exception raised in another process or
    thread; it is set as the ``__cause__`` of the re-raised exception so that the
    consumer's traceback shows where the error really happened."""

    def __init__(self, tb: str) -> None:
        self.tb = tb
        super().__init__(tb)

    def __str__(self) -> str:
        return "\n" + self.tb
