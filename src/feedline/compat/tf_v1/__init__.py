"""TensorFlow 1's queue-based input API ("Reading data") over feedline's pipeline engine.

``import feedline.compat.tf_v1 as tf`` and the guide's programs run with ``tf.``
meaning this module — filename producers, readers returning ``(key, value)``,
decoders, the batching functions, ``Coordinator`` and ``start_queue_runners`` — and
``Session.run`` (or plain iteration with :func:`iterate`) in place of TensorFlow's
session. Every name is a thin function over :class:`~feedline.dataset.base.Dataset`
stages: a filename queue is a dataset of names (``global_shuffle`` per epoch,
``repeat(num_epochs)``), ``reader.read`` is an ``interleave`` of the files' records, a
decoder is a function composed onto the records, ``shuffle_batch`` is
``shuffle(capacity)`` then ``batch``, ``*_join`` is an ``interleave`` of the readers,
and a queue runner is a background ``prefetch`` of ``capacity`` elements.

What matches TensorFlow: the records, keys (``b"data_batch_0.bin:0"``: file name and
record number for fixed-length files, line number from 1 for text lines, byte offset
for TFRecord files), values and their dtypes, batch shapes, ``num_epochs`` ending in
:class:`~feedline.exceptions.OutOfRangeError` (``errors.OutOfRangeError``), the final
short batch dropped unless ``allow_smaller_final_batch=True``, ``dynamic_pad`` padding
with zeros. In-order pipelines (``shuffle=False``, ``batch``, one thread) give
TensorFlow's exact sequence; shuffled ones give the same records in another random
order (feedline's seeded generators, not TensorFlow's).

What differs: there is no graph to build or initialise (``global_variables_initializer``
and ``local_variables_initializer`` are accepted no-ops); a ``Tensor`` here is a
function of one record of its input, so tensors from different readers combine only
through ``batch_join``/``shuffle_batch_join``; feeding (``feed_dict``) is not needed
— call Python. Runners start on first use if ``start_queue_runners`` was not called.

>>> import os, tempfile
>>> import feedline.compat.tf_v1 as tf
>>> d = tempfile.mkdtemp()
>>> with open(os.path.join(d, "file0.csv"), "w") as f: _ = f.write("1,2\\n3,\\n")
>>> queue = tf.train.string_input_producer([os.path.join(d, "file0.csv")], num_epochs=1)
>>> key, value = tf.TextLineReader().read(queue)
>>> col1, col2 = tf.decode_csv(value, record_defaults=[[0], [7]])
>>> sess = tf.Session()
>>> sess.run([col1, col2])[1]
np.int32(2)
>>> [(k.endswith(b"file0.csv:2"), a, b) for k, a, b in tf.iterate([key, col1, col2])]
[(True, np.int32(3), np.int32(7))]
>>> next(tf.iterate(col1), "used up")        # the epoch limit stays reached
'used up'
>>> sess.close()                              # a new session would read from the start
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from feedline.compat.tf_v1 import errors, train
from feedline.compat.tf_v1._graph import (
    Graph,
    Root,
    Tensor,
    evaluate,
    flatten,
    get_default_graph,
    lift,
    reset_default_graph,
)
from feedline.dataset.base import Dataset
from feedline.exceptions import OutOfRangeError
from feedline.formats.csv import decode_csv as _decode_csv
from feedline.formats.example import FixedLenFeature, VarLenFeature
from feedline.formats.example import parse_single_example as _parse_single_example
from feedline.formats.fixed import read_fixed
from feedline.formats.text import read_lines
from feedline.formats.tfrecord import read as _read_tfrecord
from feedline.storage.fs import open_file

__all__ = [
    "train", "errors", "Session", "Tensor", "Graph", "iterate", "from_dataset", "get_default_graph",
    "reset_default_graph", "global_variables_initializer", "local_variables_initializer",
    "ReaderBase", "TextLineReader", "FixedLengthRecordReader", "TFRecordReader",
    "WholeFileReader", "TFRecordOptions", "decode_csv", "decode_raw", "parse_single_example",
    "FixedLenFeature", "VarLenFeature", "stack", "cast", "reshape", "transpose",
    "strided_slice", "py_func", "constant", "uint8", "int8", "int16", "int32", "int64", "float16",
    "float32", "float64", "string",
]

uint8, int8, int16, int32, int64 = np.uint8, np.int8, np.int16, np.int32, np.int64
float16, float32, float64 = np.float16, np.float32, np.float64
string: type = bytes


# ------------------------------------------------------------------ sessions
class _NoOp:
    """An operation that does nothing when run (the variable initialisers)."""

    def __repr__(self) -> str:
        return "<no-op>"


def global_variables_initializer() -> _NoOp:
    """Accepted for the guide's programs: there are no variables to initialise; running it
    does nothing.

    >>> Session().run(global_variables_initializer()) is None
    True
    """
    return _NoOp()


def local_variables_initializer() -> _NoOp:
    """As :func:`global_variables_initializer` (the epoch counters live in the pipeline).

    >>> Session().run([local_variables_initializer()])
    [None]
    """
    return _NoOp()


def _run(fetches: Any) -> Any:
    leaves, build = flatten(fetches)
    roots: dict[int, Root] = {}
    for leaf in leaves:
        if isinstance(leaf, Tensor):
            roots.setdefault(id(leaf.root), leaf.root)
    elements = {key: root.runner().next() for key, root in roots.items()}
    memos: dict[int, dict] = {key: {} for key in roots}
    values = []
    for leaf in leaves:
        if isinstance(leaf, Tensor):
            key = id(leaf.root)
            values.append(evaluate([leaf], elements[key], memos[key])[0])
        elif isinstance(leaf, _NoOp) or leaf is None:
            values.append(None)
        else:
            raise TypeError(f"cannot fetch a {type(leaf).__name__}: fetch tensors made by "
                            "this module")
    return build(values)


class Session:
    """``tf.Session``: ``run(fetches)`` takes one element from each input the fetches
    read and returns their values, in the structure of ``fetches``; raises
    :class:`~feedline.exceptions.OutOfRangeError` when an input is used up. ``close()``
    (or leaving the ``with`` block) stops the graph's runners.

    Args:
        target: accepted for TensorFlow's signature; ignored (there is no server to connect to).
        graph: the graph whose runners :meth:`close` stops; ``None``: the default graph
            at the time the session is made.
        config: accepted for TensorFlow's signature; ignored.

    >>> root_values = train.slice_input_producer([np.arange(3)], shuffle=False, num_epochs=1)
    >>> with Session() as sess:
    ...     [int(sess.run(root_values[0])) for _ in range(3)]
    [0, 1, 2]
    """

    def __init__(self, target: str = "", graph: Graph | None = None, config: Any = None) -> None:
        self.graph = graph or get_default_graph()

    def run(self, fetches: Any, feed_dict: dict | None = None, options: Any = None,
            run_metadata: Any = None) -> Any:
        """The values of ``fetches`` for the next element of each input they read.

        Args:
            fetches: a tensor of this module, an initialiser (its value is ``None``),
                ``None``, or a list, tuple or dict nesting them; the result has the same
                structure. Any other leaf raises ``TypeError``. Tensors of one input are
                evaluated on the same element.
            feed_dict: must be empty or ``None``: there are no placeholders, and a
                non-empty dict raises ``TypeError``.
            options: accepted for TensorFlow's signature; ignored.
            run_metadata: accepted for TensorFlow's signature; ignored.

        Raises:
            OutOfRangeError: when an input is used up or its runner was stopped.
        """
        if feed_dict:
            raise TypeError("feed_dict: there are no placeholders here; compute the value "
                            "in Python and pass it where it is needed")
        return _run(fetches)

    def close(self) -> None:
        """Stop the graph's runners; a new session reads the inputs from the start."""
        self.graph.stop(discard=True)

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def iterate(fetches: Any, *, coord: train.Coordinator | None = None) -> Iterator[Any]:
    """The guide's loop ``while not coord.should_stop(): sess.run(fetches)`` as a Python
    iterator: the values of ``fetches`` for each step until an input is used up (the
    ``OutOfRangeError``) or ``coord`` is asked to stop.

    Args:
        fetches: what to evaluate each step, as for :meth:`Session.run`.
        coord: checked before every step: once its stop is requested the iterator ends;
            ``None``: only the end of an input ends it.

    >>> values = train.slice_input_producer([np.arange(4)], shuffle=False, num_epochs=1)
    >>> [int(v) for v in iterate(values[0])]
    [0, 1, 2, 3]
    """
    while coord is None or not coord.should_stop():
        try:
            yield _run(fetches)
        except OutOfRangeError:
            return


