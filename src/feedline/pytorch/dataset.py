"""``Dataset.as_torch()``: a feedline pipeline as a ``torch.utils.data`` dataset.

:func:`as_torch` (and the method :meth:`feedline.Dataset.as_torch`) returns

* a :class:`TorchMapDataset` (``__len__``, ``__getitem__``) when the pipeline is random
  access (:class:`~feedline.dataset.base.RandomAccessDataset`): the DataLoader's sampler
  chooses the indices, so shuffling, ``DistributedSampler`` and worker splitting are
  PyTorch's own; ``set_epoch(e)`` makes index ``i`` read the pipeline's item
  ``e * len + i`` (a new order of a ``global_shuffle`` each epoch);
* otherwise a :class:`TorchIterableDataset`, which

  - splits the work: DataLoader worker ``w`` of ``W`` (``get_worker_info()``) on rank
    ``r`` of ``R`` (``torch.distributed`` when initialised, else ``RANK``/``WORLD_SIZE``)
    reads part ``r * W + w`` of ``R * W``, so every record is read exactly once per
    epoch across ranks and workers (see *Where the pipeline is split* below);
  - runs epoch ``e`` of the pipeline (seeding ``shuffle``/``global_shuffle``): by
    default each ``iter(loader)`` runs the next epoch — 0, 1, 2, ... — also with worker
    processes, fresh or persistent (the workers of one iteration agree on its number
    through a counter in shared memory); :meth:`~TorchIterableDataset.set_epoch` sets
    the next one (as with ``DistributedSampler``), and a loaded state sets its own;
  - has ``state_dict()`` / ``load_state_dict()`` (the torchdata ``Stateful`` protocol),
    so ``torchdata.stateful_dataloader.StatefulDataLoader`` — with or without worker
    processes — resumes exactly: a loader restored from a state taken after ``k``
    batches yields the batches the uninterrupted loader yields after ``k``; on
    another world size or ``num_workers``, :func:`job_state` combines the states of
    every rank into one that resumes the epoch exactly once.

Items are converted with the :mod:`feedline.pytorch.convert` rules (numpy arrays, also inside
dicts, lists and tuples, become tensors; ``pin_memory=True`` pins them when iterated in
the main process — inside worker processes pass ``pin_memory=True`` to the DataLoader,
which pins in the main process). ``convert=False`` hands items over unchanged.

**Where the pipeline is split.** A stream pipeline is split as close to its source as
possible without changing what it means: above the topmost stage that is not one of
``map`` (in-thread or threads), ``filter``, ``flat_map``, ``shuffle``, ``batch``,
``prefetch``, ``interleave``, ``bucket_by_length``. There each part keeps every
``P``-th record (index mode for a random-access stage: it reads only its own records,
so a ``global_shuffle`` below the split is one permutation for all parts); the stages
above run per part, so each part decodes only its own records. Stages such as ``take``,
``skip``, ``zip``, ``concat``, ``repeat`` or ``map(num_workers=N)`` stay below the split
(their meaning depends on seeing every item). Batches are then made per part: each
record is in exactly one batch, and each part may end with a short batch; a buffer
``shuffle`` above the split gets a seed of its own per part (derived from its seed and
the part), so the parts' orders are independent and still the same in every run. A
TFRecord reader right below the split is told which records its part drops
(``TFRecordReader.hint_stride``) and hands those over without copying them or checking
their data CRC: the part that keeps a record checks it.

When the source is random access but has fewer items than there are parts (a file
list of one file read by a ``flat_map``, split over 2 ranks x 2 workers), the split goes
just above the lowest ``flat_map`` instead: each part keeps every ``P``-th of its
records, so no part is left without data.

**A pipeline already split by rank** — it contains a :func:`feedline.split` part, a
``shard``, a Runner's rank split (:func:`feedline.dataset.shard.find_rank_split`) — is
never split by rank again: it becomes a :class:`TorchIterableDataset` (also when random
access, so no ``DistributedSampler`` can divide it a second time) that splits it only
across DataLoader workers: a byte-range part of :func:`feedline.split` into byte ranges
again (part ``r * W + w`` of ``R * W``), anything else as above with ``W`` parts. In a
job of ``R > 1`` ranks, a split into another number of parts is refused with a
``ValueError`` that says what to remove.

Under DDP every rank must run the same number of steps. Parts of a stream can differ
(by a record, or by much more for byte ranges and files of different sizes): wrap the
DataLoader in :func:`feedline.pytorch.rank_join.join` (``for batch in join(loader): ...``), which
makes the ranks agree at every step and end the epoch together (``policy="pad"`` or
``"drop_remainder"``, counted in its ``stats()``); the Lightning DataModule does this
itself. A random-access pipeline with a ``DistributedSampler`` has equal counts.

>>> import torch
>>> from feedline import Dataset
>>> ds = Dataset.range(10).filter(lambda x: x % 3 != 0).batch(2, collate="numpy")
>>> loader = torch.utils.data.DataLoader(ds.as_torch(), batch_size=None)
>>> [b.tolist() for b in loader]
[[1, 2], [4, 5], [7, 8]]
>>> mapped = Dataset.range(4).map(float).as_torch()
>>> len(mapped), mapped[3]
(4, 3.0)
"""

