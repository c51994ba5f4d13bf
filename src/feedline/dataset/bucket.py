"""``bucket_by_length``: batches of items of similar length.

Padding a batch to its longest item wastes the work spent on the padding; putting items
of similar length together saves most of it. ``length_fn(item)`` gives an item's length
(a non-negative int); ``bucket_boundaries`` ``[b0, b1, ..., bk-1]`` (strictly
increasing) split lengths into ``k + 1`` buckets: bucket 0 holds lengths ``< b0``,
bucket ``i`` lengths in ``[b(i-1), b(i))``, bucket ``k`` lengths ``>= b(k-1)`` (as in
tf.data's ``bucket_by_sequence_length``).

Each bucket fills one batch at a time, items in arrival order. A batch is emitted as
soon as it is complete:

* ``bucket_batch_sizes``: an int (every bucket) or one int per bucket; a bucket's batch
  is complete when it holds that many items;
* ``max_tokens``: a token budget per batch, counting padding: a batch of ``n`` items
  whose longest has length ``m`` costs ``n * max(m, 1)`` tokens. An item that would take
  its bucket's batch over the budget first sends the batch out and then starts the
  next one; a batch that reaches the budget exactly goes out at once. An item longer
  than the budget travels alone.

Both may be given (whichever limit is reached first completes the batch). When the input
ends, the batches still being filled are emitted in bucket order — or dropped, with
``drop_remainder=True``. Batches are lists of items; feed them to a
:class:`~feedline.feeder.DataFeeder`.

The stage has no randomness of its own: the same input order gives the same batches,
so a pipeline shuffled with a seed upstream is bucketed the same way on every run.

Resuming: the state holds the parent's state at or before the oldest item still waiting
in a bucket (the parent's state is recorded every 64 items read), the number of items
read, and the positions of the waiting items (base64 of little-endian uint32 offsets).
Restoring re-reads the parent from that point and puts the waiting items back, so the
parent must be resumable and deterministic. A bucket that fills rarely makes that
stretch — and the work of resuming — long.

>>> from feedline import Dataset
>>> words = Dataset.from_iterable(["a", "bb", "ccc", "dd", "e", "fff", "gggg"])
>>> bucket_by_length(words, length_fn=len, bucket_boundaries=[2, 3],
...                  bucket_batch_sizes=2).to_list()
[['bb', 'dd'], ['a', 'e'], ['ccc', 'fff'], ['gggg']]
>>> bucket_by_length(words, length_fn=len, bucket_boundaries=[], max_tokens=6).to_list()
[['a', 'bb'], ['ccc', 'dd'], ['e', 'fff'], ['gggg']]
"""

from __future__ import annotations

import base64
import bisect
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard, cast

import numpy as np

from feedline._internal.validate import (
    callable_arg,
    check_bool,
    non_negative_int,
    optional_positive_int,
    positive_int,
)
from feedline.dataset.base import BuildContext, Dataset
from feedline.dataset.iterator import DatasetIterator, check_state
from feedline.exceptions import StateError, StateNotSupportedError

__all__ = ["bucket_by_length", "BucketDataset", "BucketIterator", "BucketConfig"]

SNAPSHOT_EVERY = 64


def _is_int(x: Any) -> TypeGuard[int | np.integer]:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


