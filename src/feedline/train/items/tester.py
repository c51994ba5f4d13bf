"""``TestOnPassEnd``: run a test pass over other data after training passes.

It owns a small runner of its own — :class:`InheritModel` (the trainer's model,
updater and pass id), a :class:`~feedline.train.items.DataProvider` over the test data
and :class:`~feedline.train.items.TestOps` — initialized with the trainer's context as
its parent. At the end of every ``every_n_passes``-th pass it runs one test pass
*before* calling the inner items, so they (events, logs, early stopping) find the
result in ``context.test_result`` (``None`` after passes without a test).

Under data parallel every rank tests its own part of the test data
(``remainder="keep"``: each test sample exactly once over all ranks) and the sums are
reduced, so every rank gets the result over the whole test set.

>>> import numpy as np, torch
>>> from feedline import Dataset, data_type
>>> from feedline.train import Runner, SGD, network
>>> from feedline.train.items import *
>>> x = np.eye(4, dtype=np.float32)[[0, 1, 2, 3] * 4]; y = np.array([0, 1, 0, 1] * 4)
>>> net = network(inputs={"x": data_type.dense_vector(4), "label": data_type.integer_value(2)},
...               learning_rate=0.5, learning_method=SGD(), batch_size=4)(torch.nn.Linear(4, 2))
>>> data = Dataset.from_arrays(x, y)
>>> runner = Runner([CreateModel(net), LocalUpdater(), Counter(), DataProvider(data),
...                  TrainOps(), TestOnPassEnd(data, batch_size=16, every_n_passes=2)])
>>> with runner:
...     _ = runner.run_one_pass(); runner.context.test_result
...     _ = runner.run_one_pass(); runner.context.test_result.pass_id
1
"""

from __future__ import annotations

from typing import Any

from feedline._internal.validate import positive_int
from feedline.train.items.data_provider import DataProvider
from feedline.train.items.test_ops import TestOps
from feedline.train.runner import Runner, RunnerContext, RunnerItem

__all__ = ["TestOnPassEnd", "InheritModel"]

_INHERITED = ("network", "device", "module", "model", "rank", "world_size", "updater")


class InheritModel(RunnerItem):
    """Copies the parent context's model, device and updater in ``initialize``, and its
    ``pass_id`` at every pass.

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
    ...     tester = Runner([InheritModel(), DataProvider(data, state_key=None), TestOps()])
    ...     tester.initialize(runner.context)
    ...     tester.context.model is runner.context.model
    ...     tester.finalize()
    True
    """

    def initialize(self, context: RunnerContext, next_callback: Any) -> None:
        parent = context.parent
        if parent is None:
            raise RuntimeError("InheritModel needs a runner initialized with a parent context")
        for name in _INHERITED:
            if hasattr(parent, name):
                setattr(context, name, getattr(parent, name))
        next_callback(context)

    def on_pass_begin(self, next_callback: Any) -> None:
        pass_id = getattr(self.context.parent, "pass_id", None)
        if pass_id is None:  # the parent counts no passes: neither does this runner
            self.context.__dict__.pop("pass_id", None)
        else:
            self.context.pass_id = pass_id
        next_callback()

    def finalize(self, next_callback: Any) -> None:
        next_callback()
        # Forget the parent's model: a DistributedDataParallel wrapper kept here would
        # keep the process group (and its gloo threads) alive past destroy_process_group.
        for name in _INHERITED:
            self.context.__dict__.pop(name, None)


class TestOnPassEnd(RunnerItem):
    """Tests on ``data`` after every ``every_n_passes`` passes; see the module docstring.

    Args:
        data: the test data, a :class:`~feedline.Dataset` or a reader, as for
            :class:`~feedline.train.items.DataProvider`.
        feeding: the feeding map, as for the training data (``None``: declaration
            order).
        batch_size: batch the test samples; a positive int (default: the network's;
            ``None`` on both: ``data`` yields batches).
        every_n_passes: test after passes ``n - 1``, ``2n - 1``, ...; a positive int
            (else ``ValueError``/``TypeError``).
        remainder: how a data-parallel split treats the last samples: ``"keep"``
            (each test sample exactly once over all ranks), ``"pad"`` or ``"drop"``
            (see :class:`~feedline.train.items.DataProvider`).
        shard: ``False``: every rank tests all of ``data`` (a stream that cannot be
            split; the means are unchanged, the sample count is multiplied by the
            number of ranks).
        prefetch: convert up to this many test batches ahead in a background thread (0:
            in the training thread); it never reads ahead into the next test pass.

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
    >>> history = History()
    >>> with trainer(history, TestOnPassEnd(data)) as runner:
    ...     _ = runner.run(2)
    >>> [(p.test.pass_id, p.test.samples) for p in history.passes]
    [(0, 4), (1, 4)]
    """

    __test__ = False  # not a pytest test class

    def __init__(
        self,
        data: Any,
        *,
        feeding: Any = None,
        batch_size: int | None = None,
        every_n_passes: int = 1,
        remainder: str = "keep",
        shard: bool = True,
        prefetch: int = 0,
    ) -> None:
        self.every_n_passes = positive_int("every_n_passes", every_n_passes)
        self.provider = DataProvider(data, feeding=feeding, batch_size=batch_size, shard=shard,
                                     remainder=remainder, prefetch=prefetch, state_key=None,
                                     prefetch_next_pass=False)
        self.runner = Runner([InheritModel(), self.provider, TestOps()])

    def initialize(self, context: RunnerContext, next_callback: Any) -> None:
        context.test_result = None
        self.runner.initialize(parent=context)
        next_callback(context)

    def run_test(self) -> Any:
        """Run one test pass now; return (and set ``context.test_result`` to) its result."""
        self.runner.run_one_pass()
        result = self.runner.context.test_result
        self.context.test_result = result
        return result

    def on_pass_end(self, next_callback: Any) -> None:
        ctx = self.context
        if (getattr(ctx, "pass_id", 0) + 1) % self.every_n_passes == 0:
            self.run_test()
        else:
            ctx.test_result = None
        next_callback()

    def finalize(self, next_callback: Any) -> None:
        self.runner.finalize()
        next_callback()

    def __repr__(self) -> str:
        return f"TestOnPassEnd(every_n_passes={self.every_n_passes})"