from __future__ import annotations

import copy
import logging
import multiprocessing
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from feedline._internal.optional import require
from feedline._internal.validate import non_negative_int
from feedline.dataset.base import STATE_VERSION as PIPELINE_STATE_VERSION
from feedline.dataset.base import Dataset, RandomAccessDataset
from feedline.exceptions import StateError

__all__ = ["as_torch", "TorchMapDataset", "TorchIterableDataset", "job_state", "STATE_VERSION"]

logger = logging.getLogger(__name__)

STATE_VERSION = 1

if TYPE_CHECKING:
    import torch
else:
    torch = require("torch", extra="torch")


def _splittable_types() -> tuple[type, ...]:
    from feedline.dataset.batch import BatchDataset
    from feedline.dataset.bucket import BucketDataset
    from feedline.dataset.filter import FilterDataset
    from feedline.dataset.flat_map import FlatMapDataset
    from feedline.dataset.interleave import InterleaveDataset
    from feedline.dataset.map import MapDataset, RandomAccessMapDataset
    from feedline.dataset.prefetch import PrefetchDataset
    from feedline.dataset.shuffle import ShuffleDataset
    from feedline.dataset.thread_map import ThreadMapDataset

    return (BatchDataset, BucketDataset, FilterDataset, FlatMapDataset, InterleaveDataset,
            MapDataset, RandomAccessMapDataset, PrefetchDataset, ShuffleDataset,
            ThreadMapDataset)


def split_pipeline(ds: Dataset, part: int, parts: int) -> Dataset:
    """Part ``part`` of ``parts`` of ``ds``, split as close to the source as possible
    (see the module docstring); ``ds`` itself is left unchanged.

    >>> from feedline import Dataset
    >>> ds = Dataset.range(6).filter(lambda x: True).batch(2)
    >>> [split_pipeline(ds, p, 2).to_list() for p in range(2)]
    [[[0, 2], [4]], [[1, 3], [5]]]
    """
    from feedline.dataset.flat_map import FlatMapDataset
    from feedline.dataset.shard import shard_dataset

    if parts == 1:
        return ds
    chain, node = _chain(ds)
    if isinstance(node, RandomAccessDataset) and len(node) < parts:
        # fewer source items (files) than parts: split the records of the lowest flat_map
        lowest = max((i for i, stage in enumerate(chain) if isinstance(stage, FlatMapDataset)),
                     default=None)
        if lowest is not None:
            node, chain = chain[lowest], chain[:lowest]
    return _restack(chain, shard_dataset(node, part, parts, policy="none"), part)


def _chain(ds: Dataset, stop: Any = None) -> tuple[list[Dataset], Dataset]:
    """``(stages, node)``: the stages of ``ds`` a split may go below (top first), down to
    the first other stage or ``stop``, and that stage."""
    ok = _splittable_types()
    chain: list[Dataset] = []
    node = ds
    while node is not stop and isinstance(node, ok) and len(node._parents) == 1:
        chain.append(node)
        node = node._parents[0]
    return chain, node


def _restack(chain: list[Dataset], new: Dataset, part: int) -> Dataset:
    """The stages of ``chain`` (top first) cloned on top of ``new``, the part's source."""
    from feedline.dataset.shuffle import ShuffleDataset

    for stage in reversed(chain):
        clone = copy.copy(stage)
        clone._parents = (new,)
        clone._iterations = 0
        if isinstance(clone, ShuffleDataset):  # parts shuffle independently of each other
            clone._seed = int(np.random.SeedSequence([stage._seed, part]).generate_state(
                2, np.uint64)[0])
        new = clone
    return new


