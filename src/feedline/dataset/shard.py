"""``Dataset.shard``: this rank's part of a dataset, exactly once across ranks.

**Random-access datasets (index mode).** Let ``N = len(ds)`` and ``W = world_size``.
Global positions ``0, 1, 2, ...`` are dealt round robin: rank ``r`` reads positions
``r, r + W, r + 2W, ...``; position ``p`` is the parent's item ``p mod N``. How many
positions each rank reads is set by ``policy``:

* ``"pad"`` (default): ``ceil(N / W)`` each; the last round wraps to the start, so a few
  items are read twice and every rank yields the same number of items (and batches) —
  no DDP hang from uneven inputs.
* ``"drop_remainder"``: ``floor(N / W)`` each; the last ``N mod W`` positions are
  dropped (with a global shuffle before ``shard``, different ones each epoch).
* ``"none"``: exactly the positions below ``N``; ranks may differ by one item.

Every item is read exactly once per epoch across ranks (with ``pad``: at least once,
and at most twice when ``N >= W``). Because every rank computes the same global order, a
``global_shuffle(seed)`` *before* ``shard`` keeps the parts disjoint; a buffer shuffle
must come *after* it ("shard before you shuffle").

The state is the global position (``start + next * W``), so a job can resume with a
*different* world size: the new ranks continue the same epoch from that position without
losing or repeating a record (ranks run in lockstep, so rank 0's state stands for all).

**Resuming with a different world size after ``map(num_workers=N)``** — the exact limits:

* ``shard(...).map(fn, num_workers=N)`` (process or thread backend) reads the shard *by
  index*: its state counts positions of this rank's part, which mean nothing under
  another world size. Resuming it with a different ``world_size`` raises
  :class:`~feedline.exceptions.StateError` saying so; resume with the saved world size,
  or iterate the shard before the map, e.g. ``shard(...).prefetch(2).map(fn,
  num_workers=N)`` (with ``ordered=True``, the default).
* With a stage in between (``prefetch``, ``filter``, ``batch`` ...), the map reads a
  stream whose state is the shard's global position, and an *ordered* map resumes on
  any world size with nothing lost and nothing repeated. An unordered map
  (``ordered=False``) that had already yielded items ahead of its oldest pending one
  cannot move them to the new ranks and raises ``StateError``.

**Streams.** A stream dataset is sharded by taking every ``W``-th item starting at
``r`` (``policy`` must be ``"none"``); shard file lists this way, or use index mode.

>>> [Dataset.range(10).shard(r, 3).to_list() for r in range(3)]
[[0, 3, 6, 9], [1, 4, 7, 0], [2, 5, 8, 1]]
>>> [Dataset.range(10).shard(r, 3, policy="drop_remainder").to_list() for r in range(3)]
[[0, 3, 6], [1, 4, 7], [2, 5, 8]]
"""

from __future__ import annotations

from typing import Any, Protocol

from feedline._internal.state import state_int
from feedline._internal.validate import non_negative_int, one_of, positive_int
from feedline.dataset.base import BuildContext, Dataset, RandomAccessDataset
from feedline.dataset.iterator import DatasetIterator, check_state
from feedline.exceptions import StateError

__all__ = ["ShardDataset", "StreamShardDataset", "shard_dataset", "find_rank_split", "POLICIES"]

POLICIES = ("pad", "drop_remainder", "none")

#: How many times a shard iterator in this process restored a state saved under another
#: world size; worker-map stages compare it around ``set_state`` to refuse skips counted
#: in the old world's items.
reshard_count = 0


