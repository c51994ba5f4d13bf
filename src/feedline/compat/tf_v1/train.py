"""``tf.train`` for :mod:`feedline.compat.tf_v1`: filename and slice producers, the
batching functions, ``Coordinator``, ``QueueRunner`` and ``start_queue_runners``.

Each producer or batching function returns tensors over a new pipeline (see
:mod:`feedline.compat.tf_v1`):

* ``string_input_producer(names, num_epochs, shuffle, seed)``: the names, in a new
  seeded order each epoch when ``shuffle`` (TensorFlow's default), ``num_epochs`` times
  (forever when ``None``);
* ``slice_input_producer(arrays, ...)``: one row of every array per step, likewise;
* ``batch``/``shuffle_batch``: ``batch_size`` consecutive elements, each component
  stacked (``dynamic_pad=True``: padded with zeros to the longest); ``shuffle_batch``
  first draws elements at random from a buffer of ``capacity`` (at least
  ``min_after_dequeue + 1``); ``enqueue_many=True`` takes every tensor as a batch of
  elements; ``num_threads`` computes the elements in that many threads;
  ``allow_smaller_final_batch=False`` (TensorFlow's default) drops a short last batch;
  the result has the structure of ``tensors``, except that a list of one tensor gives
  one tensor, as in TensorFlow (``shapes``, ``shared_name`` and ``name`` are accepted
  and not needed: values keep their own shapes; ``Tensor.set_shape`` checks them);
* ``batch_join``/``shuffle_batch_join``: the same over several tensor lists read at
  once. Readers that share one filename queue take the files in turn (an interleave
  of the files, one per reader), so each file is read by one reader, as TensorFlow's
  shared queue gives them out.

>>> import numpy as np
>>> x, = slice_input_producer([np.arange(10)], num_epochs=1, shuffle=False)
>>> batches = batch([x], batch_size=4, allow_smaller_final_batch=True)
>>> from feedline.compat.tf_v1 import iterate
>>> [b.tolist() for b in iterate(batches)]      # a list of one tensor gives one tensor
[[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
"""

from __future__ import annotations

import contextlib
import glob
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from feedline._internal.validate import optional_positive_int, positive_int
from feedline.compat.tf_v1._graph import (
    QueueRunner,
    Root,
    Tensor,
    common_root,
    evaluate,
    flatten,
    get_default_graph,
)
from feedline.dataset.base import Dataset
from feedline.dataset.padded_batch import pad_batch
from feedline.exceptions import OutOfRangeError

__all__ = [
    "FilenameQueue", "string_input_producer", "slice_input_producer", "range_input_producer",
    "match_filenames_once", "batch", "batch_join", "shuffle_batch", "shuffle_batch_join",
    "Coordinator", "QueueRunner", "start_queue_runners",
]


# ------------------------------------------------------------------ producers
class FilenameQueue:
    """The filename queue ``string_input_producer`` returns: ``dataset`` is the
    sequence of names the readers take.

    Args:
        dataset: the names, in the order readers take them (epochs included).
        capacity: how many records a reader of this queue reads ahead.

    >>> import feedline.compat.tf_v1 as tf
    >>> queue = tf.train.string_input_producer(["a.csv", "b.csv"], num_epochs=2, shuffle=False)
    >>> type(queue).__name__, queue.capacity, queue.dataset.to_list()
    ('FilenameQueue', 32, ['a.csv', 'b.csv', 'a.csv', 'b.csv'])
    """

    def __init__(self, dataset: Dataset, capacity: int) -> None:
        self.dataset = dataset
        self.capacity = capacity

    def __repr__(self) -> str:
        return f"FilenameQueue({self.dataset!r})"


def _whole(element: Any, memo: dict) -> Any:
    return element


def _component(i: int) -> Callable[[Any, dict], Any]:
    def component(element: Any, memo: dict) -> Any:
        return element[i]

    return component