def from_dataset(dataset: Dataset, *, capacity: int = 32, name: str | None = None) -> Tensor:
    """A feedline :class:`~feedline.dataset.base.Dataset` as an input of this API: a
    tensor whose value is one item per step (index it, ``t[0]``, for a tuple's parts).
    Its threads and worker processes stop with the runner (``coord.request_stop``).

    Args:
        dataset: the feedline dataset; anything else raises ``TypeError``.
        capacity: items its runner reads ahead, a positive int (else ``ValueError``/
            ``TypeError``).
        name: the runner's name (its thread is ``feedline-<name>``); ``None``: the
            dataset's name.

    >>> from feedline import Dataset
    >>> item = from_dataset(Dataset.range(3).map(lambda x: (x, -x)))
    >>> [(int(a), int(b)) for a, b in iterate([item[0], item[1]])]
    [(0, 0), (1, -1), (2, -2)]
    """
    if not isinstance(dataset, Dataset):
        raise TypeError(f"from_dataset needs a feedline Dataset, got {type(dataset).__name__}")
    from feedline._internal.validate import positive_int

    root = Root(dataset, name=name or dataset.name, capacity=positive_int("capacity", capacity))
    return Tensor(root, lambda e, memo: e)


# ------------------------------------------------------------------ readers
def _name(filename: Any) -> tuple[str, bytes]:
    if isinstance(filename, bytes):
        return os.fsdecode(filename), filename
    return str(filename), os.fsencode(str(filename))


