"""``DataProvider``: read the next batch, feed it, and remember where the pass is.

The data is a :class:`~feedline.Dataset` or a PaddlePaddle reader (a function returning
an iterable). With ``batch_size`` it yields *samples* (tuples of columns) and is batched
here; without it (and without a ``batch_size`` on the network) it yields *batches*
(lists of samples), as the reader given to PaddlePaddle v2's ``train`` does.

Each batch is converted by the network's :class:`~feedline.feeder.DataFeeder` (built
from ``context.network.inputs`` and the ``feeding`` map, so a map that does not fit the
inputs fails before the first pass, naming the input) as a pipeline stage, then moved to
``context.device`` with :func:`feedline.pytorch.convert.to_torch`. Per batch it sets
``context.batch`` (the samples as read), ``context.inputs`` (``{name: tensor}``) and
``context.batch_size``; it sets ``context.batches_per_pass`` when it can tell (random
access data, or after one full pass).

``on_batch_begin`` returns True ("no more data") when the pass's iterator is exhausted.
Every pass is a new iteration of the dataset, i.e. a new epoch for seeded shuffles: the
``k``-th pass of a runner reads epoch ``k`` (counted by this item and checkpointed, so a
job resumed in a new process goes on with the right epoch).

**Feeding ahead** (``prefetch=N``): a background thread reads and converts up to ``N``
batches ahead of the training step. When the data (after batching here, if it does)
ends in its own ``.prefetch(M)`` stage, that thread takes the stage's place, reading up
to ``N + M`` batches ahead (what the two queues held together): one thread instead of
two handing every batch over, with the same items and states (a prefetch stage's state
is its input's); the statistics report then has no row for that stage. When the data
ends in ``.prefetch(M, process=True)`` instead, the batches are converted to the
network's inputs in that background process too, so the training process only
receives them (see :mod:`feedline.dataset.process_prefetch`).

With ``prefetch_next_pass`` (the default) the thread does not stop at the end of a
pass's data: it starts the next epoch right away, so the next pass's first batches are
read (the pipeline's start-up — filling shuffle buffers, workers' first chunks —
included) while the last batches of this pass train. That is the data the next pass
reads anyway, so checkpoints, resumption and seeded orders are unchanged: between
passes the checkpoint entry still holds no position (the next pass starts its epoch
from the beginning); a pass that ends before its data does (an item returned "no more
data" early) stops the thread as before; restoring a checkpoint, ``finalize``, or a pass
that is not the next epoch discards what was read ahead. After a runner's last pass
the thread holds up to its depth of the next epoch's batches (and that epoch's
pipeline, worker processes included) until ``finalize``. The next epoch's iteration
begins (a reader function is called) before the pass-end items run: pass
``prefetch_next_pass=False`` when the data must see what they do (e.g. an event handler
that changes the file list at ``EndPass``). Testers
(:class:`~feedline.train.items.TestOnPassEnd`, test runners) do not read ahead into
their next pass.

**Data parallel**: when ``context.world_size > 1`` and ``shard`` is true, each rank
reads its own part of the data, split exactly once:

* data already split by rank (a :func:`feedline.split` part, a ``shard``: see
  :func:`~feedline.dataset.shard.find_rank_split`) is read as it is — split into as many
  parts as the job has ranks, else a ``ValueError`` says what to remove — and joined
  (below), since such parts may differ in length;
* a random-access dataset is split before batching by
  :func:`~feedline.train.distributed.split_dataset` (``split_mode``, ``remainder``):
  every rank runs the same number of batches;
* a stream (a reader, a data provider's file list, a ``flat_map``) is split as close to
  its source as possible (:func:`feedline.pytorch.dataset.split_pipeline`): files by
  rank, or — with fewer files than ranks — every ``world_size``-th record of the
  files.

The parts of a stream may differ in length, so the ranks agree at every batch whether
they all still have one (one small all-reduce, :class:`feedline.pytorch.rank_join.RankJoin`)
and end the pass together: with ``remainder="pad"`` a rank whose part has ended repeats
its last batch, with ``context.padding`` true for that batch (false for the others);
with ``"drop"`` every rank stops at the first batch some rank lacks, and the batches the
others still had are read and dropped; ``"keep"`` (testers) does not join. ``rank_join.stats()``
counts the steps and the padded or dropped batches and samples of the last pass.

**Checkpoint entry** ``"data"``: the epoch of the next pass, and the pipeline's iterator
state in the middle of a pass (``None`` between passes); restoring it makes the next pass continue exactly after the
last batch that was read. A data source that cannot report its position (a plain reader)
raises :class:`~feedline.exceptions.StateNotSupportedError` when a mid-pass checkpoint
is taken.

>>> import numpy as np, torch
>>> from feedline import Dataset, data_type
>>> from feedline.train import Runner, SGD, network
>>> from feedline.train.items import *
>>> x = np.eye(4, dtype=np.float32)[[0, 1, 2, 3] * 4]; y = np.array([0, 1, 0, 1] * 4)
>>> net = network(inputs={"x": data_type.dense_vector(4), "label": data_type.integer_value(2)},
...               learning_rate=0.5, learning_method=SGD(), batch_size=4)(torch.nn.Linear(4, 2))
>>> data = Dataset.from_arrays(x, y)
>>> runner = Runner([CreateModel(net), DataProvider(data, batch_size=8)])
>>> with runner:
...     runner.context.batches_per_pass
...     runner.run_one_pass()
...     {k: tuple(v.shape) for k, v in runner.context.inputs.items()}
2
2
{'x': (8, 4), 'label': (8,)}
"""

