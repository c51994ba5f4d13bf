"""Where pipelines start: readers, iterables, preloaded arrays, ranges, record readers.

Random-access sources (``from_arrays``, ``range``, ``from_iterable`` over a sequence,
``from_random_access``) resume in O(1) and support :meth:`Dataset.global_shuffle`.
Stream sources resume by replaying and skipping, which is only correct when every
iteration yields the same items in the same order; they therefore refuse to report a
state unless told ``deterministic=True`` — a one-shot generator can never resume.

>>> Dataset.from_arrays([1, 2, 3], ["a", "b", "c"])[1]
(2, 'b')
>>> ds = Dataset.from_reader(lambda: iter([5, 6, 7]), deterministic=True)
>>> it = ds.iterator(); next(it)
5
>>> list(ds.iterator(it.get_state()))
[6, 7]
"""

from __future__ import annotations

import builtins
import itertools
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from typing import Any

from feedline._internal.validate import callable_arg, non_negative_int
from feedline.dataset.base import BuildContext, Dataset, RandomAccessDataset
from feedline.dataset.iterator import DatasetIterator, check_state
from feedline.exceptions import StateError, StateNotSupportedError

__all__ = [
    "from_iterable",
    "from_reader",
    "from_arrays",
    "range_dataset",
    "from_random_access",
    "from_source",
    "SequenceDataset",
    "ArraysDataset",
    "ReaderDataset",
    "SourceDataset",
]


class SequenceDataset(RandomAccessDataset):
    """Random access over an object with ``__len__`` and ``__getitem__``.

    Args:
        seq: the object; item ``i`` is ``seq[i % len(seq)]``.
        name: the stage's name, shown as ``name[len]``.

    >>> ds = from_iterable(("a", "b", "c"))
    >>> type(ds).__name__, ds.name, len(ds), ds[-1]
    ('SequenceDataset', 'tuple[3]', 3, 'c')
    """

    def __init__(self, seq: Any, name: str = "sequence") -> None:
        super().__init__()
        self._seq = seq
        self._len = len(seq)
        self._name = name

    @property
    def name(self) -> str:
        return f"{self._name}[{self._len}]"

    def __len__(self) -> int:
        return self._len

    def _getitem(self, index: int) -> Any:
        return self._seq[index % self._len]

    def _items_for(self, indices: Iterator[int], epoch: int, start: int | None = 0) -> Iterator[Any]:
        return map(self._seq.__getitem__, indices)  # k < len: no wrap needed


class ArraysDataset(RandomAccessDataset):
    """Random access over several equal-length arrays: item ``i`` is the tuple of their
    ``i``-th elements.

    Args:
        arrays: a tuple of at least one array of the same length (not checked here:
            :func:`from_arrays` checks it).

    >>> ds = Dataset.from_arrays(np.array([1, 2, 3]), np.array([10, 20, 30]))
    >>> type(ds).__name__, len(ds), [tuple(int(v) for v in item) for item in ds]
    ('ArraysDataset', 3, [(1, 10), (2, 20), (3, 30)])
    """

    def __init__(self, arrays: tuple) -> None:
        super().__init__()
        self._arrays = arrays
        self._len = len(arrays[0])

    @property
    def name(self) -> str:
        return f"arrays[{self._len}]"

    def __len__(self) -> int:
        return self._len

    def _getitem(self, index: int) -> tuple:
        index %= self._len
        return tuple([a[index] for a in self._arrays])

    def _items_for(self, indices: Iterator[int], epoch: int, start: int | None = 0) -> Iterator[tuple]:
        # one index stream shared by every array, all C-level: tee + map + zip
        streams = itertools.tee(indices, len(self._arrays))
        return zip(*[map(a.__getitem__, t) for a, t in zip(self._arrays, streams)])


