"""Lightning: feedline pipelines in ``Trainer.fit`` with exact mid-epoch resume
(needs ``feedline[lightning]``).

:class:`FeedlineDataModule` is a ``LightningDataModule`` whose dataloaders are
:func:`stateful_loader`\\ s over ``pipeline.as_torch()``: a torchdata
``StatefulDataLoader`` whose state Lightning stores in every checkpoint, so
``trainer.fit(model, datamodule=dm, ckpt_path=...)`` from a checkpoint taken in the
middle of an epoch continues with exactly the batches the uninterrupted fit would have
seen next — on one process and under ``strategy="ddp"`` (each rank reads its own part:
see :mod:`feedline.pytorch.dataset`).

Under ``strategy="ddp"`` the ranks' parts of a *stream* pipeline may differ in length
(byte ranges, files): the loaders made here then join the ranks at every step
(:mod:`feedline.pytorch.rank_join`, ``join="pad"`` by default, or ``"drop_remainder"``;
``None`` turns it off), so every rank runs the same number of steps and the epoch ends
on all of them together; ``loader.rank_join.stats()`` counts what was padded or
dropped in the epoch last run, and ``flag_key`` adds a padding flag to dict batches.
A pipeline already split by rank is split only across DataLoader workers.

Lightning's training loop fetches one batch ahead (to know which batch is the last), so
when it saves a checkpoint after batch ``k`` the loader has already produced batch
``k + 1``. The loader made here reports the state from before that prefetched batch
(``prefetched=1``), so it is not skipped on resume; once the epoch's batches are
exhausted nothing is prefetched and the state is the loader's own.

>>> from feedline import Dataset
>>> dm = FeedlineDataModule(train=Dataset.range(6).batch(2, collate="numpy"))
>>> [b.tolist() for b in dm.train_dataloader()]
[[0, 1], [2, 3], [4, 5]]
"""

from __future__ import annotations

from typing import Any

from feedline._internal.optional import require
from feedline._internal.validate import non_negative_int, one_of, optional_positive_int
from feedline.dataset.base import Dataset
from feedline.exceptions import StateError

__all__ = ["FeedlineDataModule", "stateful_loader", "PrefetchAwareLoader", "RANKS_KEY"]

RANKS_KEY = "feedline_rank_states"

L = require("lightning", extra="lightning")
StatefulDataLoader = require("torchdata.stateful_dataloader", extra="torch").StatefulDataLoader