from __future__ import annotations

import math
from typing import Any

from feedline._internal.validate import (
    check_bool,
    non_negative_int,
    one_of,
    optional_positive_int,
)
from feedline.dataset.base import Dataset, RandomAccessDataset
from feedline.dataset.iterator import DatasetIterator
from feedline.dataset.prefetch import PrefetchDataset
from feedline.dataset.process_prefetch import ProcessPrefetchDataset
from feedline.dataset.shard import find_rank_split
from feedline.exceptions import CheckpointError, FeedError
from feedline.pytorch.rank_join import END, RankJoin
from feedline.train.distributed import split_dataset
from feedline.train.runner import RunnerContext, RunnerItem

__all__ = ["DataProvider", "ProviderSettings", "as_dataset", "provider_dataset"]


class ProviderSettings:
    """The ``settings`` object a data provider function receives (PaddlePaddle's
    PyDataProvider2 ``settings``): ``input_types``, ``is_train``, ``logger`` (this
    module's logger), plus the keyword arguments of ``@net.provider(...)`` as
    attributes.

    Args:
        input_types: ``{name: type}`` of the network's inputs, or ``None``.
        is_train: true for training data, false for test data (stored as a bool).
        **kwargs: further attributes (``@net.provider(...)``'s keyword arguments).

    >>> ProviderSettings(is_train=False, dictionary={"a": 0}).dictionary
    {'a': 0}
    """

    def __init__(self, *, input_types: Any = None, is_train: bool = True, **kwargs: Any) -> None:
        import logging

        self.input_types = input_types
        self.is_train = bool(is_train)
        self.logger = logging.getLogger(__name__)
        for key, value in kwargs.items():
            setattr(self, key, value)

    def __repr__(self) -> str:
        return f"ProviderSettings(is_train={self.is_train})"


class _ApplyProvider:
    """flat_map stage: a file name -> the samples ``method`` yields for it."""

    def __init__(self, method: Any, settings: ProviderSettings) -> None:
        self.method = method
        self.settings = settings
        self.takes_settings = _takes_settings(method)
        self.__name__ = getattr(method, "__name__", "provider")

    def __call__(self, filename: Any) -> Any:
        if self.takes_settings:
            return self.method(self.settings, filename)
        return self.method(filename)