class ReaderBase:
    """A reader: ``read(queue)`` returns ``(key, value)`` tensors for the records of the
    files the filename queue gives, one file after the other (``tf.ReaderBase``).

    >>> import os, tempfile
    >>> import feedline.compat.tf_v1 as tf
    >>> path = os.path.join(tempfile.mkdtemp(), "lines.txt")
    >>> with open(path, "w") as f: _ = f.write("a" + chr(10) + "b" + chr(10))
    >>> reader = tf.TextLineReader()
    >>> isinstance(reader, tf.ReaderBase)
    True
    >>> key, value = reader.read(tf.train.string_input_producer([path], num_epochs=1))
    >>> list(tf.iterate(value))
    [b'a', b'b']
    """

    def _records(self, path: str, name: bytes) -> Iterator[tuple[bytes, Any]]:  # pragma: no cover
        raise NotImplementedError

    def file_records(self, filename: Any) -> Dataset:
        """The ``(key, value)`` records of one file, as a dataset (the file is opened when
        the dataset is iterated).

        Args:
            filename: the file's name or URL, ``str`` or ``bytes``; the keys start with it
                as given (as bytes).
        """
        path, name = _name(filename)
        return Dataset.from_reader(lambda: self._records(path, name))

    def read(self, queue: train.FilenameQueue, name: str | None = None) -> tuple[Tensor, Tensor]:
        """The ``(key, value)`` tensors of one record per step: every record of the first
        file the queue gives, then of the next.

        Args:
            queue: the filename queue (:func:`train.string_input_producer`); anything
                else raises ``TypeError``. Its ``capacity`` is how many records are read
                ahead.
            name: the runner's name (its thread is ``feedline-<name>``); ``None``:
                ``"<reader class>.read"``.
        """
        return self._read(queue, self.file_records, name or f"{type(self).__name__}.read")

    def read_up_to(self, queue: train.FilenameQueue, num_records: int,
                   name: str | None = None) -> tuple[Tensor, Tensor]:
        """Up to ``num_records`` ``(key, value)`` pairs per step, as two vectors, all from
        one file (fewer at a file's end), as TensorFlow's ``read_up_to``; pair it with
        ``batch(..., enqueue_many=True)``.

        Args:
            queue: the filename queue, as for :meth:`read`.
            num_records: most pairs per step, a positive int (else ``ValueError``/
                ``TypeError``).
            name: the runner's name; ``None``: ``"<reader class>.read_up_to"``.
        """
        from feedline._internal.validate import positive_int

        n = positive_int("num_records", num_records)
        return self._read(queue, lambda f: self.file_records(f).batch(n, collate=_object_columns),
                          name or f"{type(self).__name__}.read_up_to")

    def _read(self, queue: train.FilenameQueue, per_file: Any, name: str) -> tuple[Tensor, Tensor]:
        if not isinstance(queue, train.FilenameQueue):
            raise TypeError(f"read needs a filename queue (train.string_input_producer), got "
                            f"{type(queue).__name__}")
        root = Root(queue.dataset.interleave(per_file, cycle_length=1), name=name,
                    capacity=queue.capacity)
        root.per_file = per_file  # type: ignore[attr-defined]  # for readers joined on one queue
        root.queue = queue  # type: ignore[attr-defined]
        return (Tensor(root, lambda e, memo: e[0]), Tensor(root, lambda e, memo: e[1]))