def from_arrays(*arrays: Sequence) -> RandomAccessDataset:
    """Preloaded data (TF's ``slice_input_producer``): item ``i`` is ``arrays[0][i]`` for
    one array, else the tuple ``(arrays[0][i], arrays[1][i], ...)``. All arrays must have
    the same length. Random access, so it supports ``global_shuffle``.

    >>> import numpy as np
    >>> Dataset.from_arrays(np.arange(3), np.array([10, 20, 30])).map(lambda t: int(t[0] + t[1])).to_list()
    [10, 21, 32]
    """
    if not arrays:
        raise TypeError("from_arrays needs at least one array")
    lengths = []
    for i, a in enumerate(arrays):
        try:
            lengths.append(len(a))
        except TypeError:
            raise TypeError(
                f"from_arrays: argument {i} must have a length, got {type(a).__name__}"
            ) from None
    if len(set(lengths)) != 1:
        raise ValueError(f"from_arrays: arrays must have the same length, got lengths {lengths}")
    if len(arrays) == 1:
        return SequenceDataset(arrays[0], name="arrays")
    return ArraysDataset(arrays)


def range_dataset(*args: int) -> RandomAccessDataset:
    """Integers like :func:`range` (``stop`` or ``start, stop[, step]``), random access.

    >>> Dataset.range(2, 8, 3).to_list()
    [2, 5]
    """
    for a in args:
        if isinstance(a, bool) or not isinstance(a, int):
            raise TypeError(f"range arguments must be ints, got {a!r}")
    return SequenceDataset(builtins.range(*args), name="range")


def from_random_access(source: Any) -> RandomAccessDataset:
    """Any object with ``__len__`` and ``__getitem__(int)`` as a random-access dataset.

    Args:
        source: the object (without ``__len__`` and ``__getitem__``: ``TypeError``); the
            stage is named after its type.

    >>> class Squares:
    ...     def __len__(self): return 4
    ...     def __getitem__(self, i): return i * i
    >>> ds = from_random_access(Squares())
    >>> ds.name, ds.to_list(), ds.global_shuffle(seed=1).to_list() != []
    ('Squares[4]', [0, 1, 4, 9], True)
    """
    if not (hasattr(source, "__len__") and hasattr(source, "__getitem__")):
        raise TypeError(
            f"from_random_access needs __len__ and __getitem__, got {type(source).__name__}"
        )
    return SequenceDataset(source, name=type(source).__name__)


def from_iterable(iterable: Iterable, *, deterministic: bool | None = None) -> Dataset:
    """A dataset over ``iterable``:

    * a sequence (``list``, ``tuple``, numpy array, ``range`` ...) becomes a random-access
      dataset;
    * a one-shot iterator (a generator object, ``iter(x)``) can be iterated once and
      cannot resume: ``get_state`` raises :class:`StateNotSupportedError`, and a second
      iteration raises :class:`StateError` instead of silently yielding nothing;
    * any other iterable is iterated afresh each time; it resumes by replay only when
      ``deterministic=True``.

    Args:
        iterable: the items; a ``str``/``bytes`` or a non-iterable raises ``TypeError``.
        deterministic: for an iterable that is neither a sequence nor a one-shot
            iterator: ``True`` declares that it yields the same items in the same order
            every time; ``None``/``False``: ``get_state()`` raises
            :class:`StateNotSupportedError`.

    >>> type(from_iterable([1, 2])).__name__                # a sequence: random access
    'SequenceDataset'
    >>> once = from_iterable(x * 2 for x in range(3))       # a generator: one iteration only
    >>> once.to_list()
    [0, 2, 4]
    >>> once.to_list()
    Traceback (most recent call last):
    ...
    feedline.exceptions.StateError: ...
    """
    if isinstance(iterable, (str, bytes)):
        raise TypeError("from_iterable: a str/bytes is not a dataset of items; wrap it in a list")
    if hasattr(iterable, "__len__") and hasattr(iterable, "__getitem__") and not isinstance(
        iterable, dict
    ):
        return SequenceDataset(iterable, name=type(iterable).__name__)
    try:
        it = iter(iterable)
    except TypeError:
        raise TypeError(f"from_iterable needs an iterable, got {type(iterable).__name__}") from None
    if it is iterable:
        return _OneShotDataset(it)
    return ReaderDataset(lambda: iterable, deterministic=bool(deterministic), name="iterable")


