"""The random-access source both dataset modules return: converted rows, int labels."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["Samples"]


class Samples:
    """Sample ``i`` is ``(pixels(images[i]), int(labels[i]))``: the images stay ``uint8``
    in memory and are converted one sample at a time by ``pixels`` (a module-level
    function, so the source pickles into worker processes).

    >>> s = Samples(np.array([[0, 255]], np.uint8), np.array([7]), lambda row: row / 255.0)
    >>> len(s), s[0][0].tolist(), s[0][1]
    (1, [0.0, 1.0], 7)
    """

    def __init__(self, images: np.ndarray, labels: np.ndarray,
                 pixels: Callable[[np.ndarray], Any]) -> None:
        if len(images) != len(labels):
            raise ValueError(f"{len(images)} images but {len(labels)} labels")
        self.images = images.reshape(len(images), -1)
        self.labels = labels
        self.pixels = pixels

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> tuple[Any, int]:
        return self.pixels(self.images[i]), int(self.labels[i])