def _takes_settings(method: Any) -> bool:
    import inspect

    try:
        params = list(inspect.signature(method).parameters.values())
    except (TypeError, ValueError):
        return True
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if any(p.kind is p.VAR_POSITIONAL for p in params) or len(positional) >= 2:
        return True
    if len(positional) == 1:
        return False
    raise TypeError(
        f"a data provider function takes (settings, filename) or (filename), got "
        f"{getattr(method, '__name__', method)!r} taking none"
    )


def provider_dataset(method: Any, file_list: Any, *, input_types: Any = None,
                     is_train: bool = True) -> Dataset:
    """The samples of a PaddlePaddle data provider: ``method`` applied to each file of
    ``file_list`` in order, as a :class:`~feedline.Dataset` (resumable: a restored
    iterator re-opens the current file and skips the samples already read).

    Args:
        method: ``method(settings, filename)`` (or ``method(filename)``, when it takes
            one positional parameter) yields samples: dicts keyed by input name, or
            tuples in the network's input order. ``settings`` is a
            :class:`ProviderSettings` with ``input_types``, ``is_train`` and the keyword
            arguments of ``@net.provider(...)``. A non-callable raises ``TypeError``.
        file_list: the file names, read in this order (non-str names are converted
            with ``str``); not a str. An empty list raises ``ValueError``, a
            non-iterable ``TypeError``.
        input_types: ``settings.input_types``: ``{name: type}`` of the network, or
            ``None``.
        is_train: ``settings.is_train``.

    >>> def process(settings, filename):
    ...     for i in range(2):
    ...         yield {"x": f"{filename}:{i}", "train": settings.is_train}
    >>> provider_dataset(process, ["a", "b"]).to_list()[1:3]
    [{'x': 'a:1', 'train': True}, {'x': 'b:0', 'train': True}]
    """
    if not callable(method):
        raise TypeError(f"`method` must be a data provider function, got {method!r}")
    if isinstance(file_list, (str, bytes)) or not hasattr(file_list, "__iter__"):
        raise TypeError(f"`file_list` must be a list of file names, got {file_list!r}")
    files = [str(f) if not isinstance(f, str) else f for f in file_list]
    if not files:
        raise ValueError("`file_list` must name at least one file, got none")
    settings = ProviderSettings(input_types=input_types, is_train=is_train,
                                **getattr(method, "provider_settings", {}))
    return Dataset.from_iterable(files).flat_map(_ApplyProvider(method, settings))


def as_dataset(data: Any) -> Dataset:
    """``data`` as a :class:`Dataset`: itself, or a stream over a reader's calls.

    Args:
        data: a :class:`~feedline.Dataset` (returned as it is) or a reader, a function
            returning an iterable (called once per epoch); anything else raises
            ``TypeError``.

    >>> from feedline import Dataset
    >>> ds = Dataset.range(3)
    >>> as_dataset(ds) is ds, as_dataset(lambda: iter("ab")).to_list()
    (True, ['a', 'b'])
    """
    if isinstance(data, Dataset):
        return data
    if callable(data):
        return Dataset.from_reader(data)
    raise TypeError(
        f"training data must be a feedline Dataset or a reader (a function returning an "
        f"iterable), got {type(data).__name__}"
    )


class _PassEnd:
    """What the feeding thread yields when a pass's data ends: the pass's statistics
    report (or ``None``) and the epoch it reads next (``None``: it stopped)."""

    __slots__ = ("stats", "next_epoch")

    def __init__(self, stats: Any, next_epoch: int | None) -> None:
        self.stats = stats
        self.next_epoch = next_epoch


