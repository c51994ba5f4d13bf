"""``LocalUpdater``: the optimizer and everything around a parameter update.

PaddlePaddle's ParameterUpdater has ``startPass``, ``startBatch``, ``update``,
``finishBatch``, ``finishPass`` and, for model averaging, ``apply``/``restore``. The
:class:`LocalUpdater` keeps those steps, with the module wiki's arguments and results,
and PyTorch underneath:

=================================  ==================================================================
step                               what it does
=================================  ==================================================================
``start_pass()``                   called before every pass (a hook for subclasses)
``start_batch(batch_size=None)``   clears the gradients (``zero_grad(set_to_none=True)``), records
                                   ``batch_size`` and returns the :class:`PassType` of the batch
                                   (``PassType.TRAIN``)
``update(param=None)``             after the backward pass. No argument: clip the gradients (each
                                   element to ``[-gradient_clipping_threshold, +threshold]``, then
                                   the global norm to ``max_grad_norm``, when set) and take one
                                   optimizer step. ``update(param)`` for each parameter in turn, as
                                   PaddlePaddle's trainer loop does: the step is taken once every
                                   trainable parameter has been given (the same step as
                                   ``update()``); parameters given without the rest are stepped
                                   alone at ``finish_batch``
``finish_batch(cost=None)``        records the batch's ``cost`` (``last_cost``) and adds the new
                                   parameters to the model average, when configured
``finish_pass()``                  called after every pass (a hook for subclasses)
``apply()`` / ``restore()``        swap the averaged parameters in and the trained ones back (no-ops
                                   without a model average)
=================================  ==================================================================

L2 regularisation is the optimizer's ``weight_decay`` (``rate * w`` added to each
gradient). :class:`~feedline.train.items.BasicLocalParameterUpdater` also answers to
the wiki's camel-case names (``startPass``, ``startBatch``, ``finishBatch``, ...).

As a runner item it builds the optimizer in ``initialize`` (from ``context.network``'s
``learning_method``, ``learning_rate`` and ``regularization``, over
``context.module``'s trainable parameters), sets ``context.updater`` and
``context.optimizer``, and runs the pass and batch steps from its hooks: ``start_pass``
and ``start_batch()`` before ``next_callback()`` (the batch is read by an inner item,
so its size is not known yet), ``finish_batch(context.cost)`` and ``finish_pass``
before it too (``update`` is the train ops' call). Its checkpoint entry ``"updater"``
holds the optimizer's state, the update count and the model average's sums.

Counters: ``num_updates`` — optimizer steps taken.

>>> import numpy as np, torch
>>> from feedline import Dataset, data_type
>>> from feedline.train import Runner, SGD, network
>>> from feedline.train.items import *
>>> x = np.eye(4, dtype=np.float32)[[0, 1, 2, 3] * 4]; y = np.array([0, 1, 0, 1] * 4)
>>> net = network(inputs={"x": data_type.dense_vector(4), "label": data_type.integer_value(2)},
...               learning_rate=0.5, learning_method=SGD(), batch_size=4)(torch.nn.Linear(4, 2))
>>> data = Dataset.from_arrays(x, y)
>>> runner = Runner([CreateModel(net), LocalUpdater(), DataProvider(data), TrainOps()])
>>> with runner:
...     _ = runner.run_one_pass()
...     updater = runner.context.updater
>>> updater.num_updates, type(updater.optimizer).__name__
(4, 'SGD')
"""

from __future__ import annotations

import enum
from typing import Any

import torch

from feedline._internal.validate import positive_int
from feedline.exceptions import CheckpointError
from feedline.train.model_average import ModelAverager
from feedline.train.runner import RunnerContext, RunnerItem

__all__ = ["LocalUpdater", "SparseDenseOptimizer", "PassType", "UpdaterSteps"]


class PassType(enum.Enum):
    """What a batch is for: PaddlePaddle's ``PASS_TRAIN`` / ``PASS_TEST``, returned by
    :meth:`LocalUpdater.start_batch`.

    >>> PassType.TRAIN.value
    'train'
    """

    TRAIN = "train"
    TEST = "test"