def _epochs(ds: Dataset, shuffle: bool, seed: int | None, num_epochs: int | None) -> Dataset:
    optional_positive_int("num_epochs", num_epochs)
    if shuffle:
        ds = ds.global_shuffle(seed=seed)
    return ds if num_epochs == 1 else ds.repeat(num_epochs)


def string_input_producer(string_tensor: Sequence[Any], num_epochs: int | None = None,
                          shuffle: bool = True, seed: int | None = None, capacity: int = 32,
                          shared_name: str | None = None, name: str | None = None,
                          cancel_op: Any = None) -> FilenameQueue:
    """``tf.train.string_input_producer``: the names in ``string_tensor`` (kept as
    given: no globbing), each epoch in a new order when ``shuffle``.

    Args:
        string_tensor: the file names (``str`` or ``bytes``): a list, a tuple or an
            array (flattened); none raises ``ValueError``.
        num_epochs: passes over the names, a positive int; ``None``: forever. After
            the last, readers raise ``OutOfRangeError``.
        shuffle: a new random order of the names every epoch (a permutation, per epoch,
            of the whole list); ``False``: the order given.
        seed: the seed of those orders (the same seed gives the same orders); ``None``:
            a fresh seed each time the producer is made.
        capacity: how many records a reader of the queue reads ahead, a positive int.
        shared_name: accepted for TensorFlow's signature; ignored.
        name: accepted for TensorFlow's signature; ignored.
        cancel_op: accepted for TensorFlow's signature; ignored.

    >>> string_input_producer(["a", "b"], num_epochs=2, shuffle=False).dataset.to_list()
    ['a', 'b', 'a', 'b']
    """
    names = list(np.asarray(string_tensor, dtype=object).ravel()) if not isinstance(
        string_tensor, (list, tuple)) else list(string_tensor)
    if not names:
        raise ValueError("string_input_producer needs at least one file name")
    ds = _epochs(Dataset.from_iterable(names), bool(shuffle), seed, num_epochs)
    return FilenameQueue(ds, positive_int("capacity", capacity))


def slice_input_producer(tensor_list: Sequence[Any], num_epochs: int | None = None,
                         shuffle: bool = True, seed: int | None = None, capacity: int = 32,
                         shared_name: str | None = None, name: str | None = None) -> list[Tensor]:
    """``tf.train.slice_input_producer``: one tensor per array of ``tensor_list``, each
    step giving the same row of every array (preloaded data), the rows in a new order
    each epoch when ``shuffle``.

    Args:
        tensor_list: arrays (anything ``numpy.asarray`` takes) with equal first
            dimensions; none raises ``ValueError``. One array gives a list of one tensor.
        num_epochs: as in :func:`string_input_producer`, counted in passes over the rows.
        shuffle: as in :func:`string_input_producer`, over the rows.
        seed: as in :func:`string_input_producer`.
        capacity: rows read ahead by the input's runner, a positive int.
        shared_name: accepted for TensorFlow's signature; ignored.
        name: the runner's name; ``None``: ``"slice_input_producer"``.

    >>> from feedline.compat.tf_v1 import Session
    >>> x, y = slice_input_producer([[1, 2], ["a", "b"]], shuffle=False)
    >>> Session().run([x, y])
    [np.int64(1), np.str_('a')]
    """
    arrays: list[Any] = [np.asarray(t) for t in tensor_list]
    if not arrays:
        raise ValueError("slice_input_producer needs at least one array")
    ds = _epochs(Dataset.from_arrays(*arrays), bool(shuffle), seed, num_epochs)
    root = Root(ds, name=name or "slice_input_producer", capacity=positive_int("capacity",
                                                                                capacity))
    if len(arrays) == 1:
        return [Tensor(root, _whole)]
    return [Tensor(root, _component(i)) for i in range(len(arrays))]