class _Passes(DatasetIterator):
    """The items of ``first`` (a pipeline iterator), then a :class:`_PassEnd`, then — with
    ``next_pass`` — the items of the pipeline's next epoch, another ``_PassEnd``, and so
    on; without it, ``StopIteration`` after the first ``_PassEnd``. ``get_state()`` is
    the current epoch's iterator state, ``None`` between epochs. Run by a
    :class:`~feedline.runtime.threads.BackgroundIterator`, so the next epoch's start-up
    overlaps the end of the current pass."""

    def __init__(self, pipeline: Dataset, first: Any, *, stats: bool, next_pass: bool) -> None:
        self._pipeline = pipeline
        self._it: Any = first
        self._stats = stats
        self._next_pass = next_pass
        self._next_epoch: int | None = None

    def __next__(self) -> Any:
        it = self._it
        if it is None:
            if self._next_epoch is None:
                raise StopIteration
            it = self._it = self._pipeline.iterator(epoch=self._next_epoch,
                                                    stats=True if self._stats else None)
        try:
            return next(it)
        except StopIteration:
            pass
        self._it = None
        report = it.stats() if self._stats else None
        it.close()
        self._next_epoch = it.epoch + 1 if self._next_pass else None
        return _PassEnd(report, self._next_epoch)

    def get_state(self) -> Any:
        it = self._it
        return None if it is None else it.get_state()

    def stats(self) -> Any:
        """The current epoch's statistics report (``None`` between epochs)."""
        it = self._it
        return None if it is None else it.stats()

    def set_state(self, state: Any) -> None:  # pragma: no cover - never restored in place
        raise NotImplementedError("a _Passes source starts from a pipeline iterator")

    def close(self) -> None:
        it, self._it = self._it, None
        self._next_epoch = None
        if it is not None:
            it.close()


class _Feed:
    """Pipeline stage: batch -> (batch, fed numpy values). Pickles with its feeder."""

    def __init__(self, feeder: Any, batched_here: bool) -> None:
        self.feeder = feeder
        self.batched_here = batched_here

    def __call__(self, batch: Any) -> tuple[Any, dict]:
        if not self.batched_here and isinstance(batch, (tuple, dict)):
            raise FeedError(
                f"the data yields a {type(batch).__name__} where a batch (a list of samples) "
                "was expected: it looks like one sample; give `batch_size` to batch the samples "
                "(or batch the reader, e.g. feedline.batch(reader, 32))"
            )
        return batch, self.feeder(batch)


def _batch_samples(item: Any) -> int:
    """Samples in a fed item ``(batch, values)``."""
    return len(item[0])


