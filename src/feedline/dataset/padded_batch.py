"""``Dataset.padded_batch``: batch items of different shapes by padding them (tf.data's
``padded_batch``).

An item is an array-like component (a numpy array, a number, a list of numbers) or a
``dict``/``tuple`` of them, nested at will; every item of a batch has the same structure.
Each component is stacked into one array of shape ``(batch, *dims)``:

* ``padded_shapes=None`` (default): every dimension is padded to the largest size of
  that dimension in the batch (the components must have the same rank);
* ``padded_shapes`` given: one shape per component, in the item's structure (a tuple of
  ints and ``None``/``-1``; a single shape applies to a bare component). An int pads to
  exactly that size — a component larger than it raises ``ValueError`` naming the
  field, the item and both shapes; ``None`` pads to the largest in the batch.

``padding_values`` is one value for every component, or one per component in the item's
structure; the default is 0 (``""``/``b""`` for string arrays). The batch's dtype is
``numpy.result_type`` of the batch's components. ``drop_remainder=True`` drops a last
batch smaller than ``batch_size``. Fields are named in errors by their path (``'x'``,
``'x'[1]``; ``item`` for a bare component). The state is the parent's state between two
batches, as for :meth:`Dataset.batch`. :func:`pad_batch` pads one list of items and is
what :func:`~feedline.dataset.bucket.bucket_by_length` uses with ``pad=True``.

>>> ds = Dataset.from_iterable([[1], [2, 3], [4, 5, 6]]).padded_batch(2)
>>> [b.tolist() for b in ds.to_list()]
[[[1, 0], [2, 3]], [[4, 5, 6]]]
>>> items = [{"ids": [1, 2], "label": 0}, {"ids": [3], "label": 1}]
>>> out = Dataset.from_iterable(items).padded_batch(
...     2, padded_shapes={"ids": (4,), "label": ()}, padding_values={"ids": -1, "label": 0}
... ).to_list()[0]
>>> out["ids"].tolist(), out["label"].tolist()
([[1, 2, -1, -1], [3, -1, -1, -1]], [0, 1])
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from feedline.dataset.base import Dataset
from feedline.dataset.batch import BatchDataset

__all__ = ["PaddedBatchDataset", "pad_batch", "PadBatch"]

_MISSING = object()


def _label(path: str) -> str:
    return path or "item"


def _shape_spec(path: str, spec: Any) -> tuple[int | None, ...] | None:
    if spec is None:
        return None
    if isinstance(spec, (int, np.integer)) and not isinstance(spec, bool):
        spec = (spec,)
    if not isinstance(spec, (tuple, list)) or not all(
        d is None or (isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= -1)
        for d in spec
    ):
        raise ValueError(
            f"field {_label(path)}: a padded shape must be a tuple of ints >= 0 or None, "
            f"got {spec!r}"
        )
    return tuple(None if d is None or d == -1 else int(d) for d in spec)


def _default_padding(dtype: np.dtype) -> Any:
    if dtype.kind == "U":
        return ""
    if dtype.kind in "SO":
        return b""
    return 0


def _pad_component(path: str, values: list[Any], shape: Any, fill: Any) -> np.ndarray:
    arrays = [np.asarray(v) for v in values]
    dtype = np.result_type(*arrays) if all(a.dtype.kind not in "OSU" for a in arrays) \
        else arrays[0].dtype
    rank = arrays[0].ndim
    for k, a in enumerate(arrays):
        if a.ndim != rank:
            raise ValueError(
                f"field {_label(path)}: items in a batch must have the same rank, item 0 has "
                f"shape {arrays[0].shape}, item {k} has shape {a.shape}"
            )
    spec = _shape_spec(path, shape)
    if spec is not None and len(spec) != rank:
        raise ValueError(
            f"field {_label(path)}: padded shape {spec} has {len(spec)} dimensions, the items "
            f"have {rank} (shape {arrays[0].shape})"
        )
    largest = [max(a.shape[d] for a in arrays) for d in range(rank)]
    target = list(largest)
    if spec is not None:
        for d, size in enumerate(spec):
            if size is None:
                continue
            if largest[d] > size:
                k = next(k for k, a in enumerate(arrays) if a.shape[d] > size)
                raise ValueError(
                    f"field {_label(path)}: item {k} has shape {arrays[k].shape}, larger than "
                    f"the padded shape {spec} in dimension {d}"
                )
            target[d] = size
    if fill is _MISSING:
        fill = _default_padding(np.dtype(dtype))
    elif np.dtype(dtype).kind in "SU":  # widen so that the padding value fits
        dtype = np.result_type(dtype, np.asarray(fill).dtype)
    try:
        out = np.full((len(arrays), *target), fill, dtype=dtype)
    except (ValueError, TypeError) as exc:
        raise ValueError(
            f"field {_label(path)}: padding value {fill!r} does not fit dtype {dtype}"
        ) from exc
    for k, a in enumerate(arrays):
        where: tuple[int | slice, ...] = (k, *(slice(0, s) for s in a.shape))
        out[where] = a
    return out


def _structure_of(spec: Any, path: str, key: Any, what: str) -> Any:
    """The part of a per-field ``spec`` (shapes or values) for ``key``, or the whole spec
    when it is not a structure."""
    if isinstance(spec, dict):
        if key not in spec:
            raise ValueError(f"`{what}` has no entry for field {path or 'item'}")
        return spec[key]
    return spec


def _check_alike(path: str, items: list[Any], alike: Callable[[Any], bool], unlike: str) -> None:
    """Raise ValueError naming the first item for which ``alike`` is false."""
    for k, item in enumerate(items):
        if not alike(item):
            raise ValueError(f"field {_label(path)}: item {k} {unlike}")


def _pad(path: str, items: list[Any], shapes: Any, values: Any) -> Any:
    first = items[0]
    if isinstance(first, dict):
        keys = list(first)
        _check_alike(path, items, lambda item: isinstance(item, dict) and list(item) == keys,
                     f"does not have the fields {keys} of item 0")
        out = {}
        for key in keys:
            sub = f"{path}[{key!r}]" if path else repr(key)
            if shapes is not None and not isinstance(shapes, dict):
                _bad_structure(path, "padded_shapes", shapes)
            shape = None if shapes is None else _structure_of(shapes, sub, key, "padded_shapes")
            value = _structure_of(values, sub, key, "padding_values") \
                if isinstance(values, dict) else values
            out[key] = _pad(sub, [item[key] for item in items], shape, value)
        return out
    if isinstance(first, tuple):
        n = len(first)
        _check_alike(path, items, lambda item: isinstance(item, tuple) and len(item) == n,
                     f"is not a tuple of {n} like item 0")
        if shapes is not None and not (isinstance(shapes, (tuple, list)) and len(shapes) == n):
            _bad_structure(path, "padded_shapes", shapes)
        if isinstance(values, tuple) and len(values) != n:
            raise ValueError(
                f"`padding_values` for field {_label(path)} has {len(values)} entries, "
                f"the items have {n}"
            )
        return tuple(
            _pad(f"{path}[{i}]", [item[i] for item in items],
                 None if shapes is None else shapes[i],
                 values[i] if isinstance(values, tuple) else values)
            for i in range(n)
        )
    if isinstance(values, (dict, tuple)):
        raise ValueError(f"`padding_values` for field {_label(path)} must be one value")
    return _pad_component(path, items, shapes, values)


def _bad_structure(path: str, what: str, spec: Any) -> Any:
    raise ValueError(f"`{what}` does not match the structure of the items at field "
                     f"{_label(path)}: {spec!r}")


def pad_batch(items: list[Any], *, padded_shapes: Any = None,
              padding_values: Any = _MISSING) -> Any:
    """Stack ``items`` into one padded batch (see the module docstring).

    Args:
        items: the items of the batch, all of the same structure (an empty list raises
            ``ValueError``).
        padded_shapes: ``None`` pads every dimension to the largest in the batch; else
            one shape per component, an int padding to exactly that size (a larger
            component raises ``ValueError``), ``None``/``-1`` to the largest.
        padding_values: one value for every component or one per component; when not
            given, 0 (``""``/``b""`` for string arrays).

    >>> pad_batch([(np.ones(2), 1), (np.ones(3), 2)], padding_values=(-1.0, 0))[0].tolist()
    [[1.0, 1.0, -1.0], [1.0, 1.0, 1.0]]
    >>> pad_batch([[1, 2, 3]], padded_shapes=(2,))
    Traceback (most recent call last):
    ...
    ValueError: field item: item 0 has shape (3,), larger than the padded shape (2,) in dimension 0
    """
    if not items:
        raise ValueError("pad_batch needs at least one item")
    return _pad("", list(items), padded_shapes, padding_values)


class PadBatch:
    """``pad_batch`` with fixed options, as a picklable collate function.

    Args:
        padded_shapes: as for :func:`pad_batch`.
        padding_values: as for :func:`pad_batch` (when not given: 0, ``""`` for strings).

    >>> PadBatch(padding_values=9)([[1], [1, 2]]).tolist()
    [[1, 9], [1, 2]]
    """

    def __init__(self, *, padded_shapes: Any = None, padding_values: Any = _MISSING) -> None:
        self.padded_shapes = padded_shapes
        self.padding_values = padding_values

    def __call__(self, items: list[Any]) -> Any:
        return pad_batch(items, padded_shapes=self.padded_shapes,
                         padding_values=self.padding_values)


class PaddedBatchDataset(BatchDataset):
    """Padded batches of ``batch_size`` consecutive items; see the module docstring.

    Args:
        parent: the dataset read.
        batch_size: items per batch (a positive int; :meth:`Dataset.padded_batch` checks
            it).
        padded_shapes: as for :func:`pad_batch`.
        padding_values: as for :func:`pad_batch`.
        drop_remainder: drop a final batch smaller than ``batch_size``.

    >>> ds = Dataset.from_iterable([np.array([1]), np.array([2, 3])]).padded_batch(2)
    >>> type(ds).__name__, ds.to_list()[0].tolist()
    ('PaddedBatchDataset', [[1, 0], [2, 3]])
    """

    def __init__(self, parent: Dataset, batch_size: int, *, padded_shapes: Any = None,
                 padding_values: Any = _MISSING, drop_remainder: bool = False) -> None:
        collate: Callable = PadBatch(padded_shapes=padded_shapes, padding_values=padding_values)
        super().__init__(parent, batch_size, drop_remainder=drop_remainder, collate=collate)

    @property
    def name(self) -> str:
        return f"padded_batch({self._batch_size})"
