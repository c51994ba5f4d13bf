"""PaddlePaddle v2's ``train``/``test`` API, built on the runner.

:func:`train` is the one-call form::

    result = feedline.train.train(
        reader=feedline.batch(train_reader, 32),   # yields batches (lists of samples)
        num_passes=5,
        event_handler=handler,                     # gets BeginPass, EndIteration, ...
        feeding={"pixel": 0, "label": 1},
        network=digits,                            # a @network
        test_reader=feedline.batch(test_reader, 256),
    )

It builds a :class:`Trainer` and calls :meth:`Trainer.train`, which assembles a runner
with :class:`~feedline.train.RunnerBuilder` — the same items as every other runner — and
runs it. A :class:`Trainer` keeps its model and optimizer between calls, like v2's
``paddle.trainer.SGD``: train again to continue, :meth:`Trainer.test` to evaluate,
:meth:`Trainer.save_params` to export.

>>> import numpy as np, torch
>>> from feedline import Dataset, data_type
>>> from feedline.train import network, SGD, EndPass
>>> xs = np.linspace(-1, 1, 32, dtype=np.float32).reshape(-1, 1)
>>> net = network(inputs={"x": data_type.dense_vector(1), "y": data_type.dense_vector(1)},
...               label="y", learning_rate=0.5, learning_method=SGD())(torch.nn.Linear(1, 1))
>>> def show(event):
...     if isinstance(event, EndPass) and event.pass_id == 9:
...         print(f"pass {event.pass_id}: cost {event.cost:.4f}")
>>> result = train(Dataset.from_arrays(xs, 2 * xs + 1), num_passes=10, event_handler=show,
...                network=net, batch_size=8, seed=0)
pass 9: cost 0.0000
>>> round(result.trainer.test(Dataset.from_arrays(xs, 2 * xs + 1), batch_size=32).cost, 6)
0.0
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, overload

from feedline._internal.validate import positive_int
from feedline.train.builder import RunnerBuilder, TrainResult, summarize
from feedline.train.checkpoint import load_params
from feedline.train.checkpoint import save_params as _save_params
from feedline.train.events import TestResult
from feedline.train.items import CreateModel, LocalUpdater
from feedline.train.items.create_model import resolve_device
from feedline.train.network import Network
from feedline.train.runner import Runner

__all__ = ["Trainer", "train", "test"]


class Trainer:
    """Trains and tests one model of ``network``; see the module docstring.

    Args:
        network: the :class:`~feedline.train.Network` to train; anything else raises
            ``TypeError``.
        device: where the model runs (default: ``cuda:<local rank>`` if CUDA is
            available, else the CPU).
        seed: seeds the model's initial parameters; ``None``: torch's global generator
            as it is.

    >>> import numpy as np, torch
    >>> from feedline import Dataset, data_type
    >>> from feedline.train import SGD, network
    >>> xs = np.linspace(-1, 1, 8, dtype=np.float32).reshape(-1, 1)
    >>> data = Dataset.from_arrays(xs, 2 * xs)                   # y = 2x
    >>> net = network(inputs={"x": data_type.dense_vector(1), "y": data_type.dense_vector(1)},
    ...               label="y", learning_rate=0.5, learning_method=SGD(),
    ...               batch_size=4)(torch.nn.Linear(1, 1, bias=False))
    >>> trainer = Trainer(net, seed=0)
    >>> result = trainer.train(data, num_passes=30)
    >>> round(trainer.model.weight.item(), 3), result.global_step
    (2.0, 60)
    >>> trainer.test(data).samples
    8
    """

    def __init__(self, network: Network, *, device: Any = None, seed: int | None = None) -> None:
        if not isinstance(network, Network):
            raise TypeError(f"`network` must be a feedline.train.Network, got {network!r}")
        self.network = network
        self.device = device
        self.seed = seed
        self.module: Any = None
        self.updater = LocalUpdater()

    def _model(self) -> Any:
        if self.module is None:
            maker = CreateModel(self.network, device=self.device, seed=self.seed)
            self.module = maker._build().to(resolve_device(self.device))
        return self.module

    @property
    def model(self) -> Any:
        """The ``torch.nn.Module`` being trained (built on first use)."""
        return self._model()

    def train(
        self,
        reader: Any,
        num_passes: int = 1,
        event_handler: Callable[[Any], Any] | None = None,
        feeding: Any = None,
        *,
        batch_size: int | None = None,
        test_reader: Any = None,
        test_feeding: Any = None,
        test_batch_size: int | None = None,
        checkpoint_dir: str | os.PathLike | None = None,
        checkpoint_every_n_batches: int | None = None,
        keep_checkpoints: int | None = 2,
        resume: bool | str | os.PathLike = False,
        progress: bool | dict = False,
        log_dir: str | os.PathLike | None = None,
        tensorboard: bool = False,
        early_stopping: dict | None = None,
        save_params_dir: str | os.PathLike | None = None,
        prefetch: int = 0,
        device_count: int = 1,
    ) -> TrainResult:
        """Train for ``num_passes`` passes over ``reader``; return a :class:`TrainResult`.

        Calling it again continues training the same model and optimizer state.

        Args:
            reader: a Dataset or reader yielding batches, or samples when ``batch_size``
                (or the network's) is set.
            num_passes: the passes to run (a resumed job counts from its pass 0 and
                runs the passes it lacks); a non-negative int, positive with
                ``device_count > 1``.
            event_handler: ``event_handler(event)`` at every event (see
                :mod:`feedline.train.events`); ``None``: no events.
            feeding: the feeding map (``None``: declaration order).
            batch_size: samples per batch, per process (default: the network's).
            test_reader: test on it after every pass (``TestResult`` event,
                ``EndPass.test``); ``None``: no test.
            test_feeding: the test data's feeding map (default: ``feeding``).
            test_batch_size: the test batch size (default: ``batch_size``).
            checkpoint_dir: checkpoint into this directory after every pass;
                ``None``: no checkpoints.
            checkpoint_every_n_batches: with ``checkpoint_dir``, also checkpoint every
                this many batches.
            keep_checkpoints: with ``checkpoint_dir``, keep this many newest files
                (``None``: all).
            resume: ``True`` or ``"latest"``: the newest checkpoint in
                ``checkpoint_dir`` if there is one (without ``checkpoint_dir``,
                ``ValueError``); a path: that checkpoint (without ``checkpoint_dir``, no
                new ones are written); ``False``: start afresh.
            progress: a progress bar: ``True``, or a dict of
                :class:`~feedline.train.items.Progress` options; ``False``: none.
            log_dir: write CSV logs (:class:`~feedline.train.items.MetricsLogger`)
                there; ``None``: no logs.
            tensorboard: with ``log_dir``, TensorBoard event files too.
            early_stopping: :class:`~feedline.train.items.EarlyStopping` options, e.g.
                ``{"monitor": "test.cost", "patience": 2}``; ``None``: never stop early.
            save_params_dir: write a params export there after every pass.
            prefetch: feed up to this many batches ahead in a thread (0: none).
            device_count: ``> 1``: data parallel over that many processes (everything
                passed must pickle; the handler runs in rank 0's process, and this
                trainer's model receives the final parameters).
        """
        builder = RunnerBuilder(self.network, device=self.device, seed=self.seed,
                                device_count=device_count)
        builder.with_std_local_trainer(reader, feeding=feeding, batch_size=batch_size,
                                       prefetch=prefetch)
        if test_reader is not None:
            builder.with_std_tester(test_reader,
                                    feeding=feeding if test_feeding is None else test_feeding,
                                    batch_size=batch_size if test_batch_size is None else test_batch_size)
        if event_handler is not None:
            builder.with_event_handler(event_handler)
        if checkpoint_dir is not None:
            if resume is True:
                resume = "latest"
            builder.with_checkpoints(checkpoint_dir, every_n_batches=checkpoint_every_n_batches,
                                     keep=keep_checkpoints, resume=resume or None)
        elif resume:
            if resume is True or resume == "latest":
                raise ValueError("`resume=True` needs `checkpoint_dir` to look in")
            builder.with_checkpoints(os.path.dirname(os.fspath(resume)) or ".", every_n_passes=None,
                                     resume=resume)
        if progress:
            builder.with_progress(**(progress if isinstance(progress, dict) else {}))
        if log_dir is not None:
            builder.with_metrics_logger(log_dir, tensorboard=tensorboard)
        if early_stopping is not None:
            builder.with_early_stopping(**early_stopping)
        if save_params_dir is not None:
            builder.with_save_params(save_params_dir)
        if device_count > 1:
            result = builder.run(num_passes)
            self._model().load_state_dict(result.params)
            result.trainer = self
            return result
        runner = builder.build(module=self.module, updater=self.updater)
        assert isinstance(runner, Runner)  # one process: a plain runner
        with runner:
            self.module = runner.context.module
            runner.run(num_passes)
            result = summarize(runner)
        result.trainer = self
        return result

    def test(self, reader: Any, feeding: Any = None, *, batch_size: int | None = None) -> TestResult:
        """Evaluate the model (with the model average swapped in, when there is one) on
        ``reader``; return a :class:`~feedline.train.TestResult` (``pass_id`` ``None``).

        Args:
            reader: the test data, a Dataset or reader (samples, or batches without a
                batch size).
            feeding: the feeding map (``None``: declaration order).
            batch_size: samples per batch (default: the network's).
        """
        trained = self.updater.optimizer is not None
        runner = RunnerBuilder(self.network, device=self.device, seed=self.seed) \
            .with_std_tester(reader, feeding=feeding, batch_size=batch_size) \
            .build(module=self._model(), updater=self.updater if trained else None)
        assert isinstance(runner, Runner)  # device_count 1: a plain runner
        with runner:
            runner.run_one_pass()
            result = runner.context.test_result
        assert result is not None  # TestOps sets it at the end of every pass
        return result

    def save_params(self, path: str | os.PathLike, *, averaged: bool = True) -> None:
        """Export the parameters for inference (see
        :func:`~feedline.train.checkpoint.save_params`).

        Args:
            path: the file to write.
            averaged: with a model average, export the averaged parameters; ``False``:
                the trained ones.
        """
        module = self._model()
        apply = averaged and self.updater.average is not None
        if apply:
            self.updater.apply()
        try:
            _save_params(path, module)
        finally:
            if apply:
                self.updater.restore()

    def load_params(self, path: str | os.PathLike) -> None:
        """Load a params export or checkpoint's parameters into the model.

        Args:
            path: a file written by ``save_params`` or a checkpoint; names, shapes and
                dtypes must match the model (else
                :class:`~feedline.exceptions.CheckpointError`).
        """
        load_params(path, self._model())


@overload
def train(reader: Any, num_passes: int = 1, event_handler: Callable[[Any], Any] | None = None,
          feeding: Any = None, *, network: Network, device: Any = None, seed: int | None = None,
          **options: Any) -> TrainResult: ...


@overload
def train(reader: Any, feeding: Mapping[str, int] | Sequence[str], batch_size: int,
          num_passes: int = 1, *, network: Network, device: Any = None, seed: int | None = None,
          **options: Any) -> TrainResult: ...


def train(reader: Any, *args: Any, network: Network, device: Any = None, seed: int | None = None,
          **options: Any) -> TrainResult:
    """Train a new model of ``network``; the result's ``trainer`` is the :class:`Trainer`.

    Two positional forms, told apart by the second argument:

    * PaddlePaddle v2's ``train(reader, num_passes, event_handler, feeding)``:
      ``Trainer(network, device=, seed=).train(reader, num_passes, event_handler,
      feeding, **options)``;
    * the reader design's ``train(batch_reader, feeding, batch_size, num_passes)``, when
      the second argument is a feeding map (``{"image": 0, "label": 1}``) or a list of
      input names: ``batch_reader`` yields batches (``feedline.batch(reader, 128)``),
      fed as they come — ``batch_size`` states their size, as in the design, and no
      batching happens here (the network's own ``batch_size`` is set aside too).
      ``event_handler=`` and the other options are keywords.

    Args:
        reader: the training data, as for :meth:`Trainer.train` (in the design's form,
            a reader of batches).
        network: the :class:`~feedline.train.Network` whose new model is trained.
        device: where the model runs, as for :class:`Trainer`.
        seed: seeds the model's initial parameters, as for :class:`Trainer`.

    The other arguments are :meth:`Trainer.train`'s; one given both by position and by
    keyword, or too many positional arguments, raises ``TypeError``.

    >>> import numpy as np, torch
    >>> from feedline import Dataset, batch, data_type
    >>> from feedline.train import SGD, network
    >>> xs = np.linspace(-1, 1, 8, dtype=np.float32).reshape(-1, 1)
    >>> data = Dataset.from_arrays(xs, 2 * xs)                   # y = 2x
    >>> net = network(inputs={"x": data_type.dense_vector(1), "y": data_type.dense_vector(1)},
    ...               label="y", learning_rate=0.5, learning_method=SGD(),
    ...               batch_size=4)(torch.nn.Linear(1, 1, bias=False))
    >>> result = train(data, num_passes=30, network=net, seed=0)
    >>> round(result.trainer.model.weight.item(), 3), len(result.passes)
    (2.0, 30)
    >>> result = train(batch(data, 4), {"x": 0, "y": 1}, 4, 30, network=net, seed=0)  # the design's form
    >>> round(result.trainer.model.weight.item(), 3), result.global_step
    (2.0, 60)
    """
    if args and isinstance(args[0], (Mapping, list, tuple)):
        if len(args) > 3:
            raise TypeError(f"train(batch_reader, feeding, batch_size, num_passes) takes at most "
                            f"4 positional arguments, got {len(args) + 1}")
        taken = [n for n in ("feeding", "batch_size", "num_passes")[:len(args)] if n in options]
        if taken:
            raise TypeError(f"train() got `{taken[0]}` both by position and by keyword")
        given = dict(zip(("feeding", "batch_size", "num_passes"), args))
        given.update(options)
        feeding = given.pop("feeding")
        positive_int("batch_size", given.pop("batch_size", None))
        num_passes = given.pop("num_passes", 1)
        event_handler = given.pop("event_handler", None)
        if network.batch_size is not None:  # the batches are the reader's
            network = network(batch_size=None)
        return Trainer(network, device=device, seed=seed).train(
            reader, num_passes, event_handler, feeding, **given
        )
    if len(args) > 3:
        raise TypeError(f"train(reader, num_passes, event_handler, feeding) takes at most 4 "
                        f"positional arguments, got {len(args) + 1}")
    given = dict(zip(("num_passes", "event_handler", "feeding"), args))
    both = [n for n in given if n in options]
    if both:
        raise TypeError(f"train() got `{both[0]}` both by position and by keyword")
    given.update(options)
    return Trainer(network, device=device, seed=seed).train(reader, **given)


def test(
    reader: Any,
    feeding: Any = None,
    *,
    network: Network | None = None,
    trainer: Trainer | None = None,
    params: str | os.PathLike | None = None,
    batch_size: int | None = None,
    device: Any = None,
) -> TestResult:
    """Evaluate on ``reader``: ``trainer``'s model, or a new model of ``network`` with the
    parameters of ``params`` (a params export or a checkpoint).

    Args:
        reader: the test data, a Dataset or reader.
        feeding: the feeding map (``None``: declaration order).
        network: the network of a new model (used without ``trainer``; one of the two is
            needed, else ``TypeError``).
        trainer: the :class:`Trainer` whose model is evaluated.
        params: a params export or checkpoint loaded into the model first; ``None``: the
            model as it is.
        batch_size: samples per batch (default: the network's).
        device: where a new model runs (without ``trainer``).

    >>> import numpy as np, torch
    >>> from feedline import Dataset, data_type
    >>> from feedline.train import SGD, network
    >>> xs = np.linspace(-1, 1, 8, dtype=np.float32).reshape(-1, 1)
    >>> data = Dataset.from_arrays(xs, 2 * xs)                   # y = 2x
    >>> net = network(inputs={"x": data_type.dense_vector(1), "y": data_type.dense_vector(1)},
    ...               label="y", learning_rate=0.5, learning_method=SGD(),
    ...               batch_size=4)(torch.nn.Linear(1, 1, bias=False))
    >>> import os, tempfile
    >>> result = train(data, num_passes=30, network=net, seed=0)
    >>> path = os.path.join(tempfile.mkdtemp(), "params.flp")
    >>> result.trainer.save_params(path)
    >>> t = test(data, network=net, params=path)                # a fresh model loaded from the export
    >>> t.samples, round(t.cost, 6)
    (8, 0.0)
    """
    if trainer is None:
        if network is None:
            raise TypeError("test() needs `trainer` or `network`")
        trainer = Trainer(network, device=device)
        if params is not None:
            trainer.load_params(params)
    elif params is not None:
        trainer.load_params(params)
    return trainer.test(reader, feeding, batch_size=batch_size)


test.__test__ = False  # type: ignore[attr-defined]  # not a pytest test function