def _object_columns(records: list) -> tuple[np.ndarray, np.ndarray]:
    keys, values = np.empty(len(records), dtype=object), np.empty(len(records), dtype=object)
    keys[:], values[:] = [k for k, _ in records], [v for _, v in records]
    return keys, values


class TextLineReader(ReaderBase):
    """Lines of text files, without their line endings; the key is ``b"<file>:<line>"``,
    the line number counting from 1 and including the ``skip_header_lines`` skipped.

    Args:
        skip_header_lines: lines skipped at the start of every file; ``None``: none.
        name: accepted for TensorFlow's signature; ignored.

    >>> TextLineReader(skip_header_lines=1).skip_header_lines
    1
    """

    def __init__(self, skip_header_lines: int | None = None, name: str | None = None) -> None:
        self.skip_header_lines = int(skip_header_lines or 0)

    def _records(self, path: str, name: bytes) -> Iterator[tuple[bytes, Any]]:
        with read_lines(path, skip_header_lines=self.skip_header_lines, with_key=True) as lines:
            for key, line in lines:
                yield name + key[len(path):].encode(), line


class FixedLengthRecordReader(ReaderBase):
    """Records of ``record_bytes`` bytes after ``header_bytes`` and before
    ``footer_bytes``; with ``hop_bytes`` a record starts every ``hop_bytes`` bytes
    (records may overlap). The key is ``b"<file>:<record number>"`` from 0.

    Args:
        record_bytes: the length of every record in bytes.
        header_bytes: bytes skipped at the start of every file; ``None``: none.
        footer_bytes: bytes ignored at the end of every file; ``None``: none.
        hop_bytes: ``None`` or 0: records follow each other and a partial trailing
            record raises :class:`~feedline.exceptions.CorruptRecordError` when the
            reader reaches it; else a record starts every
            ``hop_bytes`` bytes of the body (the file is read whole into memory) and a
            trailing part shorter than ``record_bytes`` is left out.
        name: accepted for TensorFlow's signature; ignored.
        encoding: must be empty or ``None``: compressed files are not supported, and
            any other value raises ``ValueError``.

    >>> FixedLengthRecordReader(record_bytes=3073).record_bytes
    3073
    """

    def __init__(self, record_bytes: int, header_bytes: int | None = None,
                 footer_bytes: int | None = None, hop_bytes: int | None = None,
                 name: str | None = None, encoding: str | None = None) -> None:
        self.record_bytes = int(record_bytes)
        self.header_bytes = int(header_bytes or 0)
        self.footer_bytes = int(footer_bytes or 0)
        self.hop_bytes = int(hop_bytes or 0)
        if encoding:
            raise ValueError("FixedLengthRecordReader: compressed files are not supported "
                             f"(encoding={encoding!r})")

    def _records(self, path: str, name: bytes) -> Iterator[tuple[bytes, Any]]:
        if self.hop_bytes:
            with open_file(path, "rb") as f:
                data = f.read()
            body = data[self.header_bytes:len(data) - self.footer_bytes]
            starts = range(0, len(body) - self.record_bytes + 1, self.hop_bytes)
            for i, start in enumerate(starts):
                yield name + b":%d" % i, body[start:start + self.record_bytes]
            return
        with read_fixed(path, self.record_bytes, header_bytes=self.header_bytes,
                        footer_bytes=self.footer_bytes) as records:
            for i, record in enumerate(records):
                yield name + b":%d" % i, bytes(record)


