"""The PaddlePaddle reader API, as thin adapters over :class:`feedline.Dataset`.

A *reader* is a zero-argument callable returning an iterable of single items; a *reader
creator* returns a reader; a *reader decorator* takes readers and returns a reader.
Every function here returns a :class:`~feedline.Dataset`, which is itself a reader, so
code written for ``paddle.reader`` runs after changing the import::

    import feedline.reader as reader      # was: import paddle.reader as reader
    from feedline import batch            # was: from paddle import batch

Differences from PaddlePaddle, all fixes of its known defects:

* an exception in ``buffered``'s thread or an ``xmap_readers`` worker reaches the
  consumer with its traceback instead of leaving it waiting forever;
* ``compose`` handles items that are ``None`` (PaddlePaddle mistakes them for a reader
  that ended);
* ``cache`` reads its reader on first iteration, not when it is decorated;
* ``xmap_readers`` runs ``mapper`` in worker *processes*, so CPU-bound Python mappers
  really run in parallel; ``order=True`` gives the input order;
* ``shuffle`` is a buffer shuffle by default (each item drawn uniformly from a buffer
  of ``buf_size`` items, so items mix across chunk borders); ``mode="chunk"`` gives
  PaddlePaddle's chunk shuffle with its exact order;
* breaking out of a loop, ``close()`` or garbage collection stops every thread and
  process the iterator started.

>>> import feedline.reader as reader
>>> from feedline import batch
>>> def numbers():
...     return iter(range(5))
>>> r = reader.map_readers(lambda a, b: a + b, numbers, numbers)
>>> list(r())
[0, 2, 4, 6, 8]
>>> list(batch(reader.firstn(numbers, 3), 2)())
[[0, 1], [2]]
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from typing import Any

from feedline._internal.validate import callable_arg, positive_int
from feedline.dataset.base import BuildContext, Dataset
from feedline.dataset.iterator import DatasetIterator, check_state
from feedline.dataset.sources import from_reader
from feedline.exceptions import ComposeNotAligned, StateError, StateNotSupportedError

__all__ = [
    "map_readers",
    "buffered",
    "compose",
    "chain",
    "shuffle",
    "firstn",
    "xmap_readers",
    "cache",
    "batch",
    "ChunkShuffleDataset",
    "ComposeNotAligned",
]

Reader = Callable[[], Iterable]


def _as_dataset(reader: Reader, arg: str = "reader") -> Dataset:
    """A Dataset for ``reader``: itself if it is one, else a stream over its calls."""
    if isinstance(reader, Dataset):
        return reader
    callable_arg(arg, reader)
    return from_reader(reader)


def _star(func: Callable) -> Callable[[tuple], Any]:
    def apply(args: tuple) -> Any:
        return func(*args)

    apply.__name__ = getattr(func, "__name__", "func")
    return apply


def map_readers(func: Callable, *readers: Reader) -> Dataset:
    """A reader yielding ``func(a, b, ...)`` for the items ``a, b, ...`` read in lockstep
    from ``readers``; it ends with the shortest reader.

    ``readers`` are zero-argument callables returning iterables, or datasets; passing
    none raises ``TypeError``.

    Args:
        func: called with one item of each reader, in the order of ``readers``; a
            non-callable raises ``TypeError``.

    >>> list(map_readers(lambda a, b: a * b, lambda: iter([1, 2, 3]), lambda: iter([10, 20]))())
    [10, 40]
    """
    callable_arg("func", func)
    if not readers:
        raise TypeError("map_readers needs at least one reader")
    datasets = [_as_dataset(r, f"readers[{i}]") for i, r in enumerate(readers)]
    if len(datasets) == 1:
        return datasets[0].map(func)
    return datasets[0].zip(*datasets[1:]).map(_star(func))


def buffered(reader: Reader, size: int) -> Dataset:
    """A reader that reads ``reader`` ahead in a background thread, keeping up to ``size``
    items buffered. Errors in the thread are re-raised to the consumer.

    Args:
        reader: a reader (a zero-argument callable returning an iterable) or a
            :class:`~feedline.Dataset`; a non-callable raises ``TypeError``.
        size: how many items to read ahead at most; a positive int, else
            ``ValueError``/``TypeError``.

    >>> list(buffered(lambda: iter(range(4)), 2)())
    [0, 1, 2, 3]
    """
    return _as_dataset(reader).prefetch(positive_int("size", size))


def _flatten(items: tuple) -> tuple:
    out: list = []
    for x in items:
        if isinstance(x, tuple):
            out.extend(x)
        else:
            out.append(x)
    return tuple(out)


def compose(*readers: Reader, check_alignment: bool = True) -> Dataset:
    """A reader yielding one flat tuple per step: the items of ``readers`` read in
    lockstep, tuples flattened (``(1, 2)`` and ``3`` compose to ``(1, 2, 3)``).

    Items that are ``None`` are ordinary items. Passing no reader raises ``TypeError``.

    Args:
        check_alignment: ``True`` (the default): every reader must end at the same step,
            else :class:`ComposeNotAligned` is raised; ``False``: it ends with the
            shortest.

    >>> list(compose(lambda: iter([(1, 2), (3, 4)]), lambda: iter("ab"))())
    [(1, 2, 'a'), (3, 4, 'b')]
    """
    if not readers:
        raise TypeError("compose needs at least one reader")
    datasets = [_as_dataset(r, f"readers[{i}]") for i, r in enumerate(readers)]
    return datasets[0].zip(*datasets[1:], strict=check_alignment).map(_flatten)


def chain(*readers: Reader) -> Dataset:
    """A reader yielding all items of ``readers[0]``, then of ``readers[1]``, and so on.

    >>> list(chain(lambda: iter([1, 2]), lambda: iter([3]))())
    [1, 2, 3]
    """
    if not readers:
        raise TypeError("chain needs at least one reader")
    datasets = [_as_dataset(r, f"readers[{i}]") for i, r in enumerate(readers)]
    return datasets[0].concat(*datasets[1:])


def shuffle(reader: Reader, buf_size: int, *, seed: int | None = None,
            mode: str = "buffer") -> Dataset:
    """A reader yielding ``reader``'s items in random order.

    Args:
        reader: a reader (a zero-argument callable returning an iterable) or a
            :class:`~feedline.Dataset`; a non-callable raises ``TypeError``.
        buf_size: the buffer (``"buffer"``) or chunk (``"chunk"``) size in items; a
            positive int, else ``ValueError``/``TypeError``.
        seed: ``mode="buffer"``: the same ``seed`` gives the same sequence of orders
            (``None``: unseeded). ``mode="chunk"``: ``None`` shuffles with Python's
            :mod:`random` module, exactly what PaddlePaddle's decorator uses, so after
            ``random.seed(s)`` the orders of every call are PaddlePaddle's; an int makes
            a ``random.Random(seed)`` of this reader's own, whose stream continues from
            call to call as the module's does (the orders equal PaddlePaddle's after
            ``random.seed(seed)``); anything else raises ``TypeError``.
        mode: ``"buffer"`` (the default): through a buffer of ``buf_size`` items, each
            output drawn uniformly from it (see :meth:`feedline.Dataset.shuffle`), a new
            order on every call. ``"chunk"``: PaddlePaddle's algorithm and order: read
            ``buf_size`` items, shuffle them with :func:`random.shuffle`, yield them, and
            go on with the next ``buf_size`` (the last chunk may be shorter); items never
            move out of their chunk, and the resumable state holds the generator's state
            at the start of the current chunk. Anything else raises ``ValueError``.

    >>> r = shuffle(lambda: iter(range(6)), 3, seed=0)
    >>> first, second = list(r()), list(r())
    >>> sorted(first) == sorted(second) == [0, 1, 2, 3, 4, 5]
    True
    >>> r2 = shuffle(lambda: iter(range(6)), 3, seed=0)    # same seed: same orders
    >>> [list(r2()), list(r2())] == [first, second]
    True
    >>> import random
    >>> chunks = shuffle(lambda: iter(range(6)), 3, seed=1, mode="chunk")
    >>> rng = random.Random(1); a, b = [0, 1, 2], [3, 4, 5]; rng.shuffle(a); rng.shuffle(b)
    >>> list(chunks()) == a + b
    True
    """
    positive_int("buf_size", buf_size)
    if mode == "buffer":
        return _as_dataset(reader).shuffle(buf_size, seed=seed)
    if mode != "chunk":
        raise ValueError(f"`mode` must be 'buffer' or 'chunk', got {mode!r}")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise TypeError(f"`seed` must be an int or None, got {seed!r}")
    return ChunkShuffleDataset(_as_dataset(reader), buf_size, seed=seed)


def firstn(reader: Reader, n: int) -> Dataset:
    """A reader yielding at most the first ``n`` items of ``reader``.

    Args:
        reader: a reader (a zero-argument callable returning an iterable) or a
            :class:`~feedline.Dataset`; a non-callable raises ``TypeError``.
        n: how many items at most; a non-negative int, else ``ValueError``/``TypeError``.

    >>> list(firstn(lambda: iter("abcde"), 3)())
    ['a', 'b', 'c']
    """
    from feedline._internal.validate import non_negative_int

    return _as_dataset(reader).take(non_negative_int("n", n))


def xmap_readers(
    mapper: Callable, reader: Reader, process_num: int, buffer_size: int, order: bool = False
) -> Dataset:
    """A reader yielding ``mapper(item)`` for each item of ``reader``, computed in
    worker processes.

    Args:
        mapper: called on each item in a worker process; it and the items must be
            picklable; a non-callable raises ``TypeError``.
        reader: a reader (a zero-argument callable returning an iterable) or a
            :class:`~feedline.Dataset`; a non-callable raises ``TypeError``.
        process_num: how many worker processes; a positive int, else
            ``ValueError``/``TypeError``.
        buffer_size: how many items may be in flight at most; a positive int, else
            ``ValueError``/``TypeError``.
        order: ``True`` keeps the input order; ``False`` (the default) yields results as
            they are ready.

    >>> r = xmap_readers(abs, lambda: iter([-1, -2, 3]), process_num=2, buffer_size=4, order=True)
    >>> list(r())
    [1, 2, 3]
    """
    callable_arg("mapper", mapper)
    positive_int("process_num", process_num)
    positive_int("buffer_size", buffer_size)
    from feedline.dataset.options import ExecutionOptions

    return _as_dataset(reader).map(
        mapper, num_workers=process_num, ordered=bool(order),
        execution=ExecutionOptions(buffer_size=buffer_size),
        name=f"xmap({getattr(mapper, '__name__', 'mapper')})",
    )


def cache(reader: Reader) -> Dataset:
    """A reader that reads ``reader`` completely on its first iteration, keeps every item
    in memory, and replays them on every iteration.

    Args:
        reader: a reader (a zero-argument callable returning an iterable) or a
            :class:`~feedline.Dataset`; a non-callable raises ``TypeError``.

    >>> calls = []
    >>> def once():
    ...     calls.append(1)
    ...     return iter([1, 2])
    >>> c = cache(once)
    >>> list(c()), list(c()), len(calls)
    ([1, 2], [1, 2], 1)
    """
    return CacheDataset(_as_dataset(reader))


def batch(reader: Reader, batch_size: int, drop_last: bool = False) -> Dataset:
    """A *batch reader*: lists of ``batch_size`` consecutive items of ``reader``.

    Args:
        reader: a reader (a zero-argument callable returning an iterable) or a
            :class:`~feedline.Dataset`; a non-callable raises ``TypeError``.
        batch_size: items per list; a positive int, else ``ValueError``/``TypeError``.
        drop_last: drop a last list shorter than ``batch_size``; ``False`` (the default)
            keeps it.

    >>> list(batch(lambda: iter(range(5)), 2)())
    [[0, 1], [2, 3], [4]]
    """
    return _as_dataset(reader).batch(positive_int("batch_size", batch_size),
                                     drop_remainder=drop_last)


class CacheDataset(Dataset):
    """Items of the parent, read once on first iteration and replayed from memory."""

    def __init__(self, parent: Dataset) -> None:
        super().__init__()
        self._parents = (parent,)
        self._items: list | None = None

    @property
    def name(self) -> str:
        return "cache"

    def _load(self, ctx: BuildContext) -> list:
        if self._items is None:
            with self._parents[0]._build(ctx) as it:
                self._items = list(it)
        return self._items

    def _make_iterator(self, ctx: BuildContext) -> DatasetIterator:
        return _CacheIterator(self, ctx)


class _CacheIterator(DatasetIterator):
    def __init__(self, owner: CacheDataset, ctx: BuildContext) -> None:
        self._owner = owner
        self._ctx = ctx
        self._items: list | None = None
        self._k = 0

    def __next__(self) -> Any:
        if self._items is None:
            self._items = self._owner._load(self._ctx)
        if self._k >= len(self._items):
            raise StopIteration
        self._k += 1
        return self._items[self._k - 1]

    def get_state(self) -> dict[str, Any]:
        return {"type": "cache", "next": self._k}

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, "cache", ("next",))
        self._k = state["next"]


class ChunkShuffleDataset(Dataset):
    """PaddlePaddle's chunk shuffle (``shuffle(..., mode="chunk")``): consecutive chunks
    of ``buf_size`` items, each shuffled by ``random.shuffle``.

    The constructor does not validate its arguments; :func:`shuffle` does.

    Args:
        parent: the dataset whose items are shuffled.
        buf_size: items per chunk (the last chunk may be shorter).
        seed: ``None`` draws from the :mod:`random` module's generator; an int seeds a
            generator of this dataset's own that every iterator continues.

    >>> import random
    >>> random.seed(5)
    >>> out = ChunkShuffleDataset(Dataset.range(5), 2, seed=None).to_list()
    >>> random.seed(5); a, b, c = [0, 1], [2, 3], [4]
    >>> random.shuffle(a); random.shuffle(b); random.shuffle(c)
    >>> out == a + b + c
    True
    """

    def __init__(self, parent: Dataset, buf_size: int, *, seed: int | None) -> None:
        super().__init__()
        self._parents = (parent,)
        self._buf_size = buf_size
        self._seed = seed
        self._rng: random.Random | None = None if seed is None else random.Random(seed)

    @property
    def name(self) -> str:
        return f"chunk_shuffle({self._buf_size})"

    def generator(self) -> Any:
        """What the next chunk is shuffled with: this dataset's ``random.Random``, or the
        :mod:`random` module itself (its ``shuffle``/``getstate`` are its generator's)."""
        return self._rng if self._rng is not None else random

    def _make_iterator(self, ctx: BuildContext) -> DatasetIterator:
        return _ChunkShuffleIterator(self, self._parents[0]._build(ctx))


class _ChunkShuffleIterator(DatasetIterator):
    def __init__(self, owner: ChunkShuffleDataset, parent: DatasetIterator) -> None:
        self._owner = owner
        self._parent = parent
        self._rng: random.Random | None = None  # a private generator after set_state
        self._chunk: list = []
        self._k = 0  # items of the chunk already yielded
        self._start: Any = None  # (parent state, generator state) at the chunk's start
        self._state_error: StateError | None = None

    def _generator(self) -> Any:
        return self._rng if self._rng is not None else self._owner.generator()

    def _fill(self) -> None:
        rng = self._generator()
        try:
            start: Any = (self._parent.get_state(), rng.getstate())
        except StateError as exc:
            start, self._state_error = None, exc
        chunk = []
        for item in self._parent:
            chunk.append(item)
            if len(chunk) == self._owner._buf_size:
                break
        rng.shuffle(chunk)
        self._chunk, self._k, self._start = chunk, 0, start

    def __next__(self) -> Any:
        if self._k == len(self._chunk):
            self._fill()
            if not self._chunk:
                raise StopIteration
        self._k += 1
        return self._chunk[self._k - 1]

    def get_state(self) -> dict[str, Any]:
        if self._k == len(self._chunk):  # between chunks: the next one starts here
            return {"type": "chunk_shuffle", "parent": self._parent.get_state(),
                    "random": _json_random(self._generator().getstate()), "next": 0}
        if self._start is None:
            raise StateNotSupportedError(
                f"chunk shuffle cannot report its position because its input cannot: "
                f"{self._state_error}"
            ) from self._state_error
        parent, rng = self._start
        return {"type": "chunk_shuffle", "parent": parent, "random": _json_random(rng),
                "next": self._k}

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, "chunk_shuffle", ("parent", "random", "next"))
        version, internal, gauss = state["random"]
        rng = random.Random()
        rng.setstate((version, tuple(internal), gauss))
        if self._owner._rng is not None:
            self._owner._rng.setstate(rng.getstate())  # the dataset's own stream goes on
            self._rng = None
        else:  # never touch the random module's generator: go on with a private copy
            self._rng = rng
        self._parent.set_state(state["parent"])
        self._chunk, self._k = [], 0
        if state["next"]:
            self._fill()
            self._k = min(int(state["next"]), len(self._chunk))

    def close(self) -> None:
        self._chunk = []
        self._parent.close()


def _json_random(state: tuple) -> list:
    version, internal, gauss = state
    return [version, list(internal), gauss]
