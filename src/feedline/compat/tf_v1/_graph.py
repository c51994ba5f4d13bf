"""The machinery behind :mod:`feedline.compat.tf_v1`: lazy tensors over pipelines.

A :class:`Root` is one stream of *elements*: a :class:`~feedline.dataset.base.Dataset`
(a reader's ``(key, value)`` records, a batching stage's batches, a slice producer's
rows). A :class:`Tensor` is a function of one element of its root, so ``decode_csv``,
``decode_raw``, ``stack`` and friends only compose functions; a batching function turns
the tensors of one root into a new root, a ``Dataset`` made by ``map``, ``shuffle``,
``batch`` (the one engine). ``Session.run(fetches)`` takes the next element of each
root the fetches come from and evaluates them on it, once per element.

A root's elements are read by a :class:`QueueRunner`: a thread iterating the root's
dataset into a queue of ``capacity`` elements (TensorFlow's queue), started by
``start_queue_runners`` or on first use, and stopped (its thread, the pipeline's
threads and worker processes) by ``Coordinator.request_stop``, ``Session.close`` or
``reset_default_graph``.

>>> from feedline.dataset import Dataset
>>> root = Root(Dataset.from_iterable([(1, 2), (3, 4)]), name="pairs")
>>> total = lift(lambda e: e[0] + e[1], Tensor(root, lambda e, memo: e))
>>> runner = root.runner(); [evaluate([total], runner.next()) for _ in range(2)]
[[3], [7]]
>>> runner.stop()
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

from feedline.dataset.base import Dataset
from feedline.exceptions import OutOfRangeError

__all__ = ["Graph", "Root", "Tensor", "QueueRunner", "lift", "evaluate", "flatten",
           "get_default_graph", "reset_default_graph", "common_root"]


_STOP_GRACE = 30.0  # seconds a stopped runner may take to finish its element


class Graph:
    """The roots made so far (TensorFlow's default graph, for ``start_queue_runners``),
    and the coordinator that runners report to.

    >>> import feedline.compat.tf_v1 as tf
    >>> tf.reset_default_graph()
    >>> isinstance(tf.get_default_graph(), tf.Graph)
    True
    """

    def __init__(self) -> None:
        self.roots: list[Root] = []
        self.coord: Any = None
        self._lock = threading.Lock()

    def add(self, root: Root) -> None:
        """Record a new root (every :class:`Root` adds itself to the default graph).

        Args:
            root: the root to record.
        """
        with self._lock:
            self.roots.append(root)

    def running(self) -> list[QueueRunner]:
        return [r._runner for r in self.roots if r._runner is not None]

    def stop(self, *, discard: bool = False) -> None:
        """Stop every runner (their inputs then raise ``OutOfRangeError``); with
        ``discard``, forget them too, so that the next run reads from the start (a new
        session). Waits up to 30 s for each runner's thread.

        Args:
            discard: also forget the runners, so each root starts a new one on next use.
        """
        runners = [root._runner for root in list(self.roots) if root._runner is not None]
        for runner in runners:
            runner.stop()
        for runner in runners:
            runner.join(_STOP_GRACE)
        if discard:
            for root in self.roots:
                root._runner = None


_default = Graph()


def get_default_graph() -> Graph:
    """The graph new roots are added to.

    >>> isinstance(get_default_graph(), Graph)
    True
    """
    return _default


def reset_default_graph() -> None:
    """Stop every runner of the default graph and start a new, empty one
    (``tf.reset_default_graph``).

    >>> reset_default_graph(); get_default_graph().roots
    []
    """
    global _default
    _default.stop(discard=True)
    _default = Graph()


class Root:
    """One stream of elements: ``dataset``'s items; ``capacity`` elements are read ahead
    by its runner. ``consumed`` is set when a batching stage reads it (its runner is then
    not started by ``start_queue_runners``)."""

    def __init__(self, dataset: Dataset, *, name: str, capacity: int = 32) -> None:
        self.dataset = dataset
        self.name = name
        self.capacity = capacity
        self.consumed = False
        self._runner: QueueRunner | None = None
        self.graph = get_default_graph()
        self.graph.add(self)

    def runner(self) -> QueueRunner:
        """This root's runner, started on first use (once used up or stopped, it stays so
        until ``Session.close`` or ``reset_default_graph``)."""
        if self._runner is None:
            self._runner = QueueRunner(self)
        return self._runner

    def __repr__(self) -> str:
        return f"Root({self.name})"


class QueueRunner:
    """The reading of one root, as ``tf.train.QueueRunner``: a thread that iterates the
    root's dataset and puts its elements in a queue of ``capacity``; ``next()`` takes
    them. ``stop()`` (from any thread) closes the queue, so a reader waiting on it gets
    :class:`~feedline.exceptions.OutOfRangeError`; the thread then closes the
    pipeline's iterator and its worker processes and ends. Thread-like: ``join``,
    ``is_alive``. An exception in the pipeline is reported with
    ``coord.request_stop(ex)`` when a coordinator is registered (the queue closes, the
    reader gets ``OutOfRangeError`` and ``coord.join`` raises the exception, as in
    TensorFlow); without one the reader gets the exception.

    The thread starts when the runner is made (by :meth:`Root.runner`).

    Args:
        root: the root to read; its ``capacity`` is the queue's size (at least 1), and
            the runner registers with its graph's coordinator, if any.

    >>> import os, tempfile
    >>> import feedline.compat.tf_v1 as tf
    >>> path = os.path.join(tempfile.mkdtemp(), "lines.txt")
    >>> with open(path, "w") as f: _ = f.write("a" + chr(10) + "b" + chr(10))
    >>> tf.reset_default_graph()
    >>> key, value = tf.TextLineReader().read(tf.train.string_input_producer([path], num_epochs=1))
    >>> coord = tf.train.Coordinator()
    >>> runners = tf.train.start_queue_runners(coord=coord)
    >>> [type(r).__name__ for r in runners], list(tf.iterate(value))
    (['QueueRunner'], [b'a', b'b'])
    >>> coord.request_stop(); coord.join(runners)
    >>> [r.is_alive() for r in runners]
    [False]
    """

    _POLL = 0.05

    def __init__(self, root: Root) -> None:
        self.root = root
        self.name = root.name
        self._queue: queue.Queue = queue.Queue(maxsize=max(1, root.capacity))
        self._stop = threading.Event()
        self._ended = False  # the reader has seen the end or an error
        self._thread = threading.Thread(target=self._produce, name=f"feedline-{root.name}",
                                        daemon=True)
        coord = root.graph.coord
        if coord is not None:
            coord.register_thread(self)
        self._thread.start()

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def _put(self, entry: tuple[str, Any]) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(entry, timeout=self._POLL)
                return True
            except queue.Full:
                continue
        return False

    def _produce(self) -> None:
        it = None
        try:
            it = self.root.dataset.iterator()
            for element in it:
                if not self._put(("item", element)):
                    return
            self._put(("end", None))
        except Exception as exc:  # to the coordinator, else to the reader
            coord = self.root.graph.coord
            if coord is not None:
                coord.request_stop(exc)  # closes the queue: the reader gets OutOfRangeError
            self._put(("error", exc))
        finally:
            if it is not None:
                it.close()
            self.root.dataset.close()

    def next(self) -> Any:
        """The next element; :class:`~feedline.exceptions.OutOfRangeError` at the end of
        the input or once the runner is stopped."""
        while not self._ended:
            try:
                kind, value = self._queue.get(timeout=self._POLL)
            except queue.Empty:
                if self._stop.is_set():
                    break
                continue
            if kind == "item":
                return value
            self._ended = True
            if kind == "error":
                raise value
        raise OutOfRangeError(f"{self.name}: the input is used up or its queue is closed")

    def stop(self) -> None:
        """Close the queue; the thread ends after the element it is computing. Idempotent."""
        self._stop.set()

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def join(self, timeout: float | None = None) -> None:
        """Wait for the runner's thread to end (as ``threading.Thread.join``).

        Args:
            timeout: most seconds to wait; ``None``: until it ends.
        """
        self._thread.join(timeout)

    def __repr__(self) -> str:
        return f"QueueRunner({self.name}, {'stopped' if self.stopped else 'running'})"


class Tensor:
    """A value computed from one element of ``root``: ``fn(element, memo)``.

    Args:
        root: the input whose elements the tensor is computed from.
        fn: ``fn(element, memo)`` computes the value from one element; ``memo`` caches
            the values of other tensors on that element (each is computed once).

    >>> import os, tempfile
    >>> import feedline.compat.tf_v1 as tf
    >>> path = os.path.join(tempfile.mkdtemp(), "nums.csv")
    >>> with open(path, "w") as f: _ = f.write("1,2" + chr(10) + "3,4" + chr(10))
    >>> key, value = tf.TextLineReader().read(tf.train.string_input_producer([path], num_epochs=1))
    >>> first, second = tf.decode_csv(value, record_defaults=[[0], [0]])
    >>> isinstance(second, tf.Tensor), [int(v) for v in tf.iterate(second)]
    (True, [2, 4])
    """

    __slots__ = ("root", "fn", "shape")

    def __init__(self, root: Root, fn: Callable[[Any, dict], Any]) -> None:
        self.root = root
        self.fn = fn
        self.shape: tuple | None = None

    def set_shape(self, shape: Any) -> None:
        """Check every value's shape from now on, as TensorFlow's static shape check does
        when the graph runs: a value of another rank or size raises ``ValueError``.

        Args:
            shape: the sizes per dimension (a list or tuple); ``None`` matches any size.
        """
        self.shape = tuple(shape)

    def get_shape(self) -> tuple | None:
        return self.shape

    def __getitem__(self, index: Any) -> Tensor:
        return lift(lambda v: v[index], self)

    def __repr__(self) -> str:
        return f"<Tensor of {self.root.name}>"


def _value(t: Tensor, element: Any, memo: dict) -> Any:
    key = id(t)
    if key in memo:
        return memo[key]
    value = memo[key] = t.fn(element, memo)
    if t.shape is not None:
        _check_shape(value, t.shape)
    return value


def _check_shape(value: Any, shape: tuple) -> None:
    got = getattr(value, "shape", ())
    if len(got) != len(shape) or any(s is not None and s != g for s, g in zip(shape, got)):
        raise ValueError(f"a value of shape {list(got)} does not match the shape "
                         f"{list(shape)} set with set_shape")


def common_root(values: list[Any], what: str) -> Root:
    """The root every :class:`Tensor` in ``values`` reads; ``ValueError`` if several."""
    roots = {id(v.root): v.root for v in values if isinstance(v, Tensor)}
    if len(roots) != 1:
        if not roots:
            raise TypeError(f"{what} needs at least one tensor made from an input")
        names = ", ".join(r.name for r in roots.values())
        raise ValueError(f"{what}: the tensors come from different inputs ({names}); "
                         "batch several readers with batch_join or shuffle_batch_join")
    return next(iter(roots.values()))


def lift(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*values)`` as a tensor when an argument is a tensor, else called at once.

    >>> lift(lambda a, b: a + b, 1, 2)
    3
    """
    if not any(isinstance(a, Tensor) for a in args):
        return fn(*args)
    root = common_root(list(args), getattr(fn, "__name__", "operation"))

    def run(element: Any, memo: dict) -> Any:
        return fn(*(_value(a, element, memo) if isinstance(a, Tensor) else a for a in args))

    return Tensor(root, run)