class TFRecordOptions:
    """``tf.python_io.TFRecordOptions``: the compression of TFRecord files.

    Args:
        compression_type: ``"GZIP"``, ``"ZLIB"`` (any case), or ``None``/``""`` for
            none; kept as given and checked when a file is read (an unknown name raises
            ``ValueError`` then).

    >>> TFRecordOptions("GZIP").compression_type
    'GZIP'
    """

    def __init__(self, compression_type: str | None = None) -> None:
        self.compression_type = compression_type or None


class TFRecordReader(ReaderBase):
    """Records of TFRecord files (checksums verified); the key is ``b"<file>:<offset>"``,
    the byte offset of the record's frame in the (uncompressed) file.

    Args:
        name: accepted for TensorFlow's signature; ignored.
        options: a :class:`TFRecordOptions` or a compression name (``"GZIP"``,
            ``"ZLIB"``, any case, or feedline's ``"auto"``, which detects it per file);
            ``None`` or ``""``: uncompressed files.

    >>> TFRecordReader(options=TFRecordOptions("ZLIB")).compression
    'ZLIB'
    """

    def __init__(self, name: str | None = None, options: TFRecordOptions | str | None = None) -> None:
        if isinstance(options, TFRecordOptions):
            options = options.compression_type
        self.compression = options or None

    def _records(self, path: str, name: bytes) -> Iterator[tuple[bytes, Any]]:
        offset = 0
        with _read_tfrecord(path, compression=self.compression) as records:
            for record in records:
                yield name + b":%d" % offset, record
                offset += len(record) + 16


class WholeFileReader(ReaderBase):
    """One record per file: the key is the file name, the value its whole contents.

    Args:
        name: accepted for TensorFlow's signature; ignored.

    >>> WholeFileReader()
    WholeFileReader()
    """

    def __init__(self, name: str | None = None) -> None:
        pass

    def _records(self, path: str, name: bytes) -> Iterator[tuple[bytes, Any]]:
        with open_file(path, "rb") as f:
            yield name, f.read()

    def __repr__(self) -> str:
        return "WholeFileReader()"


# ------------------------------------------------------------------ decoders and operations
def _decode_csv_value(records: Any, record_defaults: Sequence[Any], options: dict) -> list:
    if isinstance(records, (bytes, str)):
        return [column[0] for column in _decode_csv([records], record_defaults, **options)]
    return _decode_csv(records, record_defaults, **options)


def decode_csv(records: Any, record_defaults: Sequence[Any], field_delim: str = ",",
               use_quote_delim: bool = True, name: str | None = None, na_value: str = "",
               select_cols: Sequence[int] | None = None) -> list[Any]:
    """``tf.decode_csv``: one value per column (a scalar for one record, an array for
    several), typed by ``record_defaults`` (``[1]`` int32, ``[1.0]`` float32, ``[""]``
    bytes; an empty list makes the column required). On a tensor, a list of tensors.
    Errors are :mod:`feedline.csv`'s (``DecodeError``, ``MissingFeatureError``).

    Args:
        records: one record (``str`` or ``bytes``, no line ending), a sequence or array
            of records, or a tensor of either.
        record_defaults: one entry per column (per selected column with
            ``select_cols``): its type and the value of an empty field, as
            :mod:`feedline.csv` describes.
        field_delim: the one-character field separator (not a quote or line break;
            else ``ValueError``).
        use_quote_delim: quoted fields follow RFC 4180; ``False``: quotes are ordinary
            text.
        name: accepted for TensorFlow's signature; ignored.
        na_value: a field equal to it counts as empty (takes the column default).
        select_cols: strictly increasing column indices to keep, as many as
            ``record_defaults``; ``None``: every column.

    >>> decode_csv(b"1,,x", [[0], [5], [""]])
    [np.int32(1), np.int32(5), b'x']
    """
    options = {"field_delim": field_delim, "use_quote_delim": use_quote_delim,
               "na_value": na_value, "select_cols": select_cols}
    width = len(select_cols) if select_cols is not None else len(record_defaults)
    decoded = lift(lambda r: _decode_csv_value(r, record_defaults, options), records)
    if not isinstance(decoded, Tensor):
        return decoded
    return [lift(lambda cols, i=i: cols[i], decoded) for i in range(width)]