class SparseDenseOptimizer:
    """Several torch optimizers stepped as one (the dense parameters' and the sparse
    embedding tables'), with the ``torch.optim.Optimizer`` calls the updater uses.

    ``param_groups`` lists the groups of all parts in order; ``state_dict()`` is
    ``{"param_groups": ..., "parts": [each part's state_dict]}``.

    Args:
        parts: the torch optimizers, stepped in this order.

    >>> import torch
    >>> emb = torch.nn.Embedding(4, 2, sparse=True); lin = torch.nn.Linear(2, 1)
    >>> opt = SparseDenseOptimizer([torch.optim.SGD(lin.parameters(), lr=0.1),
    ...                             torch.optim.SparseAdam([emb.weight], lr=0.1)])
    >>> lin(emb(torch.tensor([1]))).sum().backward(); opt.step()
    >>> len(opt.param_groups), sorted(opt.state_dict())
    (2, ['param_groups', 'parts'])
    """

    def __init__(self, parts: list) -> None:
        self.parts = list(parts)

    @property
    def param_groups(self) -> list:
        return [g for part in self.parts for g in part.param_groups]

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear the gradients of every part.

        Args:
            set_to_none: passed to each part's ``zero_grad``: set the gradients to
                ``None`` instead of zeroing them.
        """
        for part in self.parts:
            part.zero_grad(set_to_none=set_to_none)

    def step(self) -> None:
        """One step of every part."""
        for part in self.parts:
            part.step()

    def state_dict(self) -> dict[str, Any]:
        """The parts' states (see the class docstring)."""
        parts = [part.state_dict() for part in self.parts]
        return {"param_groups": [g for sd in parts for g in sd["param_groups"]], "parts": parts}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned; ``ValueError`` when it does not fit.

        Args:
            state: a dict whose ``"parts"`` list holds one state per part, in order.
        """
        parts = state.get("parts")
        if not isinstance(parts, list) or len(parts) != len(self.parts):
            raise ValueError(f"expected the states of {len(self.parts)} optimizers")
        for part, sd in zip(self.parts, parts):
            part.load_state_dict(sd)

    def __repr__(self) -> str:
        return f"SparseDenseOptimizer({', '.join(type(p).__name__ for p in self.parts)})"


class UpdaterSteps(RunnerItem):
    """The runner hooks that run an updater's pass and batch steps once each: the base
    of :class:`LocalUpdater` (which steps itself) and of
    :class:`~feedline.train.items.BasicLocalParameterUpdaterOps` (which steps the
    context's updater). :meth:`stepped` names the updater to step, or ``None`` to pass
    every hook straight through.

    >>> calls = []
    >>> class Log:
    ...     def start_pass(self): calls.append("start_pass")
    ...     def start_batch(self, batch_size=None): calls.append("start_batch")
    ...     def finish_batch(self, cost=None): calls.append(f"finish_batch({cost})")
    ...     def finish_pass(self): calls.append("finish_pass")
    >>> class Steps(UpdaterSteps):
    ...     def stepped(self): return Log()
    >>> class OneBatch(RunnerItem):
    ...     def on_pass_begin(self, next_callback):
    ...         self.context.n = 0
    ...         next_callback()
    ...     def on_batch_begin(self, next_callback):
    ...         self.context.n += 1
    ...         self.context.cost = 0.5
    ...         return self.context.n > 1 or next_callback()
    >>> from feedline.train import Runner
    >>> with Runner([Steps(), OneBatch()]) as runner:
    ...     _ = runner.run_one_pass()
    >>> calls
    ['start_pass', 'start_batch', 'finish_batch(0.5)', 'start_batch', 'finish_pass']
    """

    def stepped(self) -> Any:
        """The updater whose steps this item runs, or ``None``."""
        return None

    def on_pass_begin(self, next_callback: Any) -> None:
        updater = self.stepped()
        if updater is not None:
            updater.start_pass()
        next_callback()

    def on_batch_begin(self, next_callback: Any) -> bool:
        updater = self.stepped()
        if updater is not None:
            updater.start_batch()
        return next_callback()

    def on_batch_end(self, next_callback: Any) -> bool:
        updater = self.stepped()
        if updater is not None:
            updater.finish_batch(getattr(self.context, "cost", None))
        return next_callback()

    def on_pass_end(self, next_callback: Any) -> None:
        updater = self.stepped()
        if updater is not None:
            updater.finish_pass()
        next_callback()


class LocalUpdater(UpdaterSteps):
    """The optimizer, gradient clipping and model averaging; see the module docstring.

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
    ...     opt = runner.context.optimizer
    >>> type(opt).__name__, opt.param_groups[0]["lr"]
    ('SGD', 0.1)
    """

    state_key = "updater"

    def __init__(self) -> None:
        self.optimizer: torch.optim.Optimizer | SparseDenseOptimizer | None = None
        self.average: ModelAverager | None = None
        self.params: list[torch.nn.Parameter] = []
        self.dense_params: list[torch.nn.Parameter] = []
        self.sparse_params: list[torch.nn.Parameter] = []
        self.num_updates = 0
        self.batch_size: int | None = None
        self.last_cost: float | None = None
        self._pending: dict[int, torch.nn.Parameter] = {}
        self._module: torch.nn.Module | None = None

    def stepped(self) -> LocalUpdater:
        return self

    def initialize(self, context: RunnerContext, next_callback: Any) -> None:
        current = context.__dict__.get("updater")
        if current is not None and current is not self and current in context.runner.items:
            raise ValueError(
                f"this runner has two updaters, {current!r} and {self!r}: each would step the "
                "model; keep one (BasicLocalParameterUpdaterOps needs none of its own)"
            )
        module = context.module
        if self.optimizer is None or module is not self._module:
            self.setup(context.network, module)
        context.updater = self
        context.optimizer = self.optimizer
        next_callback(context)

    def setup(self, network: Any, module: torch.nn.Module) -> None:
        """Build the optimizer (and model averager) for ``module`` from ``network``.

        Resets ``num_updates`` to 0; ``initialize`` calls it when the module changed.

        Args:
            network: the :class:`~feedline.train.Network` whose ``learning_method``,
                ``learning_rate``, ``regularization``, ``model_average`` and clipping
                settings apply.
            module: the model; its parameters with ``requires_grad`` are trained (none
                raises ``ValueError``), sparse embedding tables with the learning
                method's sparse form.
        """
        self._module = module
        self.network = network
        self.params = [p for p in module.parameters() if p.requires_grad]
        if not self.params:
            raise ValueError("the model has no trainable parameters")
        decay = network.regularization.rate if network.regularization is not None else 0.0
        sparse_ids = {id(m.weight) for m in module.modules()
                      if isinstance(m, (torch.nn.Embedding, torch.nn.EmbeddingBag)) and m.sparse}
        self.sparse_params = [p for p in self.params if id(p) in sparse_ids]
        self.dense_params = [p for p in self.params if id(p) not in sparse_ids]
        if not self.sparse_params:
            self.optimizer = network.learning_method.build(
                self.params, learning_rate=network.learning_rate, weight_decay=decay
            )
        else:
            parts = [network.learning_method.build_sparse(self.sparse_params,
                                                          learning_rate=network.learning_rate)]
            if self.dense_params:
                parts.insert(0, network.learning_method.build(
                    self.dense_params, learning_rate=network.learning_rate, weight_decay=decay))
            self.optimizer = SparseDenseOptimizer(parts)
        self.average = (
            ModelAverager(self.params, network.model_average)
            if network.model_average is not None else None
        )
        self.num_updates = 0

    # ------------------------------------------------------------------ Paddle's steps
    def start_pass(self) -> None:
        """Called before every pass."""

    def start_batch(self, batch_size: int | None = None) -> PassType:
        """Clear the gradients before a batch's backward pass; return the batch's
        :class:`PassType`.

        Args:
            batch_size: the batch's number of samples, recorded as ``batch_size``; a
                positive int, or ``None`` when not known yet.
        """
        if batch_size is not None:
            positive_int("batch_size", batch_size)
        assert self.optimizer is not None  # built by initialize(), which runs first
        self.optimizer.zero_grad(set_to_none=True)
        self._pending.clear()
        self.batch_size = batch_size
        return PassType.TRAIN

    def update(self, param: torch.nn.Parameter | None = None) -> None:
        """Clip the gradients and take one optimizer step; ``update(param)``: one
        parameter of the step (see the module docstring).

        Args:
            param: ``None``: step every parameter now. One of the model's trainable
                parameters (else ``ValueError``): the step is taken once every one has
                been given.
        """
        if param is None:
            self._pending.clear()
            self._step(self.dense_params, self.params)
            return
        if not any(param is p for p in self.params):
            raise ValueError(
                f"`param` must be one of the model's {len(self.params)} trainable parameters, "
                f"got {type(param).__name__} of shape {tuple(getattr(param, 'shape', ()))}"
            )
        self._pending[id(param)] = param
        if len(self._pending) == len(self.params):
            self._pending.clear()
            self._step(self.dense_params, self.params)

    def _step(self, dense: list[torch.nn.Parameter], params: list[torch.nn.Parameter]) -> None:
        net = self.network
        if net.gradient_clipping_threshold is not None:
            torch.nn.utils.clip_grad_value_(dense, net.gradient_clipping_threshold)
        if net.max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(dense, net.max_grad_norm)
        assert self.optimizer is not None  # built by initialize(), which runs first
        if len(params) == len(self.params):
            self.optimizer.step()
        else:  # a step of some parameters only: the others' gradients are hidden from it
            chosen = {id(p) for p in params}
            hidden = [(p, p.grad) for p in self.params if id(p) not in chosen]
            for p, _ in hidden:
                p.grad = None
            try:
                self.optimizer.step()
            finally:
                for p, grad in hidden:
                    p.grad = grad
        self.num_updates += 1

    def finish_batch(self, cost: float | None = None) -> None:
        """Step the parameters given to :meth:`update` without the rest (if any); add the
        updated parameters to the model average.

        Args:
            cost: the batch's cost, recorded as ``last_cost`` (a float, or ``None``).
        """
        if self._pending:
            given = list(self._pending.values())
            self._pending.clear()
            sparse = {id(p) for p in self.sparse_params}
            self._step([p for p in given if id(p) not in sparse], given)
        self.last_cost = None if cost is None else float(cost)
        if self.average is not None:
            self.average.accumulate()

    def finish_pass(self) -> None:
        """Called after every pass."""

    def apply(self) -> None:
        """Swap the averaged parameters in (no-op without model averaging)."""
        if self.average is not None:
            self.average.apply()

    def restore(self) -> None:
        """Swap the trained parameters back (no-op when nothing is applied)."""
        if self.average is not None:
            self.average.restore()

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        assert self.optimizer is not None  # built by initialize(), which runs first
        return {
            "optimizer": self.optimizer.state_dict(),
            "num_updates": self.num_updates,
            "average": None if self.average is None else self.average.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for key in ("optimizer", "num_updates", "average"):
            if key not in state:
                raise CheckpointError(f"the updater entry lacks {key!r}")
        if self.optimizer is None:
            raise CheckpointError("the updater has no optimizer yet: initialize the runner "
                                  "before loading its state")
        saved_groups = state["optimizer"].get("param_groups", [])
        mine = self.optimizer.state_dict()["param_groups"]
        saved_sizes = [len(g["params"]) for g in saved_groups]
        my_sizes = [len(g["params"]) for g in mine]
        if saved_sizes != my_sizes:
            raise CheckpointError(
                f"the optimizer state is for parameter groups of sizes {saved_sizes}, this "
                f"optimizer has {my_sizes}"
            )
        if (state["average"] is None) != (self.average is None):
            have = "has" if state["average"] is not None else "has no"
            want = "uses" if self.average is not None else "does not use"
            raise CheckpointError(f"the checkpoint {have} model average state, the network {want} one")
        try:
            self.optimizer.load_state_dict(state["optimizer"])
        except (ValueError, KeyError, RuntimeError) as exc:
            raise CheckpointError(f"the optimizer state does not fit this optimizer: {exc}") from exc
        if self.average is not None:
            self.average.load_state_dict(state["average"])
        self.num_updates = int(state["num_updates"])

    def __repr__(self) -> str:
        return "LocalUpdater()"