def split_workers(ds: Dataset, worker: int, workers: int) -> Dataset:
    """Worker ``worker``'s part of ``workers`` of a pipeline already split by rank (see
    *A pipeline already split by rank* in the module docstring).

    >>> from feedline import Dataset
    >>> ds = Dataset.range(8).shard(1, 2).map(int)           # rank 1's part: 1, 3, 5, 7
    >>> [split_workers(ds, w, 2).to_list() for w in range(2)]
    [[1, 5], [3, 7]]
    """
    from feedline.dataset.shard import find_rank_split
    from feedline.io.split import ByteRangeSplit

    if workers == 1:
        return ds
    found = find_rank_split(ds)
    if isinstance(found, ByteRangeSplit) and found.num_workers == 1:
        chain, node = _chain(ds, stop=found)
        if node is found:
            return _restack(chain, found.for_worker(worker, workers), worker)
    return split_pipeline(ds, worker, workers)


def _import_worker_modules() -> None:
    """Import here what every worker's ``iter()`` needs, so that forked DataLoader
    workers inherit it instead of importing it again at the start of each epoch."""
    import feedline.dataset.shard  # noqa: F401
    import feedline.io.split  # noqa: F401
    import feedline.pytorch.convert  # noqa: F401

    _splittable_types()


def _converter(convert: bool, pin_memory: bool) -> Callable[[Any], Any] | None:
    if not convert:
        return None
    from feedline.pytorch.convert import converter

    return converter(pin_memory=pin_memory)


class TorchMapDataset(torch.utils.data.Dataset):
    """A random-access pipeline as a map-style ``torch.utils.data.Dataset``.

    ``ds[i]`` is the pipeline's item ``epoch * len + i`` (``epoch`` from
    :meth:`set_epoch`, default 0), converted by the ``to_torch`` rules.

    Args:
        dataset: a random-access pipeline (a stream raises ``TypeError``; use
            :class:`TorchIterableDataset`).
        convert: turn numpy arrays (also inside dicts, lists and tuples) into tensors
            (:func:`feedline.pytorch.convert.to_torch`); ``False`` hands items over as
            they are.
        pin_memory: pin the tensors when read in the main process (with worker
            processes, pass ``pin_memory=True`` to the DataLoader instead).

    >>> import numpy as np
    >>> from feedline import Dataset
    >>> tds = TorchMapDataset(Dataset.from_arrays(np.arange(6).reshape(3, 2)))
    >>> len(tds), tds[1]
    (3, tensor([2, 3]))
    """

    def __init__(self, dataset: RandomAccessDataset, *, convert: bool = True,
                 pin_memory: bool = False) -> None:
        if not isinstance(dataset, RandomAccessDataset):
            raise TypeError(
                f"TorchMapDataset needs a random-access dataset, got {dataset.name}; "
                "use TorchIterableDataset for streams"
            )
        self.dataset = dataset
        self.convert = bool(convert)
        self.pin_memory = bool(pin_memory)
        self.epoch = 0
        self._convert: Callable[[Any], Any] | None | Literal[False] = False  # built lazily per process

    def set_epoch(self, epoch: int) -> None:
        """Read epoch ``epoch`` of the pipeline from now on (``DistributedSampler``-style).

        Args:
            epoch: a non-negative int (else ``ValueError``/``TypeError``): index ``i``
                then reads the pipeline's item ``epoch * len + i``.
        """
        self.epoch = non_negative_int("epoch", epoch)

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> Any:
        n = len(self.dataset)
        if isinstance(index, bool) or not isinstance(index, int):
            index = int(index)
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError(f"index {index} out of range for a dataset of {n} items")
        item = self.dataset[self.epoch * n + index]
        if self._convert is False:
            in_worker = torch.utils.data.get_worker_info() is not None
            self._convert = _converter(self.convert, self.pin_memory and not in_worker)
        return item if self._convert is None else self._convert(item)

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_convert"] = False
        return state


