"""``Dataset.shuffle``: buffer shuffle with TensorFlow's ``min_after_dequeue`` meaning.

The stage keeps a buffer of up to ``buffer_size`` items. Before every output it refills
the buffer from the parent; it then yields an item drawn uniformly from the buffer.
When the parent ends, the buffer drains in random order. So the first output comes
only after ``buffer_size`` items were read, and an item can move forward by at most
``buffer_size - 1`` places. ``buffer_size=1`` keeps the order; a buffer as large as the
dataset gives a uniform permutation.

Randomness is counter based: draw ``k`` of epoch ``e`` comes from a generator seeded
with ``(seed, e, k // 4096)``, so the order depends only on ``(seed, epoch)`` and the
parent's order. ``seed=None`` draws a seed once, when the stage is built.

State (small and JSON-serialisable, whatever the items are): the parent's state at or
before the oldest buffered item, the positions of the buffered items, how many items
were read and how many draws made. Resuming re-reads the parent from that point and
keeps the items that were still in the buffer, so the parent must be resumable and
deterministic. The parent's state is captured every ``buffer_size`` reads, so the
extra work on resume is a few buffers' worth of reading.

Shard before you shuffle: a shuffle before ``split`` would give each rank items from
a different order.

>>> Dataset.range(10).shuffle(4, seed=1).to_list()  # doctest: +SKIP
[2, 0, 4, 1, 6, 3, 8, 9, 7, 5]
>>> sorted(Dataset.range(10).shuffle(4, seed=1).to_list()) == list(range(10))
True
"""

from __future__ import annotations

import base64
import random
from collections import deque
from typing import Any

import numpy as np

from feedline._internal.state import state_bool, state_int
from feedline.dataset.base import BuildContext, Dataset
from feedline.dataset.iterator import DatasetIterator, check_state
from feedline.exceptions import InvalidStateError, StateError, StateNotSupportedError

__all__ = ["ShuffleDataset", "resolve_seed", "CounterRandom"]

_BLOCK = 4096


def resolve_seed(seed: int | None, name: str = "seed") -> int:
    """``seed`` validated, or a fresh random 63-bit seed when ``None``.

    Args:
        seed: an int (Python or numpy; taken modulo 2**64), or ``None`` for a seed from
            the OS; another type raises ``TypeError``.
        name: the option's name in that error.

    >>> resolve_seed(7)
    7
    >>> s = resolve_seed(None)                          # a fresh seed from the OS
    >>> isinstance(s, int) and s >= 0
    True
    """
    if seed is None:
        return random.SystemRandom().getrandbits(63)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"`{name}` must be an int or None, got {seed!r}")
    return int(seed) & (2**64 - 1)


class CounterRandom:
    """Uniform floats in [0, 1) addressed by a counter: ``u(k)`` for draw ``k``.

    Args:
        seed: the stream's seed.
        epoch: the iteration number; each ``(seed, epoch)`` is its own stream.

    >>> r = CounterRandom(7, 0)
    >>> a = [r.u(k) for k in range(3)]
    >>> a == [CounterRandom(7, 0).u(k) for k in range(3)]
    True
    """

    __slots__ = ("_key", "_block_index", "_block")

    def __init__(self, seed: int, epoch: int) -> None:
        self._key = (seed, epoch)
        self._block_index = -1
        self._block: list[float] = []

    def u(self, k: int) -> float:
        """Draw ``k``: the same float every time for the same seed, epoch and ``k``.

        Args:
            k: the draw's number (>= 0); draws come in blocks of 4096 generated at once.

        >>> CounterRandom(1, 0).u(5) == CounterRandom(1, 0).u(5)
        True
        """
        b, i = divmod(k, _BLOCK)
        if b != self._block_index:
            ss = np.random.SeedSequence([self._key[0], self._key[1], b])
            self._block = np.random.Generator(np.random.PCG64(ss)).random(_BLOCK).tolist()
            self._block_index = b
        return self._block[i]