def range_input_producer(limit: int, num_epochs: int | None = None, shuffle: bool = True,
                         seed: int | None = None, capacity: int = 32,
                         shared_name: str | None = None, name: str | None = None) -> Tensor:
    """``tf.train.range_input_producer``: the integers ``0 .. limit - 1``, per epoch.

    Args:
        limit: how many integers, a positive int; the values are int32.
        num_epochs: as in :func:`string_input_producer`, counted in passes over the
            integers.
        shuffle: as in :func:`string_input_producer`, over the integers.
        seed: as in :func:`string_input_producer`.
        capacity: integers read ahead by the input's runner, a positive int.
        shared_name: accepted for TensorFlow's signature; ignored.
        name: the runner's name; ``None``: ``"range_input_producer"``.

    >>> from feedline.compat.tf_v1 import iterate
    >>> [int(i) for i in iterate(range_input_producer(3, num_epochs=1, shuffle=False))]
    [0, 1, 2]
    """
    return slice_input_producer([np.arange(positive_int("limit", limit), dtype=np.int32)],
                                num_epochs=num_epochs, shuffle=shuffle, seed=seed,
                                capacity=capacity, name=name or "range_input_producer")[0]


def match_filenames_once(pattern: str | Sequence[str], name: str | None = None) -> list[str]:
    """``tf.train.match_filenames_once``: the sorted names matching the glob
    ``pattern`` (or each of several patterns). It is matched when called, once (there
    is no variable to initialise); a pattern that matches nothing adds nothing.

    Args:
        pattern: a local glob pattern (``glob.glob``: ``*``, ``?``, ``[...]``; ``**`` does
            not recurse), or a list of them.
        name: accepted for TensorFlow's signature; ignored.

    >>> match_filenames_once("/no/such/dir/*.csv")
    []
    """
    patterns = [pattern] if isinstance(pattern, str) else list(pattern)
    return sorted(name for p in patterns for name in glob.glob(p))


# ------------------------------------------------------------------ batching
def _stack(column: Sequence[Any]) -> np.ndarray:
    if all(isinstance(v, (bytes, str)) for v in column):
        out = np.empty(len(column), dtype=object)
        out[:] = list(column)
        return out
    return np.stack([np.asarray(v) for v in column])


def _stack_batch(items: list[tuple]) -> tuple:
    return tuple(_stack(column) for column in zip(*items))


def _pad_batch(items: list[tuple]) -> tuple:
    return tuple(pad_batch([np.asarray(v) for v in column]) for column in zip(*items))


def _elements(leaves: list[Any], root: Root, num_threads: int) -> Dataset:
    def element(e: Any) -> tuple:
        return tuple(evaluate(leaves, e))

    root.consumed = True
    if num_threads > 1:
        return root.dataset.map(element, num_workers=num_threads, backend="thread")
    return root.dataset.map(element)


def _structure(tensors: Any) -> tuple[list[Any], Any, bool]:
    # a list of one tensor gives one tensor back, as TensorFlow's batching functions do
    single = isinstance(tensors, Tensor) or (isinstance(tensors, list) and len(tensors) == 1
                                             and isinstance(tensors[0], Tensor))
    if single and isinstance(tensors, list):
        tensors = tensors[0]
    leaves, build = flatten([tensors] if single else tensors)
    if not leaves:
        raise ValueError("nothing to batch: `tensors` is empty")
    return leaves, build, single


