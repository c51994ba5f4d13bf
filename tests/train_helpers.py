"""Small training set-ups the train tests share: a linear network over 3 features, its
data, a runner item that crashes at a given step and one that records the batches."""

from __future__ import annotations

import numpy as np
import torch

from feedline import data_type
from feedline.train import SGD, RunnerItem, network

INPUTS = {"x": data_type.dense_vector(3), "label": data_type.integer_value(2)}


def make_data(n: int = 20, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` samples of 3 normal features, labelled by the sign of the first."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 3)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64)
    return x, y


def linear_net(**settings):
    """``network(inputs=INPUTS, ...)`` over a seeded ``Linear(3, 2)`` (SGD, rate 0.1)."""
    torch.manual_seed(0)
    settings.setdefault("learning_rate", 0.1)
    settings.setdefault("learning_method", SGD())
    return network(inputs=INPUTS, **settings)(torch.nn.Linear(3, 2))


class Crash(Exception):
    pass


class CrashAt(RunnerItem):
    """Raises :class:`Crash` before global step ``step``: a job killed mid-pass."""

    def __init__(self, step):
        self.step = step

    def on_batch_begin(self, next_callback):
        if self.context.global_step == self.step:
            raise Crash(f"simulated crash before step {self.step}")
        return next_callback()


class Grab(RunnerItem):
    """Records what the inner part of the chain sees per batch."""

    def __init__(self):
        self.batches = []

    def on_batch_begin(self, next_callback):
        ctx = self.context
        self.batches.append({k: v.clone() for k, v in ctx.inputs.items()})
        return next_callback()