def from_reader(reader: Callable[[], Iterable], *, deterministic: bool = False) -> Dataset:
    """A dataset over a PaddlePaddle reader (a zero-argument callable returning an iterable).

    Each iteration calls ``reader()`` once. A :class:`Dataset` is returned as it is.

    Args:
        reader: the zero-argument callable (a non-callable raises ``TypeError``).
        deterministic: ``True``: the iterator resumes by calling ``reader()`` again and
            skipping the items already produced; ``False``: ``get_state`` raises
            :class:`StateNotSupportedError`.

    >>> ds = from_reader(lambda: iter("xyz"), deterministic=True)
    >>> it = ds.iterator(); _ = next(it)
    >>> list(ds.iterator(it.get_state()))                   # resumes by replaying the reader
    ['y', 'z']
    """
    callable_arg("reader", reader)
    if isinstance(reader, Dataset):
        return reader
    return ReaderDataset(reader, deterministic=deterministic, name=_callable_name(reader))


def from_source(factory: Callable[[], DatasetIterator], *, name: str = "source") -> Dataset:
    """A dataset whose iterators are made by ``factory()`` — an object implementing the
    :class:`DatasetIterator` protocol (``get_state``/``set_state``/``close``), such as the
    record-file readers of :mod:`feedline.tfrecord` and :mod:`feedline.recordio`.

    Args:
        factory: a zero-argument callable, called once per iteration (a non-callable
            raises ``TypeError``; a result without ``get_state``/``set_state`` raises
            ``TypeError`` when iterated).
        name: the stage's name in ``repr``, statistics and errors.

    >>> import os, tempfile
    >>> from feedline import tfrecord
    >>> path = os.path.join(tempfile.mkdtemp(), "a.tfrecord")
    >>> _ = tfrecord.write(path, [b"r0", b"r1", b"r2"])
    >>> ds = from_source(lambda: tfrecord.TFRecordReader(path), name="records")
    >>> it = ds.iterator(); _ = next(it)
    >>> ds.name, list(ds.iterator(it.get_state()))
    ('records', [b'r1', b'r2'])
    """
    return SourceDataset(callable_arg("factory", factory), name=name)


def _callable_name(fn: Callable) -> str:
    return getattr(fn, "__name__", type(fn).__name__)


class ReaderDataset(Dataset):
    """Stream source calling a reader once per iteration.

    Args:
        reader: the zero-argument callable returning the iteration's iterable.
        deterministic: whether ``reader()`` yields the same items every time, so the
            iterator resumes by replaying it (else ``get_state`` raises
            :class:`StateNotSupportedError`).
        name: shown as ``reader(name)``.

    >>> ds = Dataset.from_reader(lambda: iter([3, 1, 2]))
    >>> type(ds).__name__, ds.to_list()
    ('ReaderDataset', [3, 1, 2])
    """

    def __init__(self, reader: Callable[[], Iterable], *, deterministic: bool, name: str) -> None:
        super().__init__()
        self._reader = reader
        self._deterministic = deterministic
        self._name = name

    @property
    def name(self) -> str:
        return f"reader({self._name})"

    def _make_iterator(self, ctx: BuildContext) -> DatasetIterator:
        return _ReaderIterator(self._reader, self._deterministic, self.name)


