"""The random-access source both dataset modules return: scaled rows and int labels."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["ScaledSamples"]


class ScaledSamples:
    """Sample ``i`` is ``(images[i] * scale + offset as float32, int(labels[i]))``: the
    pixels stay ``uint8`` in memory and are converted one sample at a time.

    >>> s = ScaledSamples(np.array([[0, 255]], np.uint8), np.array([7]), 2 / 255, -1.0)
    >>> len(s), s[0][0].tolist(), s[0][1]
    (1, [-1.0, 1.0], 7)
    """

    def __init__(self, images: np.ndarray, labels: np.ndarray, scale: float, offset: float) -> None:
        if len(images) != len(labels):
            raise ValueError(f"{len(images)} images but {len(labels)} labels")
        self.images = images.reshape(len(images), -1)
        self.labels = labels
        self.scale = np.float32(scale)
        self.offset = np.float32(offset)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> tuple[Any, int]:
        row = self.images[i].astype(np.float32) * self.scale
        if self.offset:
            row += self.offset
        return row, int(self.labels[i])