def shard_dataset(parent: Dataset, rank: int, world_size: int, *, policy: str = "pad") -> Dataset:
    """This rank's part of ``parent``; see the module docstring.

    Args:
        parent: the dataset split.
        rank: this rank, an int in ``0 .. world_size - 1`` (else ``ValueError``).
        world_size: the number of ranks (a positive int).
        policy: ``"pad"``, ``"drop_remainder"`` or ``"none"`` (else ``ValueError``); a
            stream accepts only ``"none"`` (``ValueError``).

    >>> [shard_dataset(Dataset.range(5), r, 2, policy="drop_remainder").to_list() for r in range(2)]
    [[0, 2], [1, 3]]
    >>> [shard_dataset(Dataset.range(5), r, 2, policy="none").to_list() for r in range(2)]
    [[0, 2, 4], [1, 3]]
    """
    positive_int("world_size", world_size)
    non_negative_int("rank", rank)
    if rank >= world_size:
        raise ValueError(f"`rank` must be below world_size={world_size}, got {rank}")
    one_of("policy", policy, POLICIES)
    if isinstance(parent, RandomAccessDataset):
        return ShardDataset(parent, rank, world_size, policy)
    if policy != "none":
        raise ValueError(
            f"policy={policy!r} needs a random-access dataset to count items; "
            f"{parent.name} is a stream: use policy='none' or an indexed source"
        )
    return StreamShardDataset(parent, rank, world_size)


class RankSplit(Protocol):
    """A stage that splits by rank: its ``rank_split`` is ``(rank, world_size)``."""

    @property
    def name(self) -> str: ...

    @property
    def rank_split(self) -> tuple[int, int]: ...


def find_rank_split(ds: Dataset) -> RankSplit | None:
    """The first stage of ``ds`` (itself, then its inputs, depth first) that splits by
    rank — a :class:`ShardDataset`, a :class:`StreamShardDataset`, a byte-range
    :func:`feedline.split` part, a Runner's rank split: any stage whose ``rank_split``
    is ``(rank, world_size)`` — or ``None``. Consumers that split by rank themselves
    (``as_torch()``, the Lightning DataModule, the Runner's DataProvider) use it to never
    split a pipeline twice.

    Args:
        ds: the last stage of the pipeline searched.

    >>> find_rank_split(Dataset.range(6).shard(1, 2).map(str)).rank_split
    (1, 2)
    >>> find_rank_split(Dataset.range(6).map(str)) is None
    True
    """
    stack = [ds]
    while stack:
        node = stack.pop()
        if getattr(node, "rank_split", None) is not None:
            return node  # type: ignore[return-value]  # it has the protocol's attributes
        stack.extend(reversed(node._parents))
    return None