def flatten(structure: Any) -> tuple[list[Any], Callable[[list[Any]], Any]]:
    """The leaves of a tensor, list, tuple or dict of them, and the function that builds
    the same structure from new leaves.

    >>> leaves, build = flatten({"a": 1, "b": [2, 3]})
    >>> leaves, build([10, 20, 30])
    ([1, 2, 3], {'a': 10, 'b': [20, 30]})
    """
    if isinstance(structure, dict):
        keys = list(structure)
        parts = [flatten(structure[k]) for k in keys]
    elif isinstance(structure, (list, tuple)):
        keys = None
        parts = [flatten(v) for v in structure]
    else:
        return [structure], lambda leaves: leaves[0]
    sizes = [len(p[0]) for p in parts]
    leaves = [leaf for p in parts for leaf in p[0]]
    kind = type(structure)

    def build(new: list[Any]) -> Any:
        out, pos = [], 0
        for (_, sub), n in zip(parts, sizes):
            out.append(sub(new[pos:pos + n]))
            pos += n
        if keys is not None:
            return dict(zip(keys, out))
        return out if kind is list else tuple(out)

    return leaves, build


def evaluate(leaves: list[Any], element: Any, memo: dict | None = None) -> list[Any]:
    """The values of ``leaves`` (tensors of one root, or constants) on ``element``."""
    memo = {} if memo is None else memo
    return [_value(t, element, memo) if isinstance(t, Tensor) else t for t in leaves]