@dataclass(frozen=True)
class BucketConfig:
    """The validated options of the bucketing stage (see the module docstring).

    Args:
        length_fn: an item's length, a non-negative int (a non-callable raises
            ``TypeError``).
        bucket_boundaries: strictly increasing positive ints (else ``ValueError``);
            ``k`` boundaries make ``k + 1`` buckets. Stored as a tuple.
        bucket_batch_sizes: an int for every bucket or one positive int per bucket
            (``len(bucket_boundaries) + 1`` entries, else ``ValueError``); stored as a
            tuple. ``None``: no size limit.
        max_tokens: a budget per batch of ``items * max(longest length, 1)`` tokens (a
            positive int), or ``None``. At least one of ``bucket_batch_sizes`` and
            ``max_tokens`` is needed (``ValueError``).
        drop_remainder: drop the incomplete batches left when the input ends.

    >>> BucketConfig(length_fn=len, bucket_boundaries=(3,), bucket_batch_sizes=(4, 2)).num_buckets
    2
    >>> BucketConfig(length_fn=len, bucket_boundaries=(3, 3), bucket_batch_sizes=4)
    Traceback (most recent call last):
    ...
    ValueError: `bucket_boundaries` must be strictly increasing positive ints, got [3, 3]
    """

    length_fn: Callable[[Any], int]
    bucket_boundaries: Sequence[int]  # a tuple after construction
    bucket_batch_sizes: Sequence[int] | int | None = None  # a tuple or None after construction
    max_tokens: int | None = None
    drop_remainder: bool = False

    def __post_init__(self) -> None:
        callable_arg("length_fn", self.length_fn)
        bounds = self.bucket_boundaries
        if isinstance(bounds, (str, bytes)) or not isinstance(bounds, Sequence):
            raise TypeError(f"`bucket_boundaries` must be a list of ints, got {bounds!r}")
        bounds = list(bounds)
        if not all(_is_int(b) and b > 0 for b in bounds) or any(
            a >= b for a, b in zip(bounds, bounds[1:])
        ):
            raise ValueError(
                f"`bucket_boundaries` must be strictly increasing positive ints, got {bounds!r}"
            )
        object.__setattr__(self, "bucket_boundaries", tuple(int(b) for b in bounds))
        sizes = self.bucket_batch_sizes
        n = len(bounds) + 1
        if sizes is not None:
            if _is_int(sizes):
                sizes = (positive_int("bucket_batch_sizes", int(sizes)),) * n
            else:
                if isinstance(sizes, (str, bytes)) or not isinstance(sizes, Sequence):
                    raise TypeError(
                        f"`bucket_batch_sizes` must be an int or a list of ints, got {sizes!r}"
                    )
                if len(sizes) != n:
                    raise ValueError(
                        f"`bucket_batch_sizes` must have len(bucket_boundaries) + 1 = {n} "
                        f"entries, got {len(sizes)}"
                    )
                sizes = tuple(positive_int("bucket_batch_sizes", s) for s in sizes)
            object.__setattr__(self, "bucket_batch_sizes", sizes)
        optional_positive_int("max_tokens", self.max_tokens)
        if self.bucket_batch_sizes is None and self.max_tokens is None:
            raise ValueError("give `bucket_batch_sizes`, `max_tokens` or both")
        object.__setattr__(self, "drop_remainder", bool(self.drop_remainder))

    @property
    def num_buckets(self) -> int:
        return len(self.bucket_boundaries) + 1

    def bucket_of(self, length: int) -> int:
        """The bucket index of an item of ``length``.

        Args:
            length: the item's length: bucket ``i`` holds the lengths from boundary
                ``i - 1`` (inclusive) to boundary ``i`` (exclusive).

        >>> BucketConfig(length_fn=len, bucket_boundaries=(3,), max_tokens=8).bucket_of(3)
        1
        """
        return bisect.bisect_right(self.bucket_boundaries, length)


class _Bucket:
    __slots__ = ("items", "positions", "max_len")

    def __init__(self) -> None:
        self.items: list = []
        self.positions: list[int] = []
        self.max_len = 0