class DataProvider(RunnerItem):
    """Feeds the batches of ``data``; see the module docstring.

    Args:
        data: a :class:`~feedline.Dataset` or a reader (a function returning an
            iterable); anything else raises ``TypeError``.
        feeding: the feeding map (see :meth:`~feedline.train.Network.data_feeder`;
            ``None``: declaration order); checked against the network's inputs in
            ``initialize``.
        batch_size: batch the samples of ``data``; a positive int (default:
            ``network.batch_size``; ``None`` on both: ``data`` yields batches).
        drop_last: drop a last smaller batch of each pass.
        prefetch: convert up to this many batches ahead in a background thread; a
            non-negative int (0: in the training thread).
        shard: under data parallel, read only this rank's part of the data (see "Data
            parallel" above); ``False``: every rank reads ``data`` as it is.
        split_mode: how a random-access dataset is split across ranks: ``"strided"``
            or ``"contiguous"`` (see :func:`~feedline.train.distributed.split_dataset`).
        remainder: what evens out the ranks' parts: ``"pad"``, ``"drop"`` or
            ``"keep"`` (testers: no join; see "Data parallel" above).
        sequence: what a sequence input becomes: ``"padded"``, ``"packed"`` or
            ``"flat"`` (see :func:`~feedline.pytorch.convert.to_torch`).
        non_blocking: copy the batches to the device asynchronously.
        sparse_layout: the layout of sparse inputs' tensors, ``"csr"`` or ``"csc"``.
        stats: time every pipeline stage (``dataset.iterator(stats=True)``); after each
            pass ``last_stats`` holds its :class:`~feedline.runtime.stats.StatsReport`.
        state_key: the checkpoint entry name (testers use ``None``: they always start a
            pass from the beginning).
        prefetch_next_pass: let the ``prefetch`` thread go on into the next pass's first
            batches when a pass's data ends (see "Feeding ahead" above; no effect
            without ``prefetch``); a bool.

    An option outside its listed values raises ``ValueError`` (a wrong type
    ``TypeError``) here, before any data is read.

    >>> import numpy as np, torch
    >>> from feedline import Dataset, data_type
    >>> from feedline.train import Runner, SGD, network
    >>> from feedline.train.items import *
    >>> net = network(inputs={"x": data_type.dense_vector(2), "label": data_type.integer_value(2)},
    ...               learning_rate=0.1, learning_method=SGD(), batch_size=2)(torch.nn.Linear(2, 2))
    >>> data = Dataset.from_arrays(np.eye(2, dtype=np.float32)[[0, 1, 0, 1]], np.array([0, 1, 0, 1]))
    >>> def trainer(*extra):        # 4 samples, 2 batches per pass
    ...     return Runner([CreateModel(net, seed=0), LocalUpdater(), Counter(), DataProvider(data),
    ...                    *extra, TrainOps()])
    >>> with trainer() as runner:
    ...     _ = runner.run(1)
    ...     batch = runner.context.inputs
    >>> runner.context.batches_per_pass, sorted(batch), batch["x"].shape
    (2, ['label', 'x'], torch.Size([2, 2]))
    """

    state_key: str | None = "data"

    def __init__(
        self,
        data: Any,
        *,
        feeding: Any = None,
        batch_size: int | None = None,
        drop_last: bool = False,
        prefetch: int = 0,
        shard: bool = True,
        split_mode: str = "strided",
        remainder: str = "pad",
        sequence: str = "padded",
        non_blocking: bool = False,
        sparse_layout: str = "csr",
        stats: bool = False,
        state_key: str | None = "data",
        prefetch_next_pass: bool = True,
    ) -> None:
        self.data = as_dataset(data)
        self.feeding = feeding
        self.batch_size = optional_positive_int("batch_size", batch_size)
        self.drop_last = bool(drop_last)
        self.prefetch = non_negative_int("prefetch", prefetch)
        self.prefetch_next_pass = check_bool("prefetch_next_pass", prefetch_next_pass)
        self.shard = bool(shard)
        self.split_mode = one_of("split_mode", split_mode, ("strided", "contiguous"))
        self.remainder = one_of("remainder", remainder, ("pad", "drop", "keep"))
        self.sequence = one_of("sequence", sequence, ("padded", "packed", "flat"))
        self.non_blocking = bool(non_blocking)
        self.sparse_layout = one_of("sparse_layout", sparse_layout, ("csr", "csc"))
        self._convert: Any = None  # to_torch with these options, built on first use
        self._process: ProcessPrefetchDataset | None = None  # its own stage (see initialize)
        self._depth = self.prefetch  # the feeding thread's depth (see initialize)
        self.stats = bool(stats)
        self.last_stats: Any = None
        self.state_key = state_key
        self.pipeline: Dataset | None = None
        self._it: Any = None
        self._reader: Any = None  # the feeding thread (BackgroundIterator over _Passes)
        self._passes: _Passes | None = None  # its source
        self._reader_epoch: int | None = None  # the epoch it reads next, between passes
        self._pass_end: _PassEnd | None = None  # set when this pass's data ended
        self._pending: dict | None = None
        self._count = 0
        self._resumed = False
        self._epoch = 0
        self._data_ended = False
        #: the ranks' per-batch agreement (a stream split across ranks), else None
        self.rank_join: Any = None

    # ------------------------------------------------------------------ building
    def initialize(self, context: RunnerContext, next_callback: Any) -> None:
        network = context.network
        feeder = network.data_feeder(self.feeding)
        batch_size = self.batch_size if self.batch_size is not None else network.batch_size
        ds = self.data
        world = getattr(context, "world_size", 1)
        self.rank_join = None
        if world > 1 and self.shard:
            ds, equal = self._split(ds, context.rank, world, batch_size)
            if not equal and self.remainder != "keep":
                self.rank_join = RankJoin("pad" if self.remainder == "pad" else "drop_remainder",
                                          samples=_batch_samples)
        per_pass = None
        if isinstance(ds, RandomAccessDataset):
            n = len(ds)
            if batch_size is None:
                per_pass = n
            else:
                per_pass = n // batch_size if self.drop_last else math.ceil(n / batch_size)
        if batch_size is not None:
            ds = ds.batch(batch_size, drop_remainder=self.drop_last)
        self._depth = self.prefetch
        if self.prefetch and isinstance(ds, PrefetchDataset) and ds.buffer_size != "auto":
            # the data ends in its own read-ahead thread: the feeding thread takes its place
            # (one thread, not two handing each batch over; the same states)
            self._depth = self.prefetch + int(ds.buffer_size)
            ds = ds._parents[0]
        feed = _Feed(feeder, batch_size is not None)
        self._release_process()
        if isinstance(ds, ProcessPrefetchDataset):
            # the data ends in a background process: convert the batches there too
            ds = self._process = ds.with_parent(ds._parents[0].map(feed, name="feed"))
        else:
            ds = ds.map(feed, name="feed")
        self.pipeline = ds  # with prefetch, run by a _Passes source in a background thread
        self.effective_batch_size = batch_size
        context.batches_per_pass = per_pass
        next_callback(context)

    def _split(self, ds: Dataset, rank: int, world: int, batch_size: int | None
               ) -> tuple[Dataset, bool]:
        """This rank's part of ``ds``, split once (see "Data parallel" above), and whether
        every rank's part has the same number of batches by construction."""
        found = find_rank_split(ds)
        if found is not None:
            if found.rank_split[1] != world:
                raise ValueError(
                    f"the data is already split into {found.rank_split[1]} parts by "
                    f"{found.name}, but this job has {world} ranks: remove that split (the "
                    "DataProvider splits by rank itself), split by the job's world size, or "
                    "pass shard=False"
                )
            return ds, False
        if not isinstance(ds, RandomAccessDataset):
            from feedline.pytorch.dataset import split_pipeline

            return split_pipeline(ds, rank, world), False
        if batch_size is None:
            raise ValueError(
                "data-parallel training splits samples across ranks: give `batch_size` "
                "(per rank) and data that yields samples, or pass shard=False with data "
                "already split per rank"
            )
        part = split_dataset(ds, rank, world, mode=self.split_mode, remainder=self.remainder)
        return part, True

    # ------------------------------------------------------------------ hooks
    def on_pass_begin(self, next_callback: Any) -> None:
        self._close()
        state, self._pending = self._pending, None
        assert self.pipeline is not None  # built by initialize(), which runs first
        self._pass_end = None
        if state is None and self._reader is not None and self._reader_epoch == self._epoch:
            epoch = self._epoch  # the thread already reads this pass's epoch
            self._it = self._reader
        else:
            self._close_reader()
            stats = True if self.stats else None
            it: Any
            if state is not None:
                it = self.pipeline.iterator(state, stats=stats)
            else:
                # pass k reads epoch k of the pipeline, also in a runner restored elsewhere
                it = self.pipeline.iterator(epoch=self._epoch, stats=stats)
            epoch = it.epoch
            if self.prefetch:
                from feedline.runtime.threads import BackgroundIterator

                passes = self._passes = _Passes(self.pipeline, it, stats=self.stats,
                                                next_pass=self.prefetch_next_pass)
                it = self._reader = BackgroundIterator(passes, buffer_size=self._depth,
                                                       name="feed")
            self._it = it
        self._reader_epoch = None
        self._epoch = epoch + 1
        self._count = 0
        self._resumed = state is not None
        self._data_ended = False
        if self.rank_join is not None:
            self.rank_join.begin()
        next_callback()

    def _next_item(self) -> Any:
        """The pass's next fed item, or ``END`` once its data has ended (the feeding
        thread is not asked again: it goes on into the next pass's data)."""
        if self._data_ended:
            return END
        try:
            item = next(self._it)
        except StopIteration:
            item = END
        if isinstance(item, _PassEnd):
            self._pass_end = item
            item = END
        self._data_ended = item is END
        return item

    def _rest(self) -> Any:
        """The pass's items after the current one (read and dropped by the join)."""
        while (item := self._next_item()) is not END:
            yield item

    def on_batch_begin(self, next_callback: Any) -> bool:
        item = self._next_item()
        ctx = self.context
        if self.rank_join is not None:
            got = self.rank_join.step(item, self._rest)
            if got is None:
                return True
            item, ctx.padding = got
        elif item is END:
            return True
        batch, values = item
        convert = self._convert
        if convert is None:
            from feedline.pytorch.convert import converter

            convert = self._convert = converter(device=ctx.device, non_blocking=self.non_blocking,
                                                sequence=self.sequence,
                                                sparse_layout=self.sparse_layout)
        ctx.batch = batch
        ctx.inputs = convert(values)
        ctx.batch_size = len(batch)
        self._count += 1
        return next_callback()

    def on_pass_end(self, next_callback: Any) -> None:
        if not self._resumed and self._it is not None:
            self.context.batches_per_pass = self._count
        if self.stats and self._it is not None:
            if self._pass_end is not None:
                self.last_stats = self._pass_end.stats
            elif self._it is self._reader and self._passes is not None:
                self.last_stats = self._passes.stats()
            else:
                self.last_stats = self._it.stats()
        if self._pass_end is not None and self._pass_end.next_epoch is not None:
            self._it = None  # the thread goes on with the next epoch
            self._reader_epoch = self._pass_end.next_epoch
        self._close()
        next_callback()

    def finalize(self, next_callback: Any) -> None:
        self._close()
        self._close_reader()
        self._release_process()
        next_callback()

    def _release_process(self) -> None:
        stage, self._process = self._process, None
        if stage is not None:
            stage._release()  # its background process; the user's stages are not ours

    def _close(self) -> None:
        it, self._it = self._it, None
        if it is not None:
            it.close()
            if it is self._reader:
                self._reader = self._passes = None

    def _close_reader(self) -> None:
        reader, self._reader = self._reader, None
        self._passes = None
        self._reader_epoch = None
        if reader is not None:
            reader.close()

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        from feedline.train.checkpoint import gather_objects

        mine = None if self._it is None else self._it.get_state()
        ranks = gather_objects(mine)
        if ranks is None:
            return {"iterator": mine, "epoch": self._epoch}
        return {"iterator": None, "ranks": ranks, "epoch": self._epoch}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if not isinstance(state, dict) or "iterator" not in state or "epoch" not in state:
            raise CheckpointError("the data entry lacks 'iterator' or 'epoch'")
        self._epoch = int(state["epoch"])
        if "ranks" in state:
            ranks = state["ranks"]
            world = getattr(self.context, "world_size", 1)
            if len(ranks) != world:
                raise CheckpointError(
                    f"the data positions were saved by {len(ranks)} processes, this job has {world}"
                )
            self._pending = ranks[getattr(self.context, "rank", 0)]
        else:
            if getattr(self.context, "world_size", 1) != 1:
                raise CheckpointError(
                    "the data position was saved by 1 process, this job has "
                    f"{self.context.world_size}"
                )
            self._pending = state["iterator"]

    def __repr__(self) -> str:
        return f"DataProvider({self.data!r})"
