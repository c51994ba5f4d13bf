"""``SaveParamsOnPassEnd``: export the parameters for inference after each pass.

After the inner items' ``on_pass_end`` it writes
:func:`~feedline.train.checkpoint.save_params` to
``directory/params-pass-<pass id>.flp`` (``pattern`` with ``{pass_id}``), every
``every_n_passes`` passes. With ``averaged=True`` (default) and a model average, the
file holds the averaged parameters — the ones a test pass uses. Under data parallel
only rank 0 writes.

>>> import numpy as np, torch
>>> from feedline import Dataset, data_type
>>> from feedline.train import Runner, SGD, network
>>> from feedline.train.items import *
>>> x = np.eye(4, dtype=np.float32)[[0, 1, 2, 3] * 4]; y = np.array([0, 1, 0, 1] * 4)
>>> net = network(inputs={"x": data_type.dense_vector(4), "label": data_type.integer_value(2)},
...               learning_rate=0.5, learning_method=SGD(), batch_size=4)(torch.nn.Linear(4, 2))
>>> data = Dataset.from_arrays(x, y)
>>> import tempfile
>>> saver = SaveParamsOnPassEnd(tempfile.mkdtemp())
>>> with Runner([CreateModel(net), LocalUpdater(), Counter(), DataProvider(data), TrainOps(),
...              saver]) as runner:
...     _ = runner.run(2)
>>> [p.rsplit("/", 1)[1] for p in saver.paths]
['params-pass-00000.flp', 'params-pass-00001.flp']
"""

from __future__ import annotations

import os
from typing import Any

from feedline._internal.validate import positive_int
from feedline.train.checkpoint import save_params
from feedline.train.runner import RunnerItem

__all__ = ["SaveParamsOnPassEnd"]


class SaveParamsOnPassEnd(RunnerItem):
    """Writes a params export after passes; see the module docstring.

    Counters: ``paths`` — the files written, in order.

    Args:
        directory: where the files go.
        every_n_passes: write after passes ``n - 1``, ``2n - 1``, ...; a positive int
            (else ``ValueError``/``TypeError``).
        averaged: with a model average, export the averaged parameters (the ones a test
            pass uses); ``False``: the trained ones.
        pattern: the file name, formatted with ``pass_id``; it must contain
            ``{pass_id`` (else ``ValueError``).

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
    >>> import os, tempfile
    >>> saver = SaveParamsOnPassEnd(tempfile.mkdtemp(), every_n_passes=2)
    >>> with trainer(saver) as runner:
    ...     _ = runner.run(4)
    >>> [os.path.basename(p) for p in saver.paths]           # after passes 1 and 3
    ['params-pass-00001.flp', 'params-pass-00003.flp']
    """

    def __init__(self, directory: str | os.PathLike, *, every_n_passes: int = 1,
                 averaged: bool = True, pattern: str = "params-pass-{pass_id:05d}.flp") -> None:
        self.directory = os.fspath(directory)
        self.every_n_passes = positive_int("every_n_passes", every_n_passes)
        self.averaged = bool(averaged)
        if "{pass_id" not in pattern:
            raise ValueError(f"`pattern` must contain {{pass_id}}, got {pattern!r}")
        self.pattern = pattern
        self.paths: list[str] = []

    def on_pass_end(self, next_callback: Any) -> None:
        next_callback()
        ctx = self.context
        pass_id = getattr(ctx, "pass_id", len(self.paths))
        if (pass_id + 1) % self.every_n_passes or getattr(ctx, "rank", 0) != 0:
            return
        path = os.path.join(self.directory, self.pattern.format(pass_id=pass_id))
        updater = getattr(ctx, "updater", None) if self.averaged else None
        if updater is not None:
            updater.apply()
        try:
            save_params(path, ctx.module, metadata={"pass_id": pass_id})
        finally:
            if updater is not None:
                updater.restore()
        self.paths.append(path)