class _ReaderIterator(DatasetIterator):
    def __init__(self, reader: Callable[[], Iterable], deterministic: bool, name: str) -> None:
        self._reader = reader
        self._deterministic = deterministic
        self._name = name
        self._source: Iterator | None = None
        self._count = 0
        self._gen = self._generate()

    def _generate(self) -> Generator:
        if self._source is None:
            self._source = iter(self._reader())
        if not self._deterministic:  # no state to keep: hand items straight through
            yield from self._source
            return
        for item in self._source:
            self._count += 1
            yield item

    def __next__(self) -> Any:
        return next(self._gen)

    def _fast(self) -> Iterator:
        return self._gen

    def get_state(self) -> dict[str, Any]:
        if not self._deterministic:
            raise StateNotSupportedError(
                f"{self._name} cannot report its position: a reader may yield different items "
                "on every call. Pass deterministic=True to from_reader/from_iterable if it "
                "always yields the same items in the same order (then it resumes by replay)"
            )
        return {"type": "reader", "count": self._count}

    def set_state(self, state: dict[str, Any]) -> None:
        if not self._deterministic:
            raise StateNotSupportedError(f"{self._name} cannot resume: it is not deterministic")
        check_state(state, "reader", ("count",))
        count = non_negative_int("state['count']", state["count"])
        self.close()
        source = iter(self._reader())
        for skipped in builtins.range(count):
            try:
                next(source)
            except StopIteration:
                raise StateError(
                    f"{self._name} ended after {skipped} items while resuming to item {count}; "
                    "it is not deterministic"
                ) from None
        self._source = source
        self._count = count
        self._gen = self._generate()

    def close(self) -> None:
        source, self._source = self._source, None
        self._gen.close()
        closer = getattr(source, "close", None)
        if closer is not None:
            closer()


class _OneShotDataset(Dataset):
    """A one-shot iterator: iterable once, never resumable."""

    def __init__(self, it: Iterator) -> None:
        super().__init__()
        self._it: Iterator | None = it

    @property
    def name(self) -> str:
        return "one-shot iterator"

    def _make_iterator(self, ctx: BuildContext) -> DatasetIterator:
        it, self._it = self._it, None
        if it is None:
            raise StateError(
                "this dataset wraps a one-shot iterator (e.g. a generator object) that was "
                "already iterated; pass a reader (a function returning a fresh iterable) instead"
            )
        return _OneShotIterator(it)


class _OneShotIterator(DatasetIterator):
    def __init__(self, it: Iterator) -> None:
        self._it = it

    def __next__(self) -> Any:
        return next(self._it)

    def get_state(self) -> dict[str, Any]:
        raise StateNotSupportedError(
            "a one-shot iterator (e.g. a generator object) cannot report its position; use "
            "Dataset.from_reader(fn, deterministic=True) with a function returning a fresh "
            "iterable, or a random-access source"
        )

    def set_state(self, state: dict[str, Any]) -> None:
        self.get_state()

    def close(self) -> None:
        closer = getattr(self._it, "close", None)
        if closer is not None:
            closer()


class SourceDataset(Dataset):
    """Stream source built from a factory of :class:`DatasetIterator` objects.

    Args:
        factory: called once per iteration; its result must have ``get_state`` and
            ``set_state`` (else ``TypeError`` when iterated).
        name: the stage's name.

    >>> from feedline.dataset.iterator import DatasetIterator
    >>> class Count(DatasetIterator):                   # a minimal resumable source
    ...     def __init__(self): self.i = 0
    ...     def __next__(self):
    ...         if self.i == 3: raise StopIteration
    ...         self.i += 1
    ...         return self.i
    ...     def get_state(self): return {"i": self.i}
    ...     def set_state(self, state): self.i = state["i"]
    >>> ds = Dataset.from_source(Count)
    >>> it = ds.iterator(); _ = next(it)
    >>> type(ds).__name__, ds.to_list(), list(ds.iterator(it.get_state()))
    ('SourceDataset', [1, 2, 3], [2, 3])
    """

    def __init__(self, factory: Callable[[], DatasetIterator], *, name: str) -> None:
        super().__init__()
        self._factory = factory
        self._name = name

    @property
    def name(self) -> str:
        return self._name

    def _make_iterator(self, ctx: BuildContext) -> DatasetIterator:
        it = self._factory()
        for attr in ("get_state", "set_state"):
            if not callable(getattr(it, attr, None)):
                raise TypeError(
                    f"from_source: factory() must return a DatasetIterator with get_state and "
                    f"set_state, got {type(it).__name__}"
                )
        return it
