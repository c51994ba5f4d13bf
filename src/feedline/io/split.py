"""``feedline.split``: this rank's (and this worker's) part of a dataset or of record files.

Two levels: ``world_size`` ranks, and optionally ``num_workers`` workers inside each rank;
worker ``w`` of rank ``r`` reads part ``r * num_workers + w`` of
``world_size * num_workers``. Every record is read exactly once per epoch across all
ranks and workers.

* ``split(dataset, ...)`` shards a :class:`Dataset` (see :mod:`feedline.dataset.shard`:
  index mode with ``policy="pad" | "drop_remainder" | "none"`` for random-access datasets,
  every n-th item for streams);
* ``split(paths, ..., mode="index")`` reads indexed record files (TFRecord with a
  sidecar index, RecordIO with ``.idx``, WebDataset ``.tar`` shards — ``format="tar"``
  or every name ending in ``.tar`` — with their sample index, built if missing) as one
  random-access dataset and shards it: exact, equal counts per rank;
* ``split(paths, ..., mode="bytes")`` is MXNet's InputSplit: the files form one byte
  range cut into equal parts, each starting at the next record boundary (see
  :mod:`feedline.io.input_split`); counts per part may differ. Paths may be fsspec
  URLs (``storage_options``); each part then reads its byte range with ranged GETs.
  The result is a :class:`ByteRangeSplit`: a consumer that splits across DataLoader
  workers (``as_torch()``) divides it into byte ranges again, part ``r * W + w`` of
  ``world_size * W`` (MXNet's rule), instead of reading every ``W``-th record.

Every result is marked as split by rank (its ``rank_split``; see
:func:`feedline.dataset.shard.find_rank_split`): ``as_torch()``, the Lightning
DataModule and the Runner's DataProvider then split it only across DataLoader
workers, never by rank a second time. Parts of a stream (byte ranges, every ``n``-th
item) may differ in length: those consumers join the ranks at every step (see
:mod:`feedline.pytorch.rank_join`).

``rank`` and ``world_size`` default to ``torch.distributed``'s when it is initialised,
else to the ``RANK`` and ``WORLD_SIZE`` environment variables, else to 0 and 1. A
byte-range part left to these defaults looks them up when it is read (and when it is
pickled inside a process group, into a DataLoader worker), not when it is made: a
pipeline built before the process group exists (Lightning's ``Trainer.fit`` or a
``RunnerBuilder(device_count=2)`` runner starts it) still reads the right part.

>>> ds = Dataset.range(10)
>>> parts = [split(ds, r, 2, worker=w, num_workers=2).to_list() for r in range(2) for w in range(2)]
>>> parts
[[0, 4, 8], [1, 5, 9], [2, 6, 0], [3, 7, 1]]
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import Any

from feedline._internal.validate import non_negative_int, one_of, positive_int
from feedline.dataset.base import BuildContext, Dataset
from feedline.dataset.iterator import DatasetIterator

__all__ = ["split", "resolve_rank_world", "ByteRangeSplit"]


def _env_int(name: str) -> int | None:
    value = os.environ.get(name)
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"environment variable {name} must be an int, got {value!r}") from None


def _in_process_group() -> bool:
    torch = sys.modules.get("torch")
    dist = getattr(torch, "distributed", None) if torch is not None else None
    return bool(dist is not None and dist.is_available() and dist.is_initialized())


def resolve_rank_world(rank: int | None, world_size: int | None) -> tuple[int, int]:
    """``(rank, world_size)``: the arguments, else torch.distributed, else env, else (0, 1).

    Args:
        rank: this rank, in ``0 .. world_size - 1`` (else ``ValueError``); ``None``:
            torch.distributed's rank when a process group is initialised, else the
            ``RANK`` environment variable, else 0.
        world_size: the number of ranks, a positive int; ``None``: torch.distributed's,
            else ``WORLD_SIZE``, else 1.

    >>> resolve_rank_world(1, 4)
    (1, 4)
    """
    if rank is None or world_size is None:
        dist_rank = dist_world = None
        if _in_process_group():
            dist = sys.modules["torch"].distributed
            dist_rank, dist_world = dist.get_rank(), dist.get_world_size()
        if dist_rank is None:
            dist_rank, dist_world = _env_int("RANK"), _env_int("WORLD_SIZE")
        if rank is None:
            rank = dist_rank if dist_rank is not None else 0
        if world_size is None:
            world_size = dist_world if dist_world is not None else 1
    positive_int("world_size", world_size)
    non_negative_int("rank", rank)
    if rank >= world_size:
        raise ValueError(f"`rank` must be below world_size={world_size}, got {rank}")
    return rank, world_size


def split(
    source: Dataset | str | os.PathLike | Iterable[str | os.PathLike],
    rank: int | None = None,
    world_size: int | None = None,
    *,
    worker: int = 0,
    num_workers: int = 1,
    mode: str = "index",
    policy: str = "pad",
    format: str = "auto",
    storage_options: dict | None = None,
) -> Dataset[Any]:
    """This rank's and worker's part of ``source``; see the module docstring.

    Args:
        source: a :class:`Dataset` (sharded with :meth:`Dataset.shard`), or record files:
            a path, glob, directory or fsspec URL, or a list of them.
        rank: this rank; ``None`` looks it up as :func:`resolve_rank_world` does.
        world_size: the number of ranks; ``None`` looks it up as :func:`resolve_rank_world`
            does.
        worker: this worker inside the rank, in ``0 .. num_workers - 1`` (else
            ``ValueError``).
        num_workers: workers per rank, a positive int; worker ``w`` of rank ``r`` reads
            part ``r * num_workers + w`` of ``world_size * num_workers``.
        mode: for files only: ``"index"`` (the default) reads indexed record files as one
            random-access dataset with equal counts per part; ``"bytes"`` gives a
            :class:`ByteRangeSplit` (MXNet's InputSplit). Another value raises
            ``ValueError``.
        policy: how the parts of a random-access dataset (or of files in index mode)
            are evened out: ``"pad"`` (the default), ``"drop_remainder"`` or ``"none"``,
            as in :meth:`Dataset.shard`.
        format: for files only. ``"auto"`` (the default): in bytes mode ``"text"`` when
            every name ends in ``.txt`` or ``.csv``, else ``"recordio"``; in index mode
            WebDataset shards when every name ends in ``.tar``, else each file's format
            found from its content. Else it names the format: ``"recordio"`` or
            ``"text"`` in bytes mode; ``"tar"``, ``"recordio"`` or ``"tfrecord"`` in index
            mode.
        storage_options: options for fsspec when the paths are URLs.

    >>> [split(Dataset.range(5), rank, 2).to_list() for rank in range(2)]
    [[0, 2, 4], [1, 3, 0]]
    >>> [split(Dataset.range(5), rank, 2, policy="drop_remainder").to_list() for rank in range(2)]
    [[0, 2], [1, 3]]
    """
    given = (rank, world_size)
    rank, world_size = resolve_rank_world(rank, world_size)
    positive_int("num_workers", num_workers)
    non_negative_int("worker", worker)
    if worker >= num_workers:
        raise ValueError(f"`worker` must be below num_workers={num_workers}, got {worker}")
    one_of("mode", mode, ("index", "bytes"))
    part, parts = rank * num_workers + worker, world_size * num_workers
    if isinstance(source, Dataset):
        return source.shard(part, parts, policy=policy)
    from feedline.storage.fs import expand

    paths = expand(source, storage_options=storage_options)
    if mode == "bytes":
        if format == "auto":
            format = "text" if all(p.endswith((".txt", ".csv")) for p in paths) else "recordio"
        return ByteRangeSplit(paths, *given, worker=worker, num_workers=num_workers,
                              format=format, storage_options=storage_options)
    if format == "tar" or (format == "auto" and all(p.endswith(".tar") for p in paths)):
        from feedline.formats.webdataset.index import IndexedTarShards

        return IndexedTarShards(paths, storage_options=storage_options).shard(
            part, parts, policy=policy)
    from feedline.io.records import indexed_records

    return indexed_records(paths, format=format).shard(part, parts, policy=policy)


class ByteRangeSplit(Dataset):
    """Rank ``rank``'s (and worker ``worker``'s) byte range of record files: the records of
    :class:`~feedline.io.input_split.InputSplit` part ``rank * num_workers + worker`` of
    ``world_size * num_workers``, a stream with the InputSplit's state. ``rank`` and
    ``world_size`` left ``None`` are looked up (:func:`resolve_rank_world`) whenever the
    part is read or pickled, so the part follows the process group it is read in.

    Args:
        paths: the record files, in byte-range order (local paths or fsspec URLs).
        rank: this rank; ``None`` is looked up whenever the part is read.
        world_size: the number of ranks; ``None`` is looked up whenever the part is read.
        worker: this worker inside the rank, below ``num_workers``.
        num_workers: workers per rank (the part is ``rank * num_workers + worker`` of
            ``world_size * num_workers``).
        format: ``"recordio"`` (the default) or ``"text"``, as for
            :class:`~feedline.io.input_split.InputSplit`, which checks the files and the
            part when this is made.
        storage_options: options for fsspec when the paths are URLs.

    >>> import os, tempfile
    >>> from feedline import recordio
    >>> path = os.path.join(tempfile.mkdtemp(), "d.rec")
    >>> with recordio.RecordIOWriter(path) as w:
    ...     _ = [w.write(bytes([i]) * 50) for i in range(10)]
    >>> part = ByteRangeSplit([path], 1, 2)
    >>> part.name, part.rank_split, [r[0] for r in part.to_list()]
    ('input_split(1/2)', (1, 2), [5, 6, 7, 8, 9])
    >>> [[r[0] for r in part.for_worker(w, 2).to_list()] for w in range(2)]
    [[6, 7], [8, 9]]
    >>> ByteRangeSplit([path]).rank_split     # no process group, no RANK: (0, 1)
    (0, 1)
    """

    def __init__(self, paths: list[str], rank: int | None = None, world_size: int | None = None,
                 *, worker: int = 0, num_workers: int = 1, format: str = "recordio",
                 storage_options: dict | None = None) -> None:
        super().__init__()
        self.paths = list(paths)
        self._given = (rank, world_size)
        self.worker, self.num_workers = worker, num_workers
        self.format, self.storage_options = format, storage_options
        self._split: Any = None
        self.input_split  # check the files and the part now  # noqa: B018

    @property
    def rank_split(self) -> tuple[int, int]:
        """``(rank, world_size)``: this source splits by rank."""
        return resolve_rank_world(*self._given)

    @property
    def input_split(self) -> Any:
        """The :class:`~feedline.io.input_split.InputSplit` of this part (for the current
        rank when it is looked up)."""
        from feedline.io.input_split import InputSplit

        rank, world = self.rank_split
        part, parts = rank * self.num_workers + self.worker, world * self.num_workers
        s = self._split
        if s is None or (s.part_index, s.num_parts) != (part, parts):
            s = self._split = InputSplit(self.paths, part, parts, format=self.format,
                                         storage_options=self.storage_options)
        return s

    @property
    def name(self) -> str:
        rank, world = self.rank_split
        return (f"input_split({rank * self.num_workers + self.worker}/"
                f"{world * self.num_workers})")

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        if _in_process_group():  # into a DataLoader worker: the group's rank, fixed here
            state["_given"] = self.rank_split
        return state

    def for_worker(self, worker: int, num_workers: int) -> ByteRangeSplit:
        """The same rank's part divided among ``num_workers`` workers: worker ``worker``'s
        byte range (see the class docstring).

        Args:
            worker: the worker, in ``0 .. num_workers - 1``.
            num_workers: how many workers divide this rank's part; a part already divided
                among workers raises ``ValueError``.
        """
        if self.num_workers != 1:
            raise ValueError(
                f"{self.name} is already divided among {self.num_workers} workers"
            )
        return ByteRangeSplit(self.paths, *self.rank_split, worker=worker,
                              num_workers=num_workers, format=self.format,
                              storage_options=self.storage_options)

    def _make_iterator(self, ctx: BuildContext) -> DatasetIterator:
        return self.input_split.iterator()