def _count(remaining: int, world: int, rank: int, policy: str) -> int:
    if policy == "pad":
        return -(-remaining // world)
    if policy == "drop_remainder":
        return remaining // world
    return max(0, -(-(remaining - rank) // world))


class ShardDataset(RandomAccessDataset):
    """Index-mode shard of a random-access dataset; itself random access
    (``shard[k]`` is global position ``k * world_size + rank``).

    Args:
        parent: the random-access dataset split.
        rank: this rank, in ``0 .. world - 1`` (:func:`shard_dataset` checks it).
        world: the number of ranks.
        policy: ``"pad"``, ``"drop_remainder"`` or ``"none"`` (see the module docstring).

    >>> ds = Dataset.range(5).shard(1, 2)              # rank 1 of 2, padded
    >>> type(ds).__name__, len(ds), ds.to_list()
    ('ShardDataset', 3, [1, 3, 0])
    """

    reshardable_state = True  # resumable on another world size (see the module docstring)

    def __init__(self, parent: RandomAccessDataset, rank: int, world: int, policy: str) -> None:
        super().__init__()
        self._parents: tuple[RandomAccessDataset, ...] = (parent,)
        self.rank, self.world_size, self.policy = rank, world, policy

    @property
    def name(self) -> str:
        return f"shard({self.rank}/{self.world_size})"

    @property
    def rank_split(self) -> tuple[int, int]:
        """``(rank, world_size)``: this stage splits by rank (see :func:`find_rank_split`)."""
        return self.rank, self.world_size

    def __len__(self) -> int:
        """Items this rank yields per epoch."""
        return _count(len(self._parents[0]), self.world_size, self.rank, self.policy)

    def _getitem(self, index: int) -> Any:
        parent = self._parents[0]
        n, per_rank = len(parent), len(self)
        epoch, k = divmod(index, per_rank)
        return parent._getitem(epoch * n + (k * self.world_size + self.rank) % n)

    def _make_iterator(self, ctx: BuildContext) -> DatasetIterator:
        return _ShardIterator(self._parents[0], ctx.epoch, self.rank, self.world_size,
                              self.policy)


class _ShardIterator(DatasetIterator):
    def __init__(self, parent: RandomAccessDataset, epoch: int, rank: int, world: int,
                 policy: str) -> None:
        self._parent = parent
        self._n = len(parent)
        self._base = epoch * self._n
        self._rank, self._world, self._policy = rank, world, policy
        self._start = 0
        self._next = 0
        self._count = _count(self._n, world, rank, policy)

    def __next__(self) -> Any:
        j = self._next
        if j >= self._count or self._n == 0:
            raise StopIteration
        p = (self._start + j * self._world + self._rank) % self._n
        item = self._parent._getitem(self._base + p)
        self._next = j + 1
        return item

    def get_state(self) -> dict[str, Any]:
        return {"type": "shard", "start": self._start, "next": self._next,
                "world_size": self._world, "len": self._n}

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, "shard", ("start", "next", "world_size", "len"))
        if state["len"] != self._n:
            raise StateError(f"shard state is for {state['len']} items, this dataset has {self._n}")
        start = state_int(state, "start", "shard", high=self._n)
        world = state_int(state, "world_size", "shard", low=1)
        nxt = state_int(state, "next", "shard", high=-(-(self._n - start) // world))
        if state["world_size"] == self._world:
            self._start, self._next = start, nxt
        else:  # continue the same epoch from the global position with the new world size
            global reshard_count
            reshard_count += 1
            self._start = min(start + nxt * state["world_size"], self._n)
            self._next = 0
        self._count = _count(self._n - self._start, self._world, self._rank, self._policy)


class StreamShardDataset(Dataset):
    """Every ``world_size``-th item of a stream, starting at ``rank``.

    Args:
        parent: the stream split.
        rank: this rank, in ``0 .. world - 1`` (:func:`shard_dataset` checks it).
        world: the number of ranks.

    >>> ds = Dataset.from_reader(lambda: iter(range(5))).shard(1, 2, policy="none")  # items 1, 3, ...
    >>> type(ds).__name__, ds.to_list()
    ('StreamShardDataset', [1, 3])
    """

    reshardable_state = True  # resumable on another world size (see the module docstring)

    def __init__(self, parent: Dataset, rank: int, world: int) -> None:
        super().__init__()
        self._parents = (parent,)
        self.rank, self.world_size = rank, world

    @property
    def name(self) -> str:
        return f"shard({self.rank}/{self.world_size})"

    @property
    def rank_split(self) -> tuple[int, int]:
        """``(rank, world_size)``: this stage splits by rank (see :func:`find_rank_split`)."""
        return self.rank, self.world_size

    def _make_iterator(self, ctx: BuildContext) -> DatasetIterator:
        return _StreamShardIterator(self._parents[0]._build(ctx), self.rank, self.world_size)


class _StreamShardIterator(DatasetIterator):
    def __init__(self, parent: DatasetIterator, rank: int, world: int) -> None:
        self._parent = parent
        self._rank, self._world = rank, world
        self._seen = 0  # items read from the parent
        self._hint()

    def _hint(self) -> None:
        # a parent that can (a TFRecord reader) skips the work on items this part drops
        hint = getattr(self._parent, "hint_stride", None)
        if hint is not None:
            hint((self._rank - self._seen) % self._world, self._world)

    def __next__(self) -> Any:
        parent = self._parent
        while True:
            item = next(parent)
            k = self._seen
            self._seen = k + 1
            if k % self._world == self._rank:
                return item

    def get_state(self) -> dict[str, Any]:
        return {"type": "stream_shard", "seen": self._seen, "parent": self._parent.get_state()}

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, "stream_shard", ("seen", "parent"))
        self._parent.set_state(state["parent"])
        self._seen = non_negative_int("state['seen']", state["seen"])
        self._hint()

    def close(self) -> None:
        self._parent.close()