class BucketIterator(DatasetIterator):
    """Reads ``parent`` and yields length-bucketed batches (lists of items).

    ``parent`` is any :class:`~feedline.dataset.iterator.DatasetIterator`; the options are
    those of :class:`BucketConfig`. State: see the module docstring.

    Args:
        parent: the input iterator; it must be resumable and deterministic for
            ``get_state()``.
        config: the bucketing options.

    >>> ds = Dataset.from_iterable(["a", "bbbb", "cc", "dddd", "e"]).bucket_by_length(
    ...     length_fn=len, bucket_boundaries=[3], bucket_batch_sizes=[2, 2])
    >>> it = ds.iterator()
    >>> next(it)
    ['a', 'cc']
    >>> state = it.get_state()
    >>> state["stages"]["type"], list(ds.iterator(state))     # resumes with the buckets' contents
    ('bucket', [['bbbb', 'dddd'], ['e']])
    """

    def __init__(self, parent: DatasetIterator, config: BucketConfig) -> None:
        self._parent = parent
        self._cfg = config
        self._buckets = [_Bucket() for _ in range(config.num_buckets)]
        self._pending: deque[tuple[list, list[int]]] = deque()
        self._read = 0
        self._exhausted = False
        self._snaps: deque | None = deque()  # (position, parent state before reading it)
        self._snap_error: StateError | None = None

    # ---------------------------------------------------------------- reading
    def _length(self, item: Any, pos: int) -> int:
        length = self._cfg.length_fn(item)
        if not _is_int(length) or length < 0:
            raise ValueError(
                f"`length_fn` must return a non-negative int, got {length!r} for item {pos}"
            )
        return int(length)

    def _add(self, item: Any, pos: int, length: int) -> None:
        cfg = self._cfg
        b = cfg.bucket_of(length)
        bucket = self._buckets[b]
        budget = cfg.max_tokens
        if budget is not None and bucket.items:
            longest = max(bucket.max_len, length, 1)
            if (len(bucket.items) + 1) * longest > budget:
                self._emit(b)
                bucket = self._buckets[b]
        bucket.items.append(item)
        bucket.positions.append(pos)
        bucket.max_len = max(bucket.max_len, length)
        n = len(bucket.items)
        sizes = cast("tuple[int, ...] | None", cfg.bucket_batch_sizes)  # see __post_init__
        if (sizes is not None and n >= sizes[b]) or (
            budget is not None and n * max(bucket.max_len, 1) >= budget
        ):
            self._emit(b)

    def _emit(self, b: int) -> None:
        bucket = self._buckets[b]
        self._pending.append((bucket.items, bucket.positions))
        self._buckets[b] = _Bucket()

    def _snapshot(self) -> None:
        if self._snaps is None:
            return
        self._prune()
        try:
            self._snaps.append((self._read, self._parent.get_state()))
        except StateError as exc:
            self._snaps = None
            self._snap_error = exc

    def _oldest(self) -> int:
        firsts = [b.positions[0] for b in self._buckets if b.positions]
        firsts += [p[0] for _, p in self._pending if p]
        return min(firsts) if firsts else self._read

    def _prune(self) -> None:
        snaps = self._snaps
        if snaps and len(snaps) >= 2:
            oldest = self._oldest()
            while len(snaps) >= 2 and snaps[1][0] <= oldest:
                snaps.popleft()

    def __next__(self) -> list:
        pending = self._pending
        while not pending:
            if self._exhausted:
                if not self._flush():
                    raise StopIteration
                continue
            if self._read % SNAPSHOT_EVERY == 0:
                self._snapshot()
            try:
                item = next(self._parent)
            except StopIteration:
                self._exhausted = True
                continue
            pos = self._read
            self._read += 1
            self._add(item, pos, self._length(item, pos))
        return pending.popleft()[0]

    def _flush(self) -> bool:
        """At the end of the input: move the first non-empty bucket to ``pending`` (or
        drop it). False when every bucket is empty."""
        for b, bucket in enumerate(self._buckets):
            if bucket.items:
                if self._cfg.drop_remainder:
                    self._buckets[b] = _Bucket()
                else:
                    self._emit(b)
                return True
        return False

    # ---------------------------------------------------------------- state
    def get_state(self) -> dict[str, Any]:
        if self._snaps is None:
            raise StateNotSupportedError(
                "bucket_by_length cannot report its position because its input cannot: "
                f"{self._snap_error}"
            ) from self._snap_error
        groups = [p for _, p in self._pending] + [b.positions for b in self._buckets]
        if not any(groups):
            return {"type": "bucket", "start": None, "parent": self._parent.get_state(),
                    "read": self._read, "exhausted": self._exhausted,
                    "pending": 0, "groups": [0] * len(groups), "positions": ""}
        self._prune()
        start, parent_state = self._snaps[0]
        flat = np.fromiter((p - start for g in groups for p in g), dtype="<u4")
        return {
            "type": "bucket",
            "start": start,
            "parent": parent_state,
            "read": self._read,
            "exhausted": self._exhausted,
            "pending": len(self._pending),
            "groups": [len(g) for g in groups],
            "positions": base64.b64encode(flat.tobytes()).decode("ascii"),
        }

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, "bucket",
                    ("start", "parent", "read", "exhausted", "pending", "groups", "positions"))
        nb = self._cfg.num_buckets
        n_pending = non_negative_int("state['pending']", state["pending"])
        sizes = [non_negative_int("state['groups']", g) for g in state["groups"]]
        if len(sizes) != n_pending + nb:
            raise StateError(
                f"bucket state has {len(sizes) - n_pending} buckets, this stage has {nb}"
            )
        read = non_negative_int("state['read']", state["read"])
        self._parent.set_state(state["parent"])
        self._buckets = [_Bucket() for _ in range(nb)]
        self._pending = deque()
        self._exhausted = bool(state["exhausted"])
        self._snaps = deque()
        self._snap_error = None
        self._read = read
        start = state["start"]
        if start is None:  # nothing was waiting: the parent's state is at `read`
            self._snaps.append((read, state["parent"]))
            return
        start = non_negative_int("state['start']", start)
        self._snaps.append((start, state["parent"]))
        rel = np.frombuffer(base64.b64decode(state["positions"]), dtype="<u4")
        if len(rel) != sum(sizes):
            raise StateError("bucket state is corrupt: positions do not match the group sizes")
        group_of: dict[int, int] = {}
        k = 0
        g: int | None
        for g, size in enumerate(sizes):
            for r in rel[k : k + size].tolist():
                group_of[start + r] = g
            k += size
        groups: list[tuple[list, list[int], int]] = [([], [], 0) for _ in sizes]
        for p in range(start, read):
            try:
                item = next(self._parent)
            except StopIteration:
                raise StateError(
                    f"bucket_by_length could not resume: its input ended at item {p}, "
                    f"expected {read}; the input is not deterministic"
                ) from None
            g = group_of.get(p)
            if g is not None:
                items, positions, longest = groups[g]
                items.append(item)
                positions.append(p)
                groups[g] = (items, positions, max(longest, self._length(item, p)))
        for items, positions, _ in groups[:n_pending]:
            self._pending.append((items, positions))
        for b, (items, positions, longest) in enumerate(groups[n_pending:]):
            bucket = self._buckets[b]
            bucket.items, bucket.positions, bucket.max_len = items, positions, longest

    def close(self) -> None:
        self._buckets = [_Bucket() for _ in range(self._cfg.num_buckets)]
        self._pending = deque()
        self._parent.close()