def _finish(ds: Dataset, build: Any, single: bool, width: int, *, batch_size: int,
            capacity: int, enqueue_many: bool, dynamic_pad: bool,
            allow_smaller_final_batch: bool, shuffle: tuple[int, int | None] | None,
            name: str) -> Any:
    batch_size = positive_int("batch_size", batch_size)
    capacity = positive_int("capacity", capacity)
    if enqueue_many:
        ds = ds.unbatch()
    if shuffle is not None:
        min_after_dequeue, seed = shuffle
        if min_after_dequeue >= capacity:
            raise ValueError(f"`capacity` ({capacity}) must be larger than "
                             f"`min_after_dequeue` ({min_after_dequeue})")
        ds = ds.shuffle(capacity, seed=seed)
    ds = ds.batch(batch_size, drop_remainder=not allow_smaller_final_batch,
                  collate=_pad_batch if dynamic_pad else _stack_batch)
    root = Root(ds, name=name, capacity=max(1, -(-capacity // batch_size)))
    outputs = [Tensor(root, _component(i)) for i in range(width)]
    result = build(outputs)
    return result[0] if single else result


def batch(tensors: Any, batch_size: int, num_threads: int = 1, capacity: int = 32,
          enqueue_many: bool = False, shapes: Any = None, dynamic_pad: bool = False,
          allow_smaller_final_batch: bool = False, shared_name: str | None = None,
          name: str | None = None) -> Any:
    """``tf.train.batch``: batches of ``batch_size`` elements, in order; the same
    structure as ``tensors`` (a tensor, list or dict), each value with a leading batch
    axis. See the module docstring.

    Args:
        tensors: a tensor, or a list, tuple or dict nesting tensors of one input (tensors
            of different inputs raise ``ValueError``: use :func:`batch_join`); a list of
            one tensor gives one tensor back.
        batch_size: elements per batch, a positive int.
        num_threads: threads computing the elements (decoding, parsing), a positive
            int; the order stays the input's.
        capacity: elements buffered: the batches' runner reads ``ceil(capacity /
            batch_size)`` batches ahead. A positive int.
        enqueue_many: every value of ``tensors`` is a batch of elements, split along its
            first axis before batching.
        shapes: accepted for TensorFlow's signature; ignored: values keep their own shapes (``Tensor.set_shape`` checks them).
        dynamic_pad: pad each component with zeros to the largest shape in its batch;
            ``False``: every element must have the same shape.
        allow_smaller_final_batch: yield a last batch shorter than ``batch_size``;
            ``False`` drops it.
        shared_name: accepted for TensorFlow's signature; ignored.
        name: the runner's name; ``None``: ``"batch"``.

    >>> x, = slice_input_producer([np.arange(5)], num_epochs=1, shuffle=False)
    >>> from feedline.compat.tf_v1 import iterate
    >>> [b.tolist() for b in iterate(batch(x, batch_size=2))]   # the short batch dropped
    [[0, 1], [2, 3]]
    """
    leaves, build, single = _structure(tensors)
    ds = _elements(leaves, common_root(leaves, "batch"), positive_int("num_threads", num_threads))
    return _finish(ds, build, single, len(leaves), batch_size=batch_size, capacity=capacity,
                   enqueue_many=enqueue_many, dynamic_pad=dynamic_pad,
                   allow_smaller_final_batch=allow_smaller_final_batch, shuffle=None,
                   name=name or "batch")


def shuffle_batch(tensors: Any, batch_size: int, capacity: int, min_after_dequeue: int,
                  num_threads: int = 1, seed: int | None = None, enqueue_many: bool = False,
                  shapes: Any = None, allow_smaller_final_batch: bool = False,
                  shared_name: str | None = None, name: str | None = None) -> Any:
    """``tf.train.shuffle_batch``: as :func:`batch`, the elements drawn at random from a
    buffer of ``capacity``. See the module docstring.

    Args:
        tensors: as for :func:`batch`.
        batch_size: elements per batch, a positive int.
        capacity: the shuffle buffer's size in elements, a positive int larger than
            ``min_after_dequeue`` (else ``ValueError``); the batches' runner reads
            ``ceil(capacity / batch_size)`` batches ahead.
        min_after_dequeue: a non-negative int below ``capacity`` (else ``ValueError``);
            only checked: the buffer is always filled to ``capacity``.
        num_threads: threads computing the elements, as for :func:`batch`.
        seed: the shuffle's seed; ``None``: a fresh order each run.
        enqueue_many: every value of ``tensors`` is a batch of elements.
        shapes: accepted for TensorFlow's signature; ignored.
        allow_smaller_final_batch: yield a last batch shorter than ``batch_size``;
            ``False`` drops it.
        shared_name: accepted for TensorFlow's signature; ignored.
        name: the runner's name; ``None``: ``"shuffle_batch"``.

    >>> x, = slice_input_producer([np.arange(6)], num_epochs=1, shuffle=False)
    >>> from feedline.compat.tf_v1 import iterate
    >>> out = [b.tolist() for b in iterate(shuffle_batch(x, 3, capacity=6, min_after_dequeue=2,
    ...                                                  seed=1))]
    >>> sorted(sum(out, []))
    [0, 1, 2, 3, 4, 5]
    """
    leaves, build, single = _structure(tensors)
    ds = _elements(leaves, common_root(leaves, "shuffle_batch"),
                   positive_int("num_threads", num_threads))
    return _finish(ds, build, single, len(leaves), batch_size=batch_size, capacity=capacity,
                   enqueue_many=enqueue_many, dynamic_pad=False,
                   allow_smaller_final_batch=allow_smaller_final_batch,
                   shuffle=(_min_after_dequeue(min_after_dequeue), seed),
                   name=name or "shuffle_batch")


def _min_after_dequeue(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ValueError(f"`min_after_dequeue` must be a non-negative int, got {value!r}")
    return int(value)


def _joined(tensors_list: Sequence[Any], what: str) -> tuple[Dataset, Any, bool, int]:
    lists = list(tensors_list)
    if not lists:
        raise ValueError(f"{what} needs at least one list of tensors")
    parts = [_structure(t) for t in lists]
    widths = {len(p[0]) for p in parts}
    if len(widths) != 1:
        raise ValueError(f"{what}: the tensor lists have different lengths {sorted(widths)}")
    roots = [common_root(p[0], what) for p in parts]
    for r in roots:
        r.consumed = True
    queues = {id(getattr(r, "queue", None)) for r in roots}
    n = len(parts)
    if len(queues) == 1 and all(hasattr(r, "per_file") for r in roots):
        queue = roots[0].queue  # type: ignore[attr-defined]

        def file_elements(numbered: tuple[int, Any]) -> Dataset:
            k, filename = numbered
            leaves = parts[k % n][0]
            return roots[k % n].per_file(filename).map(  # type: ignore[attr-defined]
                lambda e: tuple(evaluate(leaves, e)))

        ds = queue.dataset.enumerate().interleave(file_elements, cycle_length=n)
    else:
        def list_elements(k: int) -> Dataset:
            leaves = parts[k][0]
            return roots[k].dataset.map(lambda e: tuple(evaluate(leaves, e)))

        ds = Dataset.range(n).interleave(list_elements, cycle_length=n)
    _, build, single = parts[0]
    return ds, build, single, widths.pop()


def batch_join(tensors_list: Sequence[Any], batch_size: int, capacity: int = 32,
               enqueue_many: bool = False, shapes: Any = None, dynamic_pad: bool = False,
               allow_smaller_final_batch: bool = False, shared_name: str | None = None,
               name: str | None = None) -> Any:
    """``tf.train.batch_join``: batches of the elements of several tensor lists (each
    typically from its own reader) read at once. See the module docstring.

    Args:
        tensors_list: one structure of tensors per reader, all of the same length
            (else ``ValueError``); the elements are taken from each in turn. Readers of
            one filename queue take its files in turn, each file read by one reader.
        batch_size: elements per batch, a positive int.
        capacity: elements buffered: the batches' runner reads ``ceil(capacity /
            batch_size)`` batches ahead. A positive int.
        enqueue_many: every value is a batch of elements, split along its first axis.
        shapes: accepted for TensorFlow's signature; ignored.
        dynamic_pad: pad each component with zeros to the largest shape in its batch.
        allow_smaller_final_batch: yield a last batch shorter than ``batch_size``;
            ``False`` drops it.
        shared_name: accepted for TensorFlow's signature; ignored.
        name: the runner's name; ``None``: ``"batch_join"``.

    >>> a, = slice_input_producer([[1, 2]], num_epochs=1, shuffle=False)
    >>> b, = slice_input_producer([[10, 20]], num_epochs=1, shuffle=False)
    >>> from feedline.compat.tf_v1 import iterate
    >>> [v.tolist() for v in iterate(batch_join([[a], [b]], batch_size=4))]
    [[1, 10, 2, 20]]
    """
    ds, build, single, width = _joined(tensors_list, "batch_join")
    return _finish(ds, build, single, width, batch_size=batch_size, capacity=capacity,
                   enqueue_many=enqueue_many, dynamic_pad=dynamic_pad,
                   allow_smaller_final_batch=allow_smaller_final_batch, shuffle=None,
                   name=name or "batch_join")


def shuffle_batch_join(tensors_list: Sequence[Any], batch_size: int, capacity: int,
                       min_after_dequeue: int, seed: int | None = None,
                       enqueue_many: bool = False, shapes: Any = None,
                       allow_smaller_final_batch: bool = False, shared_name: str | None = None,
                       name: str | None = None) -> Any:
    """``tf.train.shuffle_batch_join``: :func:`batch_join` with the elements drawn at
    random from a buffer of ``capacity``. See the module docstring.

    Args:
        tensors_list: as for :func:`batch_join`.
        batch_size: elements per batch, a positive int.
        capacity: the shuffle buffer's size in elements, larger than
            ``min_after_dequeue`` (else ``ValueError``).
        min_after_dequeue: a non-negative int below ``capacity``; only checked.
        seed: the shuffle's seed; ``None``: a fresh order each run.
        enqueue_many: every value is a batch of elements, split along its first axis.
        shapes: accepted for TensorFlow's signature; ignored.
        allow_smaller_final_batch: yield a last batch shorter than ``batch_size``;
            ``False`` drops it.
        shared_name: accepted for TensorFlow's signature; ignored.
        name: the runner's name; ``None``: ``"shuffle_batch_join"``.

    >>> a, = slice_input_producer([[1, 2]], num_epochs=1, shuffle=False)
    >>> b, = slice_input_producer([[10, 20]], num_epochs=1, shuffle=False)
    >>> from feedline.compat.tf_v1 import iterate
    >>> [sorted(v.tolist()) for v in iterate(shuffle_batch_join([[a], [b]], 4, 8, 1, seed=0))]
    [[1, 2, 10, 20]]
    """
    ds, build, single, width = _joined(tensors_list, "shuffle_batch_join")
    return _finish(ds, build, single, width, batch_size=batch_size, capacity=capacity,
                   enqueue_many=enqueue_many, dynamic_pad=False,
                   allow_smaller_final_batch=allow_smaller_final_batch,
                   shuffle=(_min_after_dequeue(min_after_dequeue), seed),
                   name=name or "shuffle_batch_join")


# ------------------------------------------------------------------ coordination
class Coordinator:
    """``tf.train.Coordinator``: a stop flag shared by the training loop and the input
    runners. :meth:`stop_on_exception` requests a stop with the exception raised in its
    ``with`` block; :meth:`join` re-raises it.

    Args:
        clean_stop_exception_types: exception types :meth:`request_stop` treats as a
            clean stop (not kept, not re-raised by :meth:`join`); ``None``:
            ``(OutOfRangeError,)``.

    >>> coord = Coordinator()
    >>> with coord.stop_on_exception():
    ...     raise ValueError("bad record")
    >>> coord.should_stop()
    True
    >>> coord.join()
    Traceback (most recent call last):
    ...
    ValueError: bad record
    """

    def __init__(self, clean_stop_exception_types: Sequence[type] | None = None) -> None:
        self._clean = tuple(clean_stop_exception_types) if clean_stop_exception_types \
            is not None else (OutOfRangeError,)
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._exc: BaseException | None = None
        self._threads: list[Any] = []
        self.joined = False

    def should_stop(self) -> bool:
        return self._stop.is_set()

    def request_stop(self, ex: Any = None) -> None:
        """Set the stop flag and stop every runner registered (their prefetch threads and
        the pipelines' worker processes).

        Args:
            ex: an exception, or a ``sys.exc_info()`` tuple, kept and re-raised by
                :meth:`join`: only the first one kept, and never one of the clean-stop
                types. ``None``: a plain stop.
        """
        if isinstance(ex, tuple):  # sys.exc_info()
            ex = ex[1]
        with self._lock:
            if ex is not None and not isinstance(ex, self._clean) and self._exc is None:
                self._exc = ex
            self._stop.set()
            threads = list(self._threads)
        for t in threads:
            if isinstance(t, QueueRunner):
                t.stop()

    def clear_stop(self) -> None:
        with self._lock:
            self._stop.clear()
            self._exc = None
            self.joined = False

    def wait_for_stop(self, timeout: float | None = None) -> bool:
        """Wait until a stop is requested; whether it was.

        Args:
            timeout: most seconds to wait; ``None``: until it is.
        """
        return self._stop.wait(timeout)

    def register_thread(self, thread: Any) -> None:
        """Add a thread for :meth:`join` to wait for (once; a second registration is a
        no-op).

        Args:
            thread: a ``threading.Thread`` or anything with ``is_alive``/``join``; a
                :class:`QueueRunner` is also stopped by :meth:`request_stop`.
        """
        with self._lock:
            if thread not in self._threads:
                self._threads.append(thread)

    @contextlib.contextmanager
    def stop_on_exception(self) -> Iterator[None]:
        try:
            yield
        except Exception:
            self.request_stop(sys.exc_info())

    def raise_requested_exception(self) -> None:
        with self._lock:
            exc = self._exc
        if exc is not None:
            raise exc

    def join(self, threads: Sequence[Any] | None = None, stop_grace_period_secs: float = 120,
             ignore_live_threads: bool = False) -> None:
        """Wait for the stop to be requested (or every thread to end), stop the runners,
        wait for the threads, then re-raise the exception :meth:`request_stop` kept.

        Args:
            threads: threads to wait for besides those registered; ``None``: only those.
            stop_grace_period_secs: most seconds to wait for all the threads to end
                after the stop.
            ignore_live_threads: ``False`` raises ``RuntimeError`` naming the threads
                still running after the grace period (a kept exception is raised
                instead, when there is one); ``True`` returns anyway.
        """
        with self._lock:
            everything = list(self._threads)
        for t in threads or ():
            if t not in everything:
                everything.append(t)
        while any(t.is_alive() for t in everything) and not self.wait_for_stop(0.05):
            pass
        for t in everything:
            if isinstance(t, QueueRunner):
                t.stop()
        deadline = time.monotonic() + stop_grace_period_secs
        for t in everything:
            t.join(max(0.0, deadline - time.monotonic()))
        self.joined = True
        alive = [getattr(t, "name", repr(t)) for t in everything if t.is_alive()]
        self.raise_requested_exception()
        if alive and not ignore_live_threads:
            raise RuntimeError(f"Coordinator stopped with threads still running: "
                               f"{', '.join(alive)}")


def start_queue_runners(sess: Any = None, coord: Coordinator | None = None, daemon: bool = True,
                        start: bool = True, collection: Any = None) -> list[QueueRunner]:
    """``tf.train.start_queue_runners``: start reading ahead every input made so far that
    no batching function reads, and register the runners (and any started later) with
    ``coord``; returns the runners (thread-like: ``join``, ``is_alive``).

    Args:
        sess: accepted for TensorFlow's signature; ignored (runners belong to the default graph).
        coord: the coordinator the runners report to and register with (those already
            running too); ``None``: none.
        daemon: accepted for TensorFlow's signature; ignored: the runners' threads are always daemon threads.
        start: ``False`` starts nothing and returns the runners already running.
        collection: accepted for TensorFlow's signature; ignored.

    >>> x, = slice_input_producer([[1, 2]], num_epochs=1, shuffle=False)
    >>> coord = Coordinator()
    >>> runners = start_queue_runners(coord=coord)
    >>> coord.request_stop(); coord.join(runners); all(not r.is_alive() for r in runners)
    True
    """
    graph = get_default_graph()
    if coord is not None:
        graph.coord = coord
        for runner in graph.running():
            coord.register_thread(runner)
    if not start:
        return graph.running()
    return [root.runner() for root in list(graph.roots) if not root.consumed]