def _decode_raw_value(data: Any, dtype: np.dtype) -> np.ndarray:
    if isinstance(data, (bytes, bytearray, memoryview)):
        return np.frombuffer(data, dtype=dtype).astype(dtype.newbyteorder("="))
    rows = [_decode_raw_value(d, dtype) for d in np.asarray(data, dtype=object).ravel()]
    return np.stack(rows).reshape(np.shape(data) + rows[0].shape[-1:]) if rows else \
        np.zeros(np.shape(data) + (0,), dtype=dtype.newbyteorder("="))


def decode_raw(input_bytes: Any, out_type: Any, little_endian: bool = True,
               name: str | None = None) -> Any:
    """``tf.decode_raw``: the bytes as a vector of ``out_type`` (a batch of equal-length
    strings gives one more axis).

    Args:
        input_bytes: ``bytes``, an array of equal-length byte strings, or a tensor of
            either; a length not a multiple of the item size raises ``ValueError``.
        out_type: the element dtype (anything ``numpy.dtype`` accepts, such as
            :data:`uint8` or :data:`float32`).
        little_endian: the byte order of the input; the values come back in the
            machine's own order.
        name: accepted for TensorFlow's signature; ignored.

    >>> decode_raw(b"\\x01\\x00\\x02\\x00", int16).tolist()
    [1, 2]
    """
    dtype = np.dtype(out_type).newbyteorder("<" if little_endian else ">")
    return lift(lambda v: _decode_raw_value(v, dtype), input_bytes)


def parse_single_example(serialized: Any, features: dict, name: str | None = None,
                         example_names: Any = None) -> Any:
    """``tf.parse_single_example``: a dict of the features of one serialized
    ``tf.train.Example`` (see :mod:`feedline.example`); on a tensor, a dict of tensors.

    Args:
        serialized: the serialized ``Example`` bytes, or a tensor of them.
        features: the feature names to parse and their specs
            (:class:`FixedLenFeature`, :class:`VarLenFeature`).
        name: accepted for TensorFlow's signature; ignored.
        example_names: accepted for TensorFlow's signature; ignored.

    >>> from feedline.example import encode_example
    >>> parse_single_example(encode_example({"label": [3]}),
    ...                      {"label": FixedLenFeature([], int64)})["label"]
    np.int64(3)
    """
    parsed = lift(lambda s: _parse_single_example(s, features), serialized)
    if not isinstance(parsed, Tensor):
        return parsed
    return {key: lift(lambda p, key=key: p[key], parsed) for key in features}


def stack(values: Sequence[Any], axis: int = 0, name: str | None = None) -> Any:
    """``tf.stack``: the values stacked along a new axis (``numpy.stack``).

    Args:
        values: arrays (or tensors of one input) of one shape.
        axis: the position of the new axis.
        name: accepted for TensorFlow's signature; ignored.

    >>> stack([1, 2]).tolist()
    [1, 2]
    """
    return lift(lambda *vs: np.stack([np.asarray(v) for v in vs], axis=axis), *values)


