"""``RunnerBuilder``: assemble the standard trainer and tester runners.

>>> import torch
>>> from feedline import Dataset, data_type
>>> from feedline.train import RunnerBuilder, network, SGD
>>> xs = torch.linspace(-1, 1, 64).reshape(-1, 1).numpy()
>>> data = Dataset.from_arrays(xs, 3 * xs)               # samples (x, y) with y = 3x
>>> net = network(inputs={"x": data_type.dense_vector(1), "y": data_type.dense_vector(1)},
...               label="y", learning_rate=0.5, learning_method=SGD(),
...               batch_size=16)(torch.nn.Linear(1, 1, bias=False))
>>> runner = RunnerBuilder(network=net, seed=0).with_std_local_trainer(data).build()
>>> with runner:
...     _ = runner.run(num_passes=20)
>>> round(net.create_model().weight.item(), 3)
3.0

The trainer's chain, outermost first (``with_item`` items go last, in call order)::

    CreateModel, LocalUpdater, [Checkpointer], Counter, DataProvider, [Progress],
    [MetricsLogger], [EarlyStopping], [SaveParamsOnPassEnd], History, [EventHandler],
    TrainOps, [TestOnPassEnd], user items

This order is what makes the items' contracts hold: the checkpointer sits outside the
counter (it saves the position of the *next* batch), the observers sit inside it (they
see the ids of the batch that just ran) and outside the train ops and the tester (they
act after both, so a pass's test result is known when they log, stop or fire
``EndPass``). With only :meth:`~RunnerBuilder.with_std_tester`, :meth:`build` makes a
test runner: ``CreateModel, DataProvider, TestOps``; one ``run_one_pass`` sets
``context.test_result``.

``device_count > 1`` trains data parallel, with the program unchanged:

* on one machine, :meth:`~RunnerBuilder.build` returns a :class:`DistributedRunner`
  (and :meth:`~RunnerBuilder.run` uses one): ``with runner:`` starts the processes (each builds and
  enters the same runner, joined in one process group), every ``run_one_pass()`` /
  ``run(n)`` runs on all of them at once, and leaving the block finalizes and ends them;
* under ``torchrun`` (``WORLD_SIZE`` set, on one machine or several — ``torchrun
  --nnodes 2 --nproc-per-node 2 train.py``), :meth:`~RunnerBuilder.build` joins the
  process group of the environment and returns this process's :class:`Runner`; the
  world size is torchrun's.

Each rank reads its own part of the data, split once: a data provider's file list is
dealt by file, or by record when there are fewer files than ranks, and the ranks end
every pass together (see :class:`~feedline.train.items.DataProvider`). See
:mod:`feedline.train.distributed`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from feedline._internal.validate import positive_int
from feedline.train.events import EndPass, TestResult
from feedline.train.items import (
    Checkpointer,
    Counter,
    CreateModel,
    DataProvider,
    EarlyStopping,
    EventHandler,
    History,
    LocalUpdater,
    MetricsLogger,
    Progress,
    SaveParamsOnPassEnd,
    TestOnPassEnd,
    TestOps,
    TrainOps,
)
from feedline.train.items.data_provider import provider_dataset
from feedline.train.network import Network
from feedline.train.runner import Runner, RunnerContext, RunnerItem

__all__ = ["RunnerBuilder", "TrainResult", "DistributedRunner"]


@dataclass
class TrainResult:
    """What a training run returns (rank 0's view under data parallel).

    Args:
        passes: one :class:`~feedline.train.EndPass` per pass run (with its test
            result).
        test: the last test result, or ``None``.
        params: the model's final ``state_dict``, on the CPU.
        pass_id: the ``pass_id`` counter at the end (passes finished).
        global_step: the ``global_step`` counter at the end (batches finished).
        samples_seen: the ``samples_seen`` counter at the end (this rank's samples).
        progress: the :class:`~feedline.train.items.Progress` records when a progress
            item was used (timings), else ``[]``.
        checkpoint: the newest checkpoint written, or ``None``.
        trainer: the :class:`~feedline.train.Trainer` that ran, when one did
            (:meth:`~feedline.train.Trainer.train`), else ``None``.

    >>> import numpy as np, torch
    >>> from feedline import Dataset, data_type
    >>> from feedline.train import SGD, network
    >>> net = network(inputs={"x": data_type.dense_vector(2), "label": data_type.integer_value(2)},
    ...               learning_rate=0.1, learning_method=SGD(), batch_size=2)(torch.nn.Linear(2, 2))
    >>> data = Dataset.from_arrays(np.eye(2, dtype=np.float32)[[0, 1, 0, 1]], np.array([0, 1, 0, 1]))
    >>> result = RunnerBuilder(network=net, seed=0).with_std_local_trainer(data).run(num_passes=1)
    >>> type(result).__name__, [p.pass_id for p in result.passes], sorted(result.params)
    ('TrainResult', [0], ['bias', 'weight'])
    >>> result.test, result.progress, result.checkpoint
    (None, [], None)
    """

    passes: list[EndPass] = field(default_factory=list)
    test: TestResult | None = None
    params: dict[str, Any] = field(default_factory=dict)
    pass_id: int = 0
    global_step: int = 0
    samples_seen: int = 0
    progress: list[dict[str, Any]] = field(default_factory=list)
    checkpoint: str | None = None
    trainer: Any = None


class _UseUpdater(RunnerItem):
    """Puts an existing updater on the context (a standalone tester of a trained model)."""

    def __init__(self, updater: Any) -> None:
        self.updater = updater

    def initialize(self, context: RunnerContext, next_callback: Any) -> None:
        context.updater = self.updater
        next_callback(context)


class RunnerBuilder:
    """Builds trainer and tester runners for ``network``; see the module docstring.

    Args:
        network: the :class:`~feedline.train.Network` to train or test (made with the
            ``@network`` decorator); anything else raises ``TypeError``.
        device_count: the number of data-parallel processes :meth:`build` and
            :meth:`run` start on this machine (outside a process group); a positive int
            (1: this process only).
        device: where the model runs (default: ``cuda:<local rank>`` if available, else
            the CPU).
        seed: seeds the model's initial parameters (the same on every rank); ``None``:
            torch's global generator as it is.
        backend: the ``torch.distributed`` backend for the processes and for joining
            torchrun's group (``None``: gloo on the CPU, NCCL with CUDA).

    >>> import numpy as np, torch
    >>> from feedline import Dataset, data_type
    >>> from feedline.train import SGD, network
    >>> net = network(inputs={"x": data_type.dense_vector(2), "label": data_type.integer_value(2)},
    ...               learning_rate=0.1, learning_method=SGD(), batch_size=2)(torch.nn.Linear(2, 2))
    >>> data = Dataset.from_arrays(np.eye(2, dtype=np.float32)[[0, 1, 0, 1]], np.array([0, 1, 0, 1]))
    >>> builder = RunnerBuilder(network=net, seed=0).with_std_local_trainer(data).with_std_tester(data)
    >>> result = builder.run(num_passes=2)
    >>> result.pass_id, result.global_step, result.samples_seen, result.test.samples
    (2, 4, 8, 4)
    >>> tester = RunnerBuilder(network=net).with_std_tester(data).build()   # a test runner
    >>> with tester:
    ...     _ = tester.run_one_pass()
    ...     tester.context.test_result.pass_id, tester.context.test_result.samples
    (None, 4)
    """

    def __init__(self, network: Network, *, device_count: int = 1, device: Any = None,
                 seed: int | None = None, backend: str | None = None) -> None:
        if not isinstance(network, Network):
            raise TypeError(
                f"`network` must be a feedline.train.Network (use the @network decorator), got {network!r}"
            )
        self.network = network
        self.device_count = positive_int("device_count", device_count)
        self.device = device
        self.seed = seed
        self.backend = backend
        self._trainer: dict[str, Any] | None = None
        self._tester: dict[str, Any] | None = None
        self._options: dict[str, dict[str, Any]] = {}
        self._extra: list[RunnerItem] = []

    # ------------------------------------------------------------------ configuration
    def with_std_local_trainer(self, data: Any = None, *, method: Any = None, file_list: Any = None,
                               feeding: Any = None, batch_size: int | None = None,
                               drop_last: bool = False, prefetch: int = 0, shard: bool = True,
                               split_mode: str = "strided", remainder: str = "pad",
                               stats: bool = False, sparse_layout: str = "csr",
                               prefetch_next_pass: bool = True) -> RunnerBuilder:
        """Train on ``data`` (a Dataset or reader); the options are
        :class:`~feedline.train.items.DataProvider`'s, validated here.

        PaddlePaddle's form ``with_std_local_trainer(method=process, file_list=[...])``
        trains on the samples the data provider function ``process(settings, filename)``
        yields for each file in turn (:func:`~feedline.train.items.provider_dataset`).

        Args:
            data: the training data, a :class:`~feedline.Dataset` or a reader; give it
                or ``method`` with ``file_list`` (else ``TypeError``).
            method: a data provider function ``process(settings, filename)``
                (``settings.is_train`` is true).
            file_list: the files ``method`` reads, in order.
            feeding: the feeding map (``None``: declaration order).
            batch_size: samples per batch, per process (default: the network's).
            drop_last: drop a last smaller batch of each pass.
            prefetch: batches converted ahead in a background thread (0: none).
            shard: under data parallel, read only this rank's part of the data.
            split_mode: ``"strided"`` or ``"contiguous"`` split of random-access data.
            remainder: ``"pad"``, ``"drop"`` or ``"keep"``: how the ranks' parts are
                evened out.
            stats: time every pipeline stage (the provider's ``last_stats``).
            sparse_layout: the layout of sparse inputs' tensors, ``"csr"`` or ``"csc"``.
            prefetch_next_pass: let the ``prefetch`` thread read on into the next pass.
        """
        data = self._data(data, method, file_list, is_train=True)
        self._trainer = dict(data=data, feeding=feeding, batch_size=batch_size, drop_last=drop_last,
                             prefetch=prefetch, shard=shard, split_mode=split_mode,
                             remainder=remainder, stats=stats, sparse_layout=sparse_layout,
                             prefetch_next_pass=prefetch_next_pass)
        DataProvider(**self._trainer)
        return self

    def with_std_tester(self, data: Any = None, *, method: Any = None, file_list: Any = None,
                        feeding: Any = None, batch_size: int | None = None,
                        every_n_passes: int = 1, prefetch: int = 0, shard: bool = True) -> RunnerBuilder:
        """Test on ``data`` after every ``every_n_passes`` training passes (or, without a
        trainer, build a test runner); the options are
        :class:`~feedline.train.items.TestOnPassEnd`'s, validated here.

        Args:
            data: the test data, a :class:`~feedline.Dataset` or a reader; give it or
                ``method`` with ``file_list`` (else ``TypeError``).
            method: a data provider function, as for the trainer (its
                ``settings.is_train`` is false).
            file_list: the files ``method`` reads, in order.
            feeding: the feeding map (``None``: declaration order).
            batch_size: test samples per batch, per process (default: the network's).
            every_n_passes: test after every ``every_n_passes``-th training pass; a
                positive int.
            prefetch: test batches converted ahead in a background thread (0: none).
            shard: under data parallel, each rank tests its own part (``False``: all of
                ``data``).
        """
        data = self._data(data, method, file_list, is_train=False)
        self._tester = dict(data=data, feeding=feeding, batch_size=batch_size,
                            every_n_passes=every_n_passes, prefetch=prefetch, shard=shard)
        TestOnPassEnd(**self._tester)
        return self

    def _data(self, data: Any, method: Any, file_list: Any, *, is_train: bool) -> Any:
        if method is None and file_list is None:
            if data is None:
                raise TypeError("give the data: `data`, or `method=` and `file_list=`")
            return data
        if data is not None:
            raise TypeError("give either `data` or `method=` with `file_list=`, not both")
        if method is None or file_list is None:
            missing = "method" if method is None else "file_list"
            raise TypeError(f"a data provider needs both `method` and `file_list`; `{missing}` is missing")
        return provider_dataset(method, file_list, input_types=self.network.input_types,
                                is_train=is_train)

    def with_event_handler(self, handler: Any) -> RunnerBuilder:
        """Call ``handler(event)`` with the v2 events (:mod:`feedline.train.events`).

        Args:
            handler: a function of one event (see
                :class:`~feedline.train.items.EventHandler`).
        """
        EventHandler(handler)
        self._options["events"] = {"handler": handler}
        return self

    def with_progress(self, **kwargs: Any) -> RunnerBuilder:
        """Add a :class:`~feedline.train.items.Progress` bar (keyword options passed on)."""
        Progress(**kwargs)
        self._options["progress"] = kwargs
        return self

    def with_metrics_logger(self, directory: str | os.PathLike, **kwargs: Any) -> RunnerBuilder:
        """Add a :class:`~feedline.train.items.MetricsLogger` writing to ``directory``.

        Args:
            directory: where the logs go; further keyword options are the logger's.
        """
        MetricsLogger(directory, **kwargs)
        self._options["logger"] = {"directory": directory, **kwargs}
        return self

    def with_checkpoints(self, directory: str | os.PathLike, **kwargs: Any) -> RunnerBuilder:
        """Add a :class:`~feedline.train.items.Checkpointer` (keyword options
        ``every_n_batches``, ``every_n_passes``, ``keep``, ``resume``).

        Args:
            directory: where the checkpoints go.
        """
        Checkpointer(directory, **kwargs)
        self._options["checkpoints"] = {"directory": directory, **kwargs}
        return self

    def with_early_stopping(self, monitor: str = "test.cost", **kwargs: Any) -> RunnerBuilder:
        """Add :class:`~feedline.train.items.EarlyStopping` on ``monitor``.

        Args:
            monitor: the value watched (see :class:`~feedline.train.items.EarlyStopping`;
                default the test cost); further keyword options are the item's.
        """
        EarlyStopping(monitor, **kwargs)
        self._options["early_stopping"] = {"monitor": monitor, **kwargs}
        return self

    def with_save_params(self, directory: str | os.PathLike, **kwargs: Any) -> RunnerBuilder:
        """Add :class:`~feedline.train.items.SaveParamsOnPassEnd` writing to ``directory``.

        Args:
            directory: where the params exports go; further keyword options are the
                item's.
        """
        SaveParamsOnPassEnd(directory, **kwargs)
        self._options["save_params"] = {"directory": directory, **kwargs}
        return self

    def with_item(self, item: RunnerItem) -> RunnerBuilder:
        """Add a custom item, innermost (after the standard ones).

        Args:
            item: a :class:`~feedline.train.RunnerItem`; anything else raises
                ``TypeError``. Items added by several calls go in call order.
        """
        if not isinstance(item, RunnerItem):
            raise TypeError(f"`item` must be a RunnerItem, got {type(item).__name__}")
        self._extra.append(item)
        return self

    # ------------------------------------------------------------------ building
    def build(self, *, module: Any = None, updater: LocalUpdater | None = None
              ) -> Runner | DistributedRunner:
        """A new runner (see the module docstring for the chain); with ``device_count > 1``
        outside a process group, a :class:`DistributedRunner` that runs it in that many
        processes.

        Args:
            module: train or test this existing ``torch.nn.Module`` instead of a new one.
            updater: reuse this :class:`~feedline.train.items.LocalUpdater` (its
                optimizer state carries over).

        Raises:
            ValueError: neither a trainer nor a tester was configured, or ``module`` or
                ``updater`` was given for a :class:`DistributedRunner`.
        """
        from feedline.train.distributed import init_from_env, is_distributed

        if self._trainer is None and self._tester is None:
            raise ValueError("nothing to build: call with_std_local_trainer() or with_std_tester()")
        init_from_env(self.backend)
        if self.device_count > 1 and not is_distributed():
            if module is not None or updater is not None:
                raise ValueError(
                    f"device_count={self.device_count} builds the runner in new processes: "
                    "`module` and `updater` cannot be passed to them"
                )
            return DistributedRunner(self)
        model = CreateModel(self.network, device=self.device, module=module, seed=self.seed)
        if self._trainer is None:
            t = self._tester
            assert t is not None  # checked above: a trainer or a tester is set
            items: list[RunnerItem] = [model]
            if updater is not None:
                items.append(_UseUpdater(updater))
            items += [DataProvider(t["data"], feeding=t["feeding"], batch_size=t["batch_size"],
                                   prefetch=t["prefetch"], shard=t["shard"], remainder="keep",
                                   state_key=None, prefetch_next_pass=False),
                      TestOps(), *self._extra]
            return Runner(items)
        o = self._options
        items = [model, updater if updater is not None else LocalUpdater()]
        if "checkpoints" in o:
            c = dict(o["checkpoints"])
            items.append(Checkpointer(c.pop("directory"), **c))
        items += [Counter(), DataProvider(**self._trainer)]
        if "progress" in o:
            items.append(Progress(**o["progress"]))
        if "logger" in o:
            c = dict(o["logger"])
            items.append(MetricsLogger(c.pop("directory"), **c))
        if "early_stopping" in o:
            items.append(EarlyStopping(**o["early_stopping"]))
        if "save_params" in o:
            c = dict(o["save_params"])
            items.append(SaveParamsOnPassEnd(c.pop("directory"), **c))
        items.append(History())
        if "events" in o:
            items.append(EventHandler(o["events"]["handler"]))
        items.append(TrainOps())
        if self._tester is not None:
            items.append(TestOnPassEnd(**self._tester))
        items += self._extra
        return Runner(items)

    def run(self, num_passes: int) -> TrainResult:
        """Build the trainer, run ``num_passes`` passes and return a :class:`TrainResult`.

        With ``device_count > 1`` outside a process group, the passes run in
        ``device_count`` processes that each build the trainer (a
        :class:`DistributedRunner`: the builder, its network and its data must pickle),
        and the result is rank 0's.

        Args:
            num_passes: the number of passes, a positive int (else
                ``ValueError``/``TypeError``); without a trainer configured, ``ValueError``.
        """
        positive_int("num_passes", num_passes)
        if self._trainer is None:
            raise ValueError("run() trains: call with_std_local_trainer() first")
        runner = self.build()
        with runner:
            runner.run(num_passes)
            return summarize(runner)


class DistributedRunner:
    """The runner of a ``RunnerBuilder(device_count=n)`` outside a process group: ``n``
    processes on this machine, each with the runner ``build()`` makes there (see the
    module docstring). ``with runner:`` (or :meth:`initialize`) starts them; the methods
    below run on every rank at once and return rank 0's result; leaving the block (or
    :meth:`finalize`) finalizes every rank's runner and ends the processes. An exception
    on any rank ends them all and is raised here as a ``RuntimeError``.

    Args:
        builder: the configured builder (its ``device_count`` processes and ``backend``);
            it is pickled to every process, which calls its ``build()``.

    The runners' contexts live in those processes: :meth:`summary` brings rank 0's
    counters, test result and parameters back as a :class:`TrainResult`.

    Starting processes takes seconds, so the run is not shown as an example here::

        runner = RunnerBuilder(network=net, device_count=2).with_std_local_trainer(
            method=process, file_list=files).build()
        with runner:
            for _ in range(2):
                runner.run_one_pass()
            result = runner.summary()
    """

    def __init__(self, builder: RunnerBuilder) -> None:
        self.builder = builder
        self._pool: Any = None

    @property
    def initialized(self) -> bool:
        """True while the processes run (between ``initialize`` and ``finalize``)."""
        return self._pool is not None

    def initialize(self) -> None:
        """Start ``device_count`` processes, each building and initializing the runner."""
        from feedline.train.distributed import RankPool

        if self._pool is not None:
            raise RuntimeError("the runner is already initialized")
        b = self.builder
        self._pool = RankPool(_enter_runner, b, nprocs=b.device_count, backend=b.backend)

    def finalize(self) -> None:
        """Finalize every rank's runner and end the processes; idempotent."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()

    def __enter__(self) -> DistributedRunner:
        self.initialize()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.finalize()

    def _call(self, name: str, *args: Any) -> Any:
        if self._pool is None:
            raise RuntimeError("the runner is not initialized: use `with runner:` around passes")
        return self._pool.call(name, *args)

    def run_one_pass(self) -> int:
        """:meth:`Runner.run_one_pass` on every rank; rank 0's number of batches."""
        return self._call("run_one_pass")

    def run(self, num_passes: int) -> int:
        """:meth:`Runner.run` on every rank; rank 0's number of passes run.

        Args:
            num_passes: as for :meth:`Runner.run`, but a positive int.
        """
        positive_int("num_passes", num_passes)
        return self._call("run", num_passes)

    def summary(self) -> TrainResult:
        """Rank 0's :func:`summarize` of its runner."""
        return self._call("summary")

    def __repr__(self) -> str:
        state = "running" if self._pool is not None else "not started"
        return f"DistributedRunner(device_count={self.builder.device_count}, {state})"


class _RankRunner:
    """What a :class:`DistributedRunner` process holds: the built runner, entered."""

    def __init__(self, runner: Runner) -> None:
        self.runner = runner

    def run_one_pass(self) -> int:
        return self.runner.run_one_pass()

    def run(self, num_passes: int) -> int:
        return self.runner.run(num_passes)

    def summary(self) -> TrainResult:
        return summarize(self.runner)

    def __exit__(self, *exc_info: object) -> None:
        self.runner.__exit__(*exc_info)


def _enter_runner(builder: RunnerBuilder) -> _RankRunner:
    runner = builder.build()
    assert isinstance(runner, Runner)  # inside the process group: this rank's own
    runner.__enter__()
    return _RankRunner(runner)


def summarize(runner: Runner | DistributedRunner) -> TrainResult:
    """A :class:`TrainResult` from a (still initialized) trainer runner (rank 0's, of a
    :class:`DistributedRunner`)."""
    if isinstance(runner, DistributedRunner):
        return runner.summary()
    ctx = runner.context
    history = runner.find(History)
    progress = runner.find(Progress)
    ckpt = runner.find(Checkpointer)
    passes = list(history.passes) if history is not None else []
    tests = [p.test for p in passes if p.test is not None]
    return TrainResult(
        passes=passes,
        test=tests[-1] if tests else getattr(ctx, "test_result", None),
        params={k: v.detach().cpu().clone() for k, v in ctx.module.state_dict().items()},
        pass_id=getattr(ctx, "pass_id", 0),
        global_step=getattr(ctx, "global_step", 0),
        samples_seen=getattr(ctx, "samples_seen", 0),
        progress=list(progress.passes) if progress is not None else [],
        checkpoint=None if ckpt is None else ckpt.last_path,
    )
