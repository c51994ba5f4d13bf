"""Turning a list of items into one batch value.

``numpy_collate`` stacks structurally: numpy arrays and numbers are stacked into one
array with a new leading axis; tuples, lists and dicts are collated field by field;
``bytes``/``str`` and other objects stay a list.

>>> import numpy as np
>>> out = numpy_collate([(np.zeros(2), 1), (np.ones(2), 2)])
>>> out[0].shape, out[1].tolist()
((2, 2), [1, 2])
>>> numpy_collate([{"x": 1.5, "name": "a"}, {"x": 2.5, "name": "b"}])["name"]
['a', 'b']
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

__all__ = ["numpy_collate", "resolve_collate"]


def numpy_collate(items: list) -> Any:
    """Collate ``items`` into numpy arrays as the module docstring describes.

    Args:
        items: a non-empty list of items of the same structure; arrays of different
            shapes, or tuples of different lengths, raise ``ValueError``.

    >>> numpy_collate([(np.zeros(2), 1), (np.ones(2), 0)])
    (array([[0., 0.],
           [1., 1.]]), array([1, 0]))
    >>> numpy_collate([{"id": 1, "name": "a"}, {"id": 2, "name": "b"}])
    {'id': array([1, 2]), 'name': ['a', 'b']}
    """
    first = items[0]
    if isinstance(first, np.ndarray):
        shapes = {a.shape for a in items}
        if len(shapes) != 1:
            raise ValueError(
                f"numpy_collate: arrays in a batch must share a shape, got {sorted(shapes)}"
            )
        return np.stack(items)
    if isinstance(first, (bool, int, float, np.generic)):
        return np.asarray(items)
    if isinstance(first, Mapping):
        return {k: numpy_collate([it[k] for it in items]) for k in first}
    if isinstance(first, (tuple, list)):
        width = len(first)
        if any(len(it) != width for it in items):
            raise ValueError("numpy_collate: tuples in a batch must have the same length")
        cols = [numpy_collate([it[j] for it in items]) for j in range(width)]
        return tuple(cols) if isinstance(first, tuple) else cols
    return list(items)


def resolve_collate(collate: Callable | str | None) -> Callable | None:
    """``None`` -> no collation (lists), ``"numpy"`` -> :func:`numpy_collate`, or a callable.

    Args:
        collate: ``None``, ``"numpy"`` or a callable (returned as it is); another value
            raises ``ValueError``.

    >>> resolve_collate(None) is None, resolve_collate("numpy") is numpy_collate, resolve_collate(len) is len
    (True, True, True)
    >>> resolve_collate("torch")
    Traceback (most recent call last):
    ...
    ValueError: `collate` must be None, 'numpy' or a callable, got 'torch'
    """
    if collate is None:
        return None
    if collate == "numpy":
        return numpy_collate
    if callable(collate):
        return collate
    raise ValueError(f"`collate` must be None, 'numpy' or a callable, got {collate!r}")