class PrefetchAwareLoader(StatefulDataLoader):  # type: ignore[misc,valid-type]  # base from require()
    """A ``StatefulDataLoader`` whose ``state_dict()`` leaves out the last ``prefetched``
    batches it produced while its iterator is not exhausted (a consumer that fetches
    ahead, like Lightning's training loop, has not used them yet), and under
    ``torch.distributed`` holds every rank's state (``{RANKS_KEY: [state, ...]}``), each
    rank loading its own. The state stays that of the last batch used also after the
    iterator is dropped unfinished (as Lightning drops it when ``fit()`` returns), so
    ``trainer.save_checkpoint()`` after ``fit(max_steps=...)`` resumes at the next batch.
    Other arguments go to ``StatefulDataLoader``.

    Args:
        prefetched: how many of the last batches produced the state leaves out, a
            non-negative int (else ``ValueError``/``TypeError``); 1 (the default) for
            Lightning's training loop, 0 for the loader's own state.
        join: how the ranks agree at every step when the dataset is iterable and
            ``torch.distributed`` has more than one rank: ``"pad"`` (the default) or
            ``"drop_remainder"`` (see :class:`~feedline.pytorch.rank_join.RankJoin`;
            another value raises ``ValueError``), or ``None`` (off).
        flag_key: with ``join``, the key of a padding flag (a bool tensor) added to dict
            batches; ``None`` (the default) adds none.

    >>> from feedline import Dataset
    >>> loader = PrefetchAwareLoader(Dataset.range(4).as_torch(), batch_size=1)
    >>> it = iter(loader); _ = next(it); _ = next(it)
    >>> again = PrefetchAwareLoader(Dataset.range(4).as_torch(), batch_size=1)
    >>> again.load_state_dict(loader.state_dict())
    >>> [int(b) for b in again]  # batch 1 was prefetched, not used: it comes again
    [1, 2, 3]
    """

    def __init__(self, *args: Any, prefetched: int = 1, join: str | None = "pad",
                 flag_key: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.prefetched = non_negative_int("prefetched", prefetched)
        self._recent: list[dict] = []
        #: the per-step agreement of the ranks (a stream pipeline under DDP), else None
        self.rank_join = None
        self.flag_key = flag_key
        if join is not None:
            import torch

            from feedline.pytorch.rank_join import RankJoin

            rank_join = RankJoin(join)
            if isinstance(self.dataset, torch.utils.data.IterableDataset):
                self.rank_join = rank_join

    def __iter__(self) -> Any:
        self._recent = []
        it = _RecordingIterator(self, super().__iter__())
        if self.rank_join is None or _world_size() == 1:
            return it
        from feedline.pytorch.rank_join import joined

        return joined(self.rank_join, it, self.flag_key)

    def _own_state(self) -> dict[str, Any]:
        if self.prefetched and len(self._recent) >= self.prefetched:
            return self._recent[-self.prefetched]
        if not self.prefetched and self._recent:
            # the state after the last batch: also once the iterator has been dropped
            # (Lightning drops it when fit() returns, and a dropped StatefulDataLoader
            # iterator would report the start of the epoch)
            return self._recent[-1]
        return super().state_dict()

    def state_dict(self) -> dict[str, Any]:
        """The state without the prefetched batches; under ``torch.distributed`` every
        rank's state (gathered: every rank must call it, as Lightning's checkpointing
        does), since a checkpoint holds the state of rank 0 only."""
        state = self._own_state()
        world = _world_size()
        if world == 1:
            return state
        import torch.distributed as dist

        states: list[Any] = [None] * world
        dist.all_gather_object(states, state)
        return {RANKS_KEY: states}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a state from :meth:`state_dict` (this rank's part of a gathered one).

        Args:
            state_dict: what :meth:`state_dict` returned; a gathered state saved by
                another number of ranks raises :class:`~feedline.exceptions.StateError`.
        """
        if RANKS_KEY in state_dict:
            import torch.distributed as dist

            states = state_dict[RANKS_KEY]
            world = _world_size()
            if len(states) != world:
                raise StateError(
                    f"the loader state was saved by {len(states)} ranks, this job has "
                    f"{world}: resume with the same world size"
                )
            state_dict = states[dist.get_rank() if world > 1 else 0]
        super().load_state_dict(state_dict)


def _world_size() -> int:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size()
    return 1


class _RecordingIterator:
    def __init__(self, loader: PrefetchAwareLoader, inner: Any) -> None:
        self._loader = loader
        self._inner = inner

    def __iter__(self) -> _RecordingIterator:
        return self

    def __next__(self) -> Any:
        loader = self._loader
        before = StatefulDataLoader.state_dict(loader) if loader.prefetched else None
        try:
            batch = next(self._inner)
        except StopIteration:
            loader._recent = []  # exhausted: nothing is prefetched any more
            raise
        if before is not None:
            loader._recent.append(before)
            del loader._recent[:-loader.prefetched]
        else:  # the state after this batch, kept for when the iterator is gone
            loader._recent = [StatefulDataLoader.state_dict(loader)]
        return batch

    def __len__(self) -> int:
        return len(self._inner)


def stateful_loader(pipeline: Dataset, *, batch_size: int | None = None, num_workers: int = 0,
                    prefetched: int = 1, join: str | None = "pad", flag_key: str | None = None,
                    **loader_options: Any) -> PrefetchAwareLoader:
    """A :class:`PrefetchAwareLoader` over ``pipeline.as_torch()``.

    Other keyword arguments (``loader_options``) go to the DataLoader (``shuffle`` only
    for a random-access pipeline).

    Args:
        pipeline: the feedline pipeline (anything else raises ``TypeError``).
        batch_size: items per batch, a positive int; ``None`` (the default) hands the
            pipeline's own items (already batched) over as they are.
        num_workers: DataLoader worker processes, a non-negative int (0, the default:
            read in the main process).
        prefetched: batches the state leaves out; see :class:`PrefetchAwareLoader`.
        join: how the ranks of a DDP job end the epoch of a stream pipeline together:
            ``"pad"`` (the default), ``"drop_remainder"`` or ``None`` (see the module
            docstring).
        flag_key: with ``join``, the key of a padding flag added to dict batches.

    >>> from feedline import Dataset
    >>> [b.tolist() for b in stateful_loader(Dataset.range(5).filter(bool), batch_size=2)]
    [[1, 2], [3, 4]]
    """
    if not isinstance(pipeline, Dataset):
        raise TypeError(f"`pipeline` must be a feedline Dataset, got {type(pipeline).__name__}")
    optional_positive_int("batch_size", batch_size)
    non_negative_int("num_workers", num_workers)
    return PrefetchAwareLoader(pipeline.as_torch(), batch_size=batch_size,
                               num_workers=num_workers, prefetched=prefetched, join=join,
                               flag_key=flag_key, **loader_options)


class FeedlineDataModule(L.LightningDataModule):  # type: ignore[name-defined]  # base from require()
    """A ``LightningDataModule`` over feedline pipelines (see the module docstring).
    ``loaders[stage]``: the loader last made for a stage (its ``rank_join.stats()``
    counts the padded or dropped samples). Only the training loader of a stream pipeline
    counts a batch Lightning fetched ahead.

    Args:
        train: the training pipeline (``None``: no training loader).
        val: the validation pipeline (``None``: none).
        test: the test pipeline (``None``: none).
        predict: the prediction pipeline (``None``: none).
        batch_size: items per batch of every loader (``None``: the pipeline's own items,
            already batched).
        num_workers: DataLoader worker processes of every loader.
        join: how the ranks of a stream pipeline agree at every step under DDP:
            ``"pad"``, ``"drop_remainder"`` or ``None`` (off); see :func:`stateful_loader`.
        flag_key: with ``join``, the key of a padding flag added to dict batches.

    Other keyword arguments (``loader_options``) are passed to every loader (see
    :func:`stateful_loader`).

    >>> from feedline import Dataset
    >>> dm = FeedlineDataModule(train=Dataset.range(4).filter(bool), batch_size=3)
    >>> [b.tolist() for b in dm.train_dataloader()]
    [[1, 2, 3]]
    """

    def __init__(self, train: Dataset | None = None, val: Dataset | None = None,
                 test: Dataset | None = None, predict: Dataset | None = None, *,
                 batch_size: int | None = None, num_workers: int = 0,
                 join: str | None = "pad", flag_key: str | None = None,
                 **loader_options: Any) -> None:
        super().__init__()
        for name, value in (("train", train), ("val", val), ("test", test),
                            ("predict", predict)):
            if value is not None and not isinstance(value, Dataset):
                raise TypeError(
                    f"`{name}` must be a feedline Dataset or None, got {type(value).__name__}"
                )
        self.pipelines = {"train": train, "val": val, "test": test, "predict": predict}
        self.batch_size = optional_positive_int("batch_size", batch_size)
        self.num_workers = non_negative_int("num_workers", num_workers)
        if join is not None:
            from feedline.pytorch.rank_join import POLICIES

            one_of("join", join, POLICIES)
        self.join, self.flag_key = join, flag_key
        self.loader_options = loader_options
        self.loaders: dict[str, PrefetchAwareLoader] = {}

    def _loader(self, stage: str, prefetched: int) -> PrefetchAwareLoader:
        pipeline = self.pipelines[stage]
        if pipeline is None:
            raise ValueError(f"no `{stage}` pipeline was given to FeedlineDataModule")
        loader = self.loaders[stage] = stateful_loader(
            pipeline, batch_size=self.batch_size, num_workers=self.num_workers,
            prefetched=prefetched, join=self.join, flag_key=self.flag_key,
            **self.loader_options)
        return loader

    def train_dataloader(self) -> PrefetchAwareLoader:
        """The training loader. Lightning fetches one batch ahead only from a loader
        without a length (a stream pipeline): that loader's state leaves the fetched-ahead
        batch out (``prefetched=1``). A random-access pipeline's loader has a length,
        Lightning does not fetch ahead from it, and its state is its own
        (``prefetched=0``); so a checkpoint resumes at the next batch in both cases, also
        one saved by ``trainer.save_checkpoint()`` after ``fit(max_steps=...)`` returned.

        >>> from feedline import Dataset
        >>> dm = FeedlineDataModule(train=Dataset.range(4), batch_size=2)
        >>> dm.train_dataloader().prefetched, FeedlineDataModule(
        ...     train=Dataset.range(4).filter(bool), batch_size=2).train_dataloader().prefetched
        (0, 1)
        """
        loader = self._loader("train", 1)
        try:
            len(loader)
        except TypeError:  # no length: Lightning fetches ahead
            return loader
        loader.prefetched = 0
        return loader

    def val_dataloader(self) -> Any:
        """The validation loader (an empty list, i.e. none, without a ``val`` pipeline)."""
        return [] if self.pipelines["val"] is None else self._loader("val", 0)

    def test_dataloader(self) -> Any:
        """The test loader (an empty list, i.e. none, without a ``test`` pipeline)."""
        return [] if self.pipelines["test"] is None else self._loader("test", 0)

    def predict_dataloader(self) -> Any:
        """The prediction loader (an empty list, i.e. none, without a ``predict`` pipeline)."""
        return [] if self.pipelines["predict"] is None else self._loader("predict", 0)