class BucketDataset(Dataset):
    """The dataset of :func:`bucket_by_length`.

    Args:
        parent: the dataset read.
        config: the bucketing options.

    >>> ds = Dataset.from_iterable(["a", "bbbb", "cc", "dddd"]).bucket_by_length(
    ...     length_fn=len, bucket_boundaries=[3], bucket_batch_sizes=[2, 2])
    >>> type(ds).__name__, ds.to_list()
    ('BucketDataset', [['a', 'cc'], ['bbbb', 'dddd']])
    """

    def __init__(self, parent: Dataset, config: BucketConfig) -> None:
        super().__init__()
        self._parents = (parent,)
        self._config = config

    @property
    def name(self) -> str:
        cfg = self._config
        limits = []
        if cfg.bucket_batch_sizes is not None:
            limits.append(f"sizes={list(cast(tuple, cfg.bucket_batch_sizes))}")
        if cfg.max_tokens is not None:
            limits.append(f"max_tokens={cfg.max_tokens}")
        return f"bucket_by_length({list(cfg.bucket_boundaries)}, {', '.join(limits)})"

    def _make_iterator(self, ctx: BuildContext) -> DatasetIterator:
        return BucketIterator(self._parents[0]._build(ctx), self._config)


def bucket_by_length(
    dataset: Dataset,
    *,
    length_fn: Callable[[Any], int],
    bucket_boundaries: Sequence[int],
    bucket_batch_sizes: Sequence[int] | int | None = None,
    max_tokens: int | None = None,
    drop_remainder: bool = False,
    pad: bool = False,
    padded_shapes: Any = None,
    padding_values: Any = None,
) -> Dataset:
    """Group the items of ``dataset`` into batches of similar length (module docstring).

    With ``pad=True`` each batch is padded and stacked as
    :meth:`~feedline.dataset.base.Dataset.padded_batch` does (with ``padded_shapes`` and
    ``padding_values``; tf.data's ``bucket_by_sequence_length``) instead of being a list.

    Args:
        dataset: the dataset read (another object raises ``TypeError``).
        length_fn: an item's length, a non-negative int (else ``ValueError`` naming the
            item).
        bucket_boundaries: strictly increasing positive ints; see :class:`BucketConfig`.
        bucket_batch_sizes: an int or one int per bucket; see :class:`BucketConfig`.
        max_tokens: a token budget per batch; see :class:`BucketConfig`.
        drop_remainder: drop the incomplete batches left when the input ends.
        pad: pad and stack each batch instead of yielding a list.
        padded_shapes: with ``pad=True``, as for
            :func:`~feedline.dataset.padded_batch.pad_batch` (without it: ``ValueError``).
        padding_values: with ``pad=True``, as for
            :func:`~feedline.dataset.padded_batch.pad_batch` (without it: ``ValueError``);
            ``None``: 0 (``""`` for strings).

    >>> from feedline import Dataset
    >>> ds = Dataset.from_iterable([[1], [1, 2, 3], [4], [5, 6, 7]])
    >>> bucket_by_length(ds, length_fn=len, bucket_boundaries=[2],
    ...                  bucket_batch_sizes=[2, 2]).to_list()
    [[[1], [4]], [[1, 2, 3], [5, 6, 7]]]
    >>> [b.tolist() for b in bucket_by_length(ds, length_fn=len, bucket_boundaries=[2],
    ...                                       bucket_batch_sizes=2, pad=True,
    ...                                       padded_shapes=(None,), padding_values=-1)]
    [[[1], [4]], [[1, 2, 3], [5, 6, 7]]]
    >>> ds = Dataset.from_iterable([[1], [1, 2], [4, 5, 6]])
    >>> [b.tolist() for b in bucket_by_length(ds, length_fn=len, bucket_boundaries=[3],
    ...                                       bucket_batch_sizes=2, pad=True)]
    [[[1, 0], [1, 2]], [[4, 5, 6]]]
    """
    if not isinstance(dataset, Dataset):
        raise TypeError(f"`dataset` must be a feedline Dataset, got {type(dataset).__name__}")
    config = BucketConfig(
        length_fn=length_fn,
        bucket_boundaries=bucket_boundaries,
        bucket_batch_sizes=bucket_batch_sizes,
        max_tokens=max_tokens,
        drop_remainder=drop_remainder,
    )
    check_bool("pad", pad)
    if not pad:
        if padded_shapes is not None or padding_values is not None:
            raise ValueError("`padded_shapes` and `padding_values` need pad=True")
        return BucketDataset(dataset, config)
    from feedline.dataset.padded_batch import PadBatch

    options: dict[str, Any] = {} if padding_values is None else {"padding_values": padding_values}
    collate = PadBatch(padded_shapes=padded_shapes, **options)
    return BucketDataset(dataset, config).map(collate, name="pad")