def cast(x: Any, dtype: Any, name: str | None = None) -> Any:
    """``tf.cast``: ``numpy``'s ``astype`` (floats to ints truncate toward zero).

    Args:
        x: a value or a tensor.
        dtype: the target dtype (anything ``numpy.dtype`` accepts).
        name: accepted for TensorFlow's signature; ignored.

    >>> cast([1.7], int32).tolist()
    [1]
    """
    return lift(lambda v: np.asarray(v).astype(dtype), x)


def reshape(tensor: Any, shape: Sequence[int], name: str | None = None) -> Any:
    """``tf.reshape`` (``numpy.reshape``).

    Args:
        tensor: a value or a tensor.
        shape: the new shape; one ``-1`` is inferred.
        name: accepted for TensorFlow's signature; ignored.

    >>> reshape(np.arange(4), [2, 2]).tolist()
    [[0, 1], [2, 3]]
    """
    return lift(lambda v: np.reshape(v, tuple(shape)), tensor)


def transpose(a: Any, perm: Sequence[int] | None = None, name: str | None = None) -> Any:
    """``tf.transpose`` (``numpy.transpose``).

    Args:
        a: a value or a tensor.
        perm: the permutation of the axes; ``None`` reverses them.
        name: accepted for TensorFlow's signature; ignored.

    >>> transpose(np.arange(6).reshape(2, 3), [1, 0]).shape
    (3, 2)
    """
    return lift(lambda v: np.transpose(v, perm), a)


def strided_slice(input_: Any, begin: Sequence[int], end: Sequence[int],
                  strides: Sequence[int] | None = None, name: str | None = None) -> Any:
    """``tf.strided_slice`` (without the mask arguments): ``input_[begin:end:strides]``
    in each leading dimension.

    Args:
        input_: a value or a tensor.
        begin: the start index per dimension.
        end: the stop index (excluded) per dimension.
        strides: the step per dimension; ``None``: 1 in each.
        name: accepted for TensorFlow's signature; ignored.

    >>> strided_slice(np.arange(10), [1], [7], [2]).tolist()
    [1, 3, 5]
    """
    steps = list(strides) if strides is not None else [1] * len(begin)
    index = tuple(slice(b, e, s) for b, e, s in zip(begin, end, steps))
    return lift(lambda v: np.asarray(v)[index], input_)


def py_func(func: Any, inp: Sequence[Any], Tout: Any, stateful: bool = True,  # noqa: N803
            name: str | None = None) -> Any:
    """``tf.py_func``: ``func(*values of inp)`` as a tensor (a list of tensors when
    ``Tout`` is a list: ``func`` then returns that many values), each converted to
    ``Tout``'s dtype.

    Args:
        func: a Python function of the values of ``inp``.
        inp: its arguments: values or tensors (all tensors from one input).
        Tout: the result's dtype, or a list of dtypes for that many results.
        stateful: accepted for TensorFlow's signature; ignored.
        name: accepted for TensorFlow's signature; ignored.

    >>> py_func(lambda a, b: a * b, [3, 4], int64)
    np.int64(12)
    """
    def call(*values: Any) -> Any:
        out = func(*values)
        if isinstance(Tout, (list, tuple)):
            return [np.asarray(v, dtype=t)[()] for v, t in zip(out, Tout)]
        return np.asarray(out, dtype=Tout)[()]

    result = lift(call, *inp)
    if isinstance(Tout, (list, tuple)) and isinstance(result, Tensor):
        return [lift(lambda r, i=i: r[i], result) for i in range(len(Tout))]
    return result


def constant(value: Any, dtype: Any = None, shape: Sequence[int] | None = None,
             name: str | None = None) -> np.ndarray:
    """``tf.constant``: the value as a numpy array (preloaded data).

    Args:
        value: a scalar, nested list or array.
        dtype: the array's dtype; ``None``: numpy's choice.
        shape: the shape the value is reshaped to (it must have that many elements: a
            scalar is not broadcast as TensorFlow does); ``None``: the value's own.
        name: accepted for TensorFlow's signature; ignored.

    >>> constant([1, 2], dtype=float32)
    array([1., 2.], dtype=float32)
    """
    arr = np.asarray(value, dtype=dtype)
    return arr.reshape(tuple(shape)) if shape is not None else arr