class TorchIterableDataset(torch.utils.data.IterableDataset):
    """A stream pipeline as a ``torch.utils.data.IterableDataset``; see the module
    docstring for splitting, epochs and state.

    ``state_dict()`` is ``{"version", "epoch", "part", "parts",
    "pipeline"}``: the position of the iterator last started (``pipeline`` is ``None``
    before its first item), or of the next epoch's start when none was started; while it
    resumes parts of a saved job (:func:`job_state`) it also has ``units``, the state of
    each of those parts.

    Args:
        dataset: the pipeline (not a feedline ``Dataset``: ``TypeError``).
        convert: turn numpy arrays (also inside dicts, lists and tuples) into tensors
            (:func:`feedline.pytorch.convert.to_torch`); ``False`` hands items over as
            they are.
        pin_memory: pin the tensors when read in the main process (with worker
            processes, pass ``pin_memory=True`` to the DataLoader instead).
        rank: this rank, fixed instead of ``torch.distributed``'s; ``None`` (the
            default): ``torch.distributed``'s, else ``RANK``, looked up when iterated or
            pickled into a worker.
        world_size: the number of ranks, fixed; ``None`` as for ``rank``, from
            ``WORLD_SIZE``.

    >>> from feedline import Dataset
    >>> tds = TorchIterableDataset(Dataset.range(6).filter(lambda x: x != 2))
    >>> it = iter(tds); [int(next(it)) for _ in range(2)]
    [0, 1]
    >>> state = tds.state_dict()
    >>> again = TorchIterableDataset(Dataset.range(6).filter(lambda x: x != 2))
    >>> again.load_state_dict(state)
    >>> [int(x) for x in again]
    [3, 4, 5]
    """

    def __init__(self, dataset: Dataset, *, convert: bool = True, pin_memory: bool = False,
                 rank: int | None = None, world_size: int | None = None) -> None:
        if not isinstance(dataset, Dataset):
            raise TypeError(f"`dataset` must be a feedline Dataset, got {type(dataset).__name__}")
        if rank is not None or world_size is not None:
            from feedline.io.split import resolve_rank_world

            rank, world_size = resolve_rank_world(rank, world_size)
        from feedline.dataset.shard import find_rank_split

        self.dataset = dataset
        self.convert = bool(convert)
        self.pin_memory = bool(pin_memory)
        self.rank, self.world_size = rank, world_size
        #: whether the pipeline is split by rank already (a split/shard in it)
        self.presplit = find_rank_split(dataset) is not None
        _import_worker_modules()
        self._epochs = _EpochCounter()
        self._iters = 0  # iterations started by this copy (a persistent worker's count)
        self._pending: dict | None = None
        self._live: _TorchIterator | None = None

    # ------------------------------------------------------------------ epochs
    def set_epoch(self, epoch: int) -> None:
        """Run epoch ``epoch`` at the next ``iter()`` (later ones follow from it).

        Args:
            epoch: a non-negative int (else ``ValueError``/``TypeError``); it seeds the
                pipeline's ``shuffle``/``global_shuffle`` stages.

        >>> from feedline import Dataset
        >>> tds = TorchIterableDataset(Dataset.range(4).shuffle(4, seed=0))
        >>> first = [int(x) for x in tds]; _ = [int(x) for x in tds]
        >>> tds.set_epoch(0); [int(x) for x in tds] == first
        True
        """
        self._epochs.set_next(non_negative_int("epoch", epoch))

    @property
    def epoch(self) -> int:
        """The epoch the next ``iter()`` runs."""
        return self._epochs.next()

    def _part(self) -> tuple[int, int]:
        from feedline.io.split import resolve_rank_world

        rank, world = resolve_rank_world(self.rank, self.world_size)
        info = torch.utils.data.get_worker_info()
        if self.presplit:  # split by rank already: split across workers only
            from feedline.dataset.shard import find_rank_split

            found = find_rank_split(self.dataset)
            assert found is not None  # self.presplit says so
            if world > 1 and found.rank_split[1] != world:
                raise ValueError(
                    f"the pipeline is already split into {found.rank_split[1]} parts by "
                    f"{found.name}, but this job has {world} ranks: remove that split/shard "
                    "(as_torch() splits by rank itself) or split by the job's world size"
                )
            rank, world = 0, 1
        if info is None:
            return rank, world
        return rank * info.num_workers + info.id, world * info.num_workers

    def __getstate__(self) -> dict:
        # Pickled into worker processes: fix the rank seen here, where torch.distributed
        # is initialised (a spawned worker does not inherit the process group).
        state = self.__dict__.copy()
        state["_live"] = None
        if self.rank is None or self.world_size is None:
            from feedline.io.split import resolve_rank_world

            state["rank"], state["world_size"] = resolve_rank_world(self.rank, self.world_size)
        return state

    # ------------------------------------------------------------------ iterating
    def __iter__(self) -> Iterator[Any]:
        part, parts = self._part()
        pending, self._pending = self._pending, None
        epoch: int | None = None
        units: list[dict[str, Any]] | None = None
        if pending is not None and pending.get("type") == "job":
            if self.presplit:
                raise StateError(
                    "a job state (job_state()) cannot resume a pipeline already split by rank "
                    "(a split/shard in it): its parts are tied to the saved world size; remove "
                    "that split/shard, or resume each rank from its own state"
                )
        elif pending is not None:
            if (pending["part"], pending["parts"]) != (part, parts):
                raise StateError(
                    f"state was taken in part {pending['part']} of {pending['parts']} "
                    f"(rank x DataLoader worker), this iteration is part {part} of {parts}: "
                    "resume with the same world size and num_workers, or combine the states "
                    "of every rank with job_state() to resume on another one"
                )
            epoch = pending["epoch"]
            units = pending["units"] if "units" in pending else [
                {"part": part, "parts": parts, "pipeline": pending["pipeline"]}]
        info = torch.utils.data.get_worker_info()
        in_worker = info is not None
        # the workers of one DataLoader iteration share its base seed (and, when
        # persistent, their count of iterations): the first to start claims the epoch
        key = None if info is None else (info.seed - info.id, self._iters)
        self._iters += 1
        epoch = self._epochs.claim(key, epoch)
        if pending is not None and pending.get("type") == "job" and epoch == pending["epoch"]:
            # the worker copies of a later DataLoader iteration still hold the job (the
            # main process's dataset keeps it): they claim a later epoch, read as usual
            units = [u for u in pending["units"] if u["part"] % parts == part]
        convert = _converter(self.convert, self.pin_memory and not in_worker)
        if units is None:
            units = [{"part": part, "parts": parts, "pipeline": None}]
        it = _TorchIterator(self._unit_pipeline, epoch, part, parts, units, convert)
        if self._live is not None and self._live is not it:
            self._live.close()
        self._live = it
        return it

    def _unit_pipeline(self, part: int, parts: int) -> Dataset:
        """The pipeline of part ``part`` of ``parts`` (this iteration's own part, or a part
        of the job a state was saved in)."""
        if self.presplit:
            return split_workers(self.dataset, part, parts)
        return split_pipeline(self.dataset, part, parts)

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        """The position to resume from (see the class docstring).

        >>> from feedline import Dataset
        >>> TorchIterableDataset(Dataset.range(3).batch(2)).state_dict()
        {'version': 1, 'epoch': 0, 'part': 0, 'parts': 1, 'pipeline': None}
        """
        if self._pending is not None:
            return dict(self._pending)
        if self._live is not None:
            return self._live.state()
        part, parts = self._part()
        return {"version": STATE_VERSION, "epoch": self._epochs.next(), "part": part, "parts": parts,
                "pipeline": None}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Make the next ``iter()`` continue from ``state`` (from :meth:`state_dict`).

        >>> from feedline import Dataset
        >>> tds = TorchIterableDataset(Dataset.range(3).batch(2))
        >>> tds.load_state_dict({"version": 1, "epoch": 4, "part": 0, "parts": 1,
        ...                      "pipeline": None})
        >>> [b for b in tds], tds.epoch  # epoch 4 from its start; the next one is 5
        ([[0, 1], [2]], 5)

        Args:
            state: a :meth:`state_dict`, to resume with the same world size and
                ``num_workers`` (another part raises
                :class:`~feedline.exceptions.StateError` at the next ``iter()``); or a
                job state (:func:`job_state`: the states of every rank and worker of a
                job, combined), on any world size and ``num_workers``: the next
                ``iter()`` runs the saved epoch and reads the remainder of the saved
                parts dealt to this one. A malformed state, or another ``version``,
                raises :class:`~feedline.exceptions.StateError`.
        """
        if isinstance(state, dict) and state.get("type") == "job":
            self._pending = _check_job(state)
            self._epochs.set_next(state["epoch"])
            return
        if not isinstance(state, dict) or not {"version", "epoch", "part", "parts",
                                                "pipeline"} <= set(state):
            raise StateError(f"not a TorchIterableDataset state: {state!r}")
        if state["version"] != STATE_VERSION:
            raise StateError(
                f"state version {state['version']} is not supported (expected {STATE_VERSION})"
            )
        non_negative_int("state['epoch']", state["epoch"])
        self._pending = dict(state)


class _EpochCounter:
    """The epoch number shared by a dataset and its DataLoader worker processes.

    ``claim(key, epoch)``: the epoch of an iteration. In the main process (``key`` is
    ``None``) every call is a new iteration; in workers, the calls with the same ``key``
    (one per worker) are one iteration and get the same number. ``epoch`` (from a
    loaded state) sets it; otherwise it is the next number. Shared memory inherited by
    forked or spawned workers; a copy pickled any other way is a plain counter.
    """

    def __init__(self, start: int = 0) -> None:
        self._lock = multiprocessing.Lock()
        # next epoch, whether a key was claimed, the last claimed key (2 ints), its epoch
        self._cells = multiprocessing.RawArray("q", [start, 0, 0, 0, 0])

    def __getstate__(self) -> dict:
        if multiprocessing.context.get_spawning_popen() is not None:
            return {"lock": self._lock, "cells": self._cells}  # shared with the new process
        return {"start": self.next()}  # a copy pickled elsewhere: a counter of its own

    def __setstate__(self, state: dict) -> None:
        if "start" in state:
            self.__init__(state["start"])  # type: ignore[misc]
        else:
            self._lock, self._cells = state["lock"], state["cells"]

    def next(self) -> int:
        with self._lock:
            return int(self._cells[0])

    def set_next(self, epoch: int) -> None:
        with self._lock:
            self._cells[0] = epoch
            self._cells[1] = 0

    def claim(self, key: tuple[int, int] | None, epoch: int | None) -> int:
        c = self._cells
        with self._lock:
            if key is not None and c[1] and (c[2], c[3]) == key:
                return int(c[4])  # another worker of this iteration claimed it
            if epoch is None:
                epoch = int(c[0])
            c[0] = epoch + 1
            if key is not None:
                c[1], c[2], c[3], c[4] = 1, key[0], key[1], epoch
            return epoch


class _TorchIterator:
    """One epoch of one part: reads its units — its own part, or the parts of a saved job
    dealt to it (:func:`job_state`) — one after the other; builds each unit's pipeline
    iterator at its first item. A unit is ``{"part", "parts", "pipeline"}``: the part's
    pipeline state (``None``: its start; after its end: its end state)."""

    def __init__(self, build: Callable[[int, int], Dataset], epoch: int, part: int, parts: int,
                 units: list[dict[str, Any]], convert: Callable[[Any], Any] | None) -> None:
        self._build = build
        self._epoch, self._part, self._parts = epoch, part, parts
        self._units = [dict(u) for u in units]
        self._takeover = not (len(units) == 1 and (units[0]["part"], units[0]["parts"])
                              == (part, parts))
        self._cur = 0  # the unit being read
        self._convert = convert
        self._it: Any = None
        self._done = False

    def __iter__(self) -> _TorchIterator:
        return self

    def __next__(self) -> Any:
        while not self._done:
            if self._it is None:
                if self._cur >= len(self._units):
                    self._done = True
                    break
                self._open(self._units[self._cur])
            try:
                item = next(self._it)
            except StopIteration:
                self._units[self._cur]["pipeline"] = self._it.get_state()["stages"]
                it, self._it = self._it, None
                it.close()
                self._cur += 1
                continue
            return item if self._convert is None else self._convert(item)
        raise StopIteration

    def _open(self, unit: dict[str, Any]) -> None:
        ds = self._build(unit["part"], unit["parts"])
        if unit["pipeline"] is None:
            self._it = ds.iterator(epoch=self._epoch)
        else:
            self._it = ds.iterator({"type": "pipeline", "version": PIPELINE_STATE_VERSION,
                                    "epoch": self._epoch, "stages": unit["pipeline"]})

    def state(self) -> dict[str, Any]:
        units = [dict(u) for u in self._units]
        if self._it is not None:
            units[self._cur]["pipeline"] = self._it.get_state()["stages"]
        state: dict[str, Any] = {"version": STATE_VERSION, "epoch": self._epoch,
                                 "part": self._part, "parts": self._parts, "pipeline": None}
        if self._takeover:
            state["units"] = units
        else:
            state["pipeline"] = units[0]["pipeline"]
        return state

    def close(self) -> None:
        self._done = True
        it, self._it = self._it, None
        if it is not None:
            it.close()

    def __del__(self) -> None:
        it = self.__dict__.get("_it")
        if it is not None:
            it.close()


_PART_KEYS = frozenset(("version", "epoch", "part", "parts", "pipeline"))


def _part_states(obj: Any) -> Iterator[dict[str, Any]]:
    """Every TorchIterableDataset state (and job state) inside ``obj``: a state itself,
    a ``StatefulDataLoader`` state, or lists and dicts of them."""
    if isinstance(obj, dict):
        if obj.get("type") == "job" or _PART_KEYS <= set(obj):
            yield obj
            return
        for value in obj.values():
            yield from _part_states(value)
    elif isinstance(obj, (list, tuple)):
        for value in obj:
            yield from _part_states(value)


def _check_job(state: dict[str, Any]) -> dict[str, Any]:
    """``state`` if it is a well-formed job state, else :class:`StateError`."""
    if state.get("version") != STATE_VERSION:
        raise StateError(
            f"state version {state.get('version')} is not supported (expected {STATE_VERSION})")
    units = state.get("units")
    parts = state.get("parts")
    if (not isinstance(units, list) or not isinstance(parts, int) or isinstance(parts, bool)
            or parts < 1 or sorted(u.get("part", -1) for u in units) != list(range(parts))
            or any(u.get("parts") != parts or "pipeline" not in u for u in units)):
        raise StateError(f"not a job state (see job_state()): {state!r}")
    non_negative_int("state['epoch']", state["epoch"])
    return dict(state)


def job_state(states: Any) -> dict[str, Any]:
    """One state for a whole job, from the states of all its ranks, that resumes the job
    on *any* world size and number of DataLoader workers, exactly once.

    The result is JSON-able: ``{"version", "type": "job", "epoch", "parts", "units"}``,
    one unit ``{"part", "parts", "pipeline"}`` per saved part. Give it to
    :meth:`TorchIterableDataset.load_state_dict` on every rank of the new job (before
    making its DataLoader, not to ``StatefulDataLoader.load_state_dict``): the next
    iteration runs the saved epoch, and part ``p`` of the new job's ``P`` parts
    resumes the saved parts ``p, p + P, p + 2P, ...`` one after the other from their
    states — the remainder of each saved part is read by exactly one new part, so with
    what was consumed before the save, every record is read exactly once in that epoch
    (the saved parts are pipelines of their own: a ``shuffle`` keeps each part's order).
    The epochs after it are split by the new world size as usual. A state taken during
    such an epoch holds its units and can be combined again.

    Raises :class:`~feedline.exceptions.StateError` when the resume could not be exact:
    states of different epochs (save on every rank at the same step), a part missing or
    two states of the same part (for a pipeline already split by rank before
    ``as_torch()`` — a ``split``/``shard`` in it — every rank's parts have the same
    numbers: resume such a job on its saved world size, each rank from its own state),
    or a job state given to such a pipeline.

    Args:
        states: the states taken at the same step on every rank — each rank's
            ``StatefulDataLoader.state_dict()`` (it holds one
            :meth:`TorchIterableDataset.state_dict` per DataLoader worker), or those
            dataset states themselves — in a list, in any order (gather them with
            ``torch.distributed.all_gather_object`` or save one file per rank). Together
            they must hold every part of the saved job (rank ``r``'s worker ``w`` reads
            part ``r * W + w`` of ``R * W``) once; each part's state records what that
            part has consumed (the position of its pipeline).

    >>> from feedline import Dataset
    >>> ds = Dataset.range(12).filter(lambda x: True)
    >>> old = [TorchIterableDataset(ds, rank=r, world_size=4) for r in range(4)]
    >>> its = [iter(t) for t in old]
    >>> consumed = [int(next(it)) for it in its]        # one item on each of 4 ranks
    >>> job = job_state([t.state_dict() for t in old])
    >>> new = [TorchIterableDataset(ds, rank=r, world_size=2) for r in range(2)]
    >>> for t in new: t.load_state_dict(job)
    >>> rest = [[int(x) for x in t] for t in new]      # saved parts 0, 2 and 1, 3
    >>> consumed, rest
    ([0, 1, 2, 3], [[4, 8, 6, 10], [5, 9, 7, 11]])
    >>> [[int(x) for x in t] for t in new]             # the next epoch: split by 2
    [[0, 2, 4, 6, 8, 10], [1, 3, 5, 7, 9, 11]]
    """
    found = list(_part_states(states))
    if not found:
        raise StateError("job_state() found no TorchIterableDataset state in `states`")
    epochs = sorted({s.get("epoch") for s in found}, key=repr)
    if len(epochs) != 1:
        raise StateError(
            f"the states are from different epochs {epochs}: save the state of every rank "
            "at the same step"
        )
    units: dict[int, dict[str, Any]] = {}
    counts: set[int] = set()
    jobs: list[dict[str, Any]] = []  # a job state loaded and not yet iterated, once
    for s in found:
        if s.get("type") == "job":
            if s in jobs:
                continue
            jobs.append(s)
        if s.get("version") != STATE_VERSION:
            raise StateError(
                f"state version {s.get('version')} is not supported (expected {STATE_VERSION})")
        got = s["units"] if "units" in s else [
            {"part": s["part"], "parts": s["parts"], "pipeline": s["pipeline"]}]
        for unit in got:
            counts.add(unit["parts"])
            if unit["part"] in units:
                raise StateError(
                    f"two states of part {unit['part']} of {unit['parts']}: pass each rank's "
                    "state once; a pipeline split by rank before as_torch() (a split/shard "
                    "in it) cannot be resumed on another world size"
                )
            units[unit["part"]] = unit
    if len(counts) != 1:
        raise StateError(f"the states are of jobs split into different numbers of parts "
                         f"{sorted(counts)}: pass the states of one job")
    parts = counts.pop()
    missing = sorted(set(range(parts)) - set(units))
    if missing:
        raise StateError(
            f"parts {missing} of {parts} are missing: pass the state of every rank (each "
            "holds its DataLoader workers' parts)"
        )
    return _check_job({"version": STATE_VERSION, "type": "job", "epoch": epochs[0],
                       "parts": parts, "units": [units[k] for k in sorted(units)]})


def as_torch(dataset: Dataset, *, convert: bool = True, pin_memory: bool = False,
             rank: int | None = None, world_size: int | None = None
             ) -> TorchMapDataset | TorchIterableDataset:
    """``dataset`` as a ``torch.utils.data`` dataset: map-style when it is random access
    (and not already split by rank), else iterable; see the module docstring.

    Args:
        dataset: the pipeline.
        convert: turn numpy arrays (also inside dicts, lists and tuples) into tensors
            (:func:`feedline.pytorch.convert.to_torch`); ``False`` hands items over as
            they are.
        pin_memory: pin the tensors when iterated in the main process (with worker
            processes, pass ``pin_memory=True`` to the DataLoader instead).
        rank: this rank (iterable form only; default: ``torch.distributed``'s, else
            ``RANK``). A map-style dataset is split by the DataLoader's sampler.
        world_size: the number of ranks (iterable form only; default as for ``rank``).

    >>> from feedline import Dataset
    >>> type(as_torch(Dataset.range(3))).__name__, type(as_torch(Dataset.range(3).batch(2))).__name__
    ('TorchMapDataset', 'TorchIterableDataset')
    >>> type(as_torch(Dataset.range(3).shard(0, 2))).__name__     # split by rank already
    'TorchIterableDataset'
    """
    from feedline.dataset.shard import find_rank_split

    if isinstance(dataset, RandomAccessDataset) and find_rank_split(dataset) is None:
        if rank is not None or world_size is not None:
            raise ValueError(
                "`rank`/`world_size` apply to stream pipelines; split a random-access "
                "pipeline with the DataLoader's sampler (DistributedSampler)"
            )
        return TorchMapDataset(dataset, convert=convert, pin_memory=pin_memory)
    return TorchIterableDataset(dataset, convert=convert, pin_memory=pin_memory, rank=rank,
                                world_size=world_size)