class ShuffleDataset(Dataset):
    """Buffer shuffle; see the module docstring.

    Args:
        parent: the dataset read; it must be resumable and deterministic for
            ``get_state()``.
        buffer_size: items held in the buffer (:meth:`Dataset.shuffle` checks it).
        seed: the seed of the sequence of orders (``None``: a fresh one drawn now).

    >>> ds = Dataset.range(5).shuffle(3, seed=0)
    >>> out = ds.to_list()
    >>> type(ds).__name__, sorted(out), Dataset.range(5).shuffle(3, seed=0).to_list() == out
    ('ShuffleDataset', [0, 1, 2, 3, 4], True)
    """

    def __init__(self, parent: Dataset, buffer_size: int, *, seed: int | None) -> None:
        super().__init__()
        self._parents = (parent,)
        self._buffer_size = buffer_size
        self._seed = resolve_seed(seed)

    @property
    def name(self) -> str:
        return f"shuffle({self._buffer_size})"

    def _make_iterator(self, ctx: BuildContext) -> DatasetIterator:
        return _ShuffleIterator(
            self._parents[0]._build(ctx), self._buffer_size, self._seed, ctx.epoch
        )


class _ShuffleIterator(DatasetIterator):
    def __init__(self, parent: DatasetIterator, buffer_size: int, seed: int, epoch: int) -> None:
        self._parent = parent
        self._size = buffer_size
        self._seed = seed
        self._epoch = epoch
        self._rng = CounterRandom(seed, epoch)
        self._buf: list = []
        self._pos: list[int] = []  # parent position of each buffered item
        self._read = 0  # items read from the parent
        self._draws = 0
        self._exhausted = False
        # (position, parent state before reading that position); None when untracked
        self._snaps: deque | None = deque()
        self._snap_error: StateError | None = None
        self._steady_key = -1
        self._steady: list[int] = []
        self._steady_offset: int | None = None  # draws - read while in the steady state
        self._gen = self._generate()

    def _snapshot(self) -> None:
        if self._snaps is None:
            return
        if self._read and self._read % (self._size * 4) == 0:
            self._prune_snapshots()
        try:
            self._snaps.append((self._read, self._parent.get_state()))
        except StateError as exc:
            self._snaps = None
            self._snap_error = exc

    def _prune_snapshots(self) -> None:
        snaps = self._snaps
        if not snaps or len(snaps) < 2:
            return
        oldest = min(self._pos) if self._pos else self._read
        while len(snaps) >= 2 and snaps[1][0] <= oldest:
            snaps.popleft()

    def _steady_block(self, b: int) -> list[int]:
        """Slot indices for draws ``b*BLOCK ..`` while the buffer holds ``size`` items;
        equal to ``int(u(k) * size)`` draw by draw."""
        if b != self._steady_key:
            self._rng.u(b * _BLOCK)
            u = np.asarray(self._rng._block)
            self._steady = (u * self._size).astype(np.int64).tolist()
            self._steady_key = b
        return self._steady

    def _generate(self) -> Any:
        parent = self._parent._fast()
        buf, pos, size = self._buf, self._pos, self._size
        # fill: the first output comes once the buffer holds `size` items
        while len(buf) < size and not self._exhausted:
            if self._read % size == 0:
                self._snapshot()
            try:
                item = next(parent)
            except StopIteration:
                self._exhausted = True
                break
            buf.append(item)
            pos.append(self._read)
            self._read += 1
        # steady state: output a random slot and refill it with the next input item.
        # Reads and draws advance together here, so only `_read` is stored per item and
        # `_draws` is derived from it (see `_steady_offset`).
        read = self._read
        if not self._exhausted:
            self._steady_offset = self._draws - read
        next_snapshot = -(-read // size) * size
        while not self._exhausted:
            assert self._steady_offset is not None  # set above; cleared only at the end
            b, i = divmod(read + self._steady_offset, _BLOCK)
            slots = self._steady_block(b)
            for j in slots[i:]:
                item = buf[j]
                if read == next_snapshot:
                    self._read = read
                    self._snapshot()
                    next_snapshot += size
                try:
                    new = next(parent)
                except StopIteration:
                    self._exhausted = True
                    buf[j] = buf[-1]
                    buf.pop()
                    pos[j] = pos[-1]
                    pos.pop()
                    self._draws = read + self._steady_offset + 1
                    self._read = read
                    self._steady_offset = None
                    yield item
                    break
                buf[j] = new
                pos[j] = read
                read += 1
                self._read = read
                yield item
        # drain: the input ended; empty the buffer in random order (draw k is
        # u(k), read straight from the generator's block)
        rng = self._rng
        while buf:
            rng.u(self._draws)  # loads the block holding this draw
            block = rng._block
            for i in range(self._draws - rng._block_index * _BLOCK, _BLOCK):
                if not buf:
                    break
                j = int(block[i] * len(buf))
                self._draws += 1
                item = buf[j]
                buf[j] = buf[-1]
                buf.pop()
                pos[j] = pos[-1]
                pos.pop()
                yield item

    def __next__(self) -> Any:
        return next(self._gen)

    def _fast(self) -> Any:
        return self._gen

    def get_state(self) -> dict[str, Any]:
        if self._snaps is None:
            raise StateNotSupportedError(
                f"shuffle cannot report its position because its input cannot: {self._snap_error}"
            ) from self._snap_error
        if not self._snaps:  # nothing read yet
            return {"type": "shuffle", "seed": self._seed, "start": None,
                    "parent": self._parent.get_state(), "read": 0, "draws": 0,
                    "exhausted": False, "buffer": ""}
        self._prune_snapshots()
        if self._steady_offset is not None:
            self._draws = self._read + self._steady_offset
        start, parent_state = self._snaps[0]
        rel = np.asarray(self._pos, dtype=np.int64) - start
        return {
            "type": "shuffle",
            "seed": self._seed,
            "start": start,
            "parent": parent_state,
            "read": self._read,
            "draws": self._draws,
            "exhausted": self._exhausted,
            "buffer": base64.b64encode(rel.astype("<u4").tobytes()).decode("ascii"),
        }

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, "shuffle", ("seed", "start", "parent", "read", "draws", "exhausted",
                                       "buffer"))
        if state["seed"] != self._seed:
            raise StateError(
                f"shuffle state was made with seed {state['seed']}, this stage uses {self._seed}"
            )
        self._gen.close()
        self._steady_offset = None
        self._parent.set_state(state["parent"])
        self._buf, self._pos = [], []
        self._draws = state_int(state, "draws", "shuffle")
        read = state_int(state, "read", "shuffle")
        self._exhausted = state_bool(state, "exhausted", "shuffle")
        self._snaps = deque()
        start = None if state["start"] is None else state_int(state, "start", "shuffle",
                                                              high=read)
        if start is None:
            self._read = 0
            self._gen = self._generate()
            return
        rel = np.frombuffer(base64.b64decode(state["buffer"], validate=True), dtype="<u4")
        if len(rel) > self._size or (len(rel) and int(rel.max()) >= read - start):
            raise InvalidStateError(
                f"state of stage 'shuffle': `buffer` holds {len(rel)} positions, at most "
                f"{self._size} below read - start = {read - start} expected")
        wanted = {int(r) + start: slot for slot, r in enumerate(rel)}
        items: list = [None] * len(rel)
        self._snaps.append((start, state["parent"]))
        for p in range(start, read):
            try:
                item = next(self._parent)
            except StopIteration:
                raise StateError(
                    f"shuffle could not resume: its input ended at item {p}, expected {read}; "
                    "the input is not deterministic"
                ) from None
            slot = wanted.get(p)
            if slot is not None:
                items[slot] = item
        self._buf = items
        self._pos = [int(r) + start for r in rel]
        self._read = read
        self._gen = self._generate()

    def buffer_fill(self) -> float:
        """Fraction of the buffer in use (for statistics)."""
        return len(self._buf) / self._size

    def close(self) -> None:
        self._gen.close()
        self._buf, self._pos = [], []
        self._parent.close()

