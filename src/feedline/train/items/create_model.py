"""``CreateModel``: build the network's model on a device (wrapped for data parallel).

Sets ``context.network``, ``context.module`` (the ``torch.nn.Module``),
``context.model`` (what forward calls: the module, or its ``DistributedDataParallel``
wrapper when ``torch.distributed`` runs with more than one process), ``context.device``,
``context.rank`` and ``context.world_size``; ``finalize`` sets ``context.model`` back to
the module (releasing the wrapper). Its checkpoint entry ``"model"`` holds the
module's ``state_dict``; restoring one made for a different model raises
:class:`~feedline.exceptions.CheckpointError` naming each mismatching parameter.

>>> import torch
>>> from feedline import data_type
>>> from feedline.train import Runner, network
>>> net = network(inputs={"x": data_type.dense_vector(2)}, cost=None)(torch.nn.Linear(2, 1))
>>> runner = Runner([CreateModel(net, device="cpu")])
>>> with runner:
...     print(runner.context.device, runner.context.world_size)
cpu 1
"""

from __future__ import annotations

from typing import Any

import torch

from feedline.train.checkpoint import check_params
from feedline.train.distributed import local_rank, rank_and_world_size, wrap_ddp
from feedline.train.network import Network
from feedline.train.runner import RunnerContext, RunnerItem

__all__ = ["CreateModel", "resolve_device"]


def resolve_device(device: Any = None) -> torch.device:
    """``device`` as a ``torch.device``.

    Args:
        device: anything ``torch.device`` takes (``"cpu"``, ``"cuda:1"``, a device);
            ``None`` picks ``cuda:<local rank>`` (modulo the GPU count) when CUDA is
            available, else the CPU.

    >>> import torch
    >>> resolve_device("cpu")
    device(type='cpu')
    >>> resolve_device(None) == (torch.device("cuda:0") if torch.cuda.is_available() else torch.device("cpu"))
    True
    """
    if device is None:
        if torch.cuda.is_available():
            return torch.device("cuda", local_rank() % torch.cuda.device_count())
        return torch.device("cpu")
    return torch.device(device)


class CreateModel(RunnerItem):
    """Create ``network``'s model on ``device`` in ``initialize``.

    Args:
        network: the :class:`~feedline.train.Network` whose model to build; anything
            else raises ``TypeError``.
        device: where the model goes (see :func:`resolve_device`; ``None``:
            ``cuda:<local rank>`` when CUDA is available, else the CPU).
        module: use this existing module instead of building a new one (a trainer that
            trains several times keeps its model); it is moved to ``device``.
        seed: build the model with torch's generator seeded with ``seed`` (the global
            generator is left as it was), so that every process and every run starts
            from the same parameters; ``None``: torch's global generator as it is.
        data_parallel: wrap the model in ``DistributedDataParallel`` when
            ``torch.distributed`` is initialized with more than one process;
            ``False``: never wrap.

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
    >>> with Runner([CreateModel(net, device="cpu", seed=0)]) as a, Runner([CreateModel(net, seed=0)]) as b:
    ...     same = torch.equal(a.context.model.weight, b.context.model.weight)
    >>> type(a.context.model).__name__, a.context.device, same
    ('Linear', device(type='cpu'), True)
    """

    state_key = "model"

    def __init__(
        self,
        network: Network,
        *,
        device: Any = None,
        module: torch.nn.Module | None = None,
        seed: int | None = None,
        data_parallel: bool = True,
    ) -> None:
        if not isinstance(network, Network):
            raise TypeError(f"`network` must be a feedline.train.Network, got {network!r}")
        self.network = network
        self._device = device
        self._module = module
        self.seed = seed
        self.data_parallel = bool(data_parallel)

    def _build(self) -> torch.nn.Module:
        if self._module is not None:
            return self._module
        if self.seed is None:
            return self.network.create_model()
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            return self.network.create_model()

    def initialize(self, context: RunnerContext, next_callback: Any) -> None:
        device = resolve_device(self._device)
        module = self._build().to(device)
        self._module = module
        rank, world = rank_and_world_size()
        context.network = self.network
        context.device = device
        context.module = module
        context.rank = rank
        context.world_size = world
        context.model = wrap_ddp(module, device) if (world > 1 and self.data_parallel) else module
        next_callback(context)

    def finalize(self, next_callback: Any) -> None:
        next_callback()
        # Drop the DistributedDataParallel wrapper now: it keeps the process group's
        # communication threads alive for as long as it lives, and one freed only while
        # the interpreter shuts down can abort the process.
        self.context.model = self.context.module

    def state_dict(self) -> dict[str, Any]:
        # live tensors, not copies: a checkpoint serialises them at once
        assert self._module is not None  # created by initialize(), which runs first
        return {"params": {k: v.detach() for k, v in self._module.state_dict().items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        params = state.get("params") if isinstance(state, dict) else None
        if params is None:
            from feedline.exceptions import CheckpointError

            raise CheckpointError("the model entry holds no parameters")
        if self._module is None:
            from feedline.exceptions import CheckpointError

            raise CheckpointError("the model is not created yet: initialize the runner "
                                  "before loading its state")
        check_params(self._module.state_dict(), params, what="checkpoint")
        self._module.load_state_dict(params)

    def __repr__(self) -> str:
        return f"CreateModel({self.network!r})"
