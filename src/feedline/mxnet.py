"""MXNet's data-iterator API over feedline pipelines: ``DataBatch``, ``DataDesc``, ``DataIter``.

Training code written against ``mx.io`` iterators reads ``batch.data[0]``,
``batch.label[0]``, ``batch.pad``, ``batch.index``, ``it.provide_data`` /
``it.provide_label`` and calls ``it.reset()``, ``it.next()``, ``it.iter_next()``,
``it.getdata()``, ``it.getlabel()``, ``it.getpad()``, ``it.getindex()``. This module gives
those names to any feedline pipeline:

* :class:`DataDesc` — ``(name, shape, dtype, layout)``, a namedtuple like MXNet's.
* :class:`DataBatch` — a batch with MXNet's attributes (``data`` and ``label`` are lists
  of arrays, ``pad``, ``index``, ``bucket_key``, ``provide_data``, ``provide_label``) that
  is *also* a 2-tuple ``(data[0], label[0])``, so ``for data, label in it`` keeps working.
* :class:`DataIter` — MXNet's iterator protocol over a :class:`~feedline.Dataset` whose
  items are batches (``(data, label)`` tuples, a bare ``data`` array, or dicts of named
  arrays). :class:`feedline.image.ImageRecordIter` is one of these.
* :func:`torch_device` — MXNet's ``ctx`` (``"cpu"``, ``"gpu"``, ``"gpu(1)"``, an
  ``mx.Context``-like object) as a torch device.

``pad`` is MXNet's: the number of rows at the *end* of a batch that are not part of the
data (repeats added to complete the last batch), ``0`` for every other batch; a
training loop scores ``data[:batch_size - pad]``.

>>> import numpy as np
>>> from feedline import Dataset
>>> ds = Dataset.range(5).map(lambda i: (np.full((2,), i, np.float32), np.float32(i))).batch(
...     2, collate="numpy")
>>> it = DataIter(ds, batch_size=2, pad_last=True)
>>> [(b.data[0].tolist(), b.label[0].tolist(), b.pad) for b in it]
[([[0.0, 0.0], [1.0, 1.0]], [0.0, 1.0], 0), ([[2.0, 2.0], [3.0, 3.0]], [2.0, 3.0], 0), ([[4.0, 4.0], [4.0, 4.0]], [4.0, 4.0], 1)]
>>> it.provide_data
[DataDesc(name='data', shape=(2, 2), dtype=dtype('float32'), layout='NCHW')]
>>> it.reset(); data, label = it.next(); label.tolist()
[0.0, 1.0]
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from feedline._internal.validate import optional_positive_int

__all__ = ["DataBatch", "DataDesc", "DataIter", "torch_device", "parse_ctx"]


class DataDesc(NamedTuple):
    """Name, shape, dtype and layout of one input (MXNet's ``mx.io.DataDesc``).

    >>> DataDesc("data", (4, 3, 32, 32), np.dtype("float32"))
    DataDesc(name='data', shape=(4, 3, 32, 32), dtype=dtype('float32'), layout='NCHW')
    """

    name: str
    shape: tuple[int, ...]
    dtype: Any = np.dtype("float32")
    layout: str = "NCHW"


def _desc(name: str, array: Any, layout: str) -> DataDesc:
    dtype = array.dtype
    return DataDesc(name, tuple(int(s) for s in array.shape), dtype, layout)


class DataBatch(tuple):
    """One batch with MXNet's ``DataBatch`` attributes that unpacks as ``(data, label)``.

    ``data`` and ``label`` are lists of arrays (``label`` is ``None`` for unlabelled
    batches); ``pad`` the number of padding rows at the end; ``index`` the record
    positions of the rows (or ``None``); ``provide_data`` / ``provide_label`` lists of
    :class:`DataDesc`. As a tuple the batch is ``(data[0], label[0])`` — with several
    arrays, ``(tuple(data), tuple(label))``; without a label, ``(data[0], None)``.

    >>> b = DataBatch([np.zeros((2, 3))], [np.arange(2.0)], pad=1)
    >>> x, y = b
    >>> x.shape, y.tolist(), b.pad, b.data[0] is x, b.provide_label[0].shape
    ((2, 3), [0.0, 1.0], 1, True, (2,))
    """

    data: list
    label: list | None
    pad: int
    index: Any
    bucket_key: Any
    provide_data: list[DataDesc]
    provide_label: list[DataDesc] | None

    def __new__(cls, data: Sequence, label: Sequence | None = None, pad: int = 0, index: Any = None,
                bucket_key: Any = None, provide_data: list[DataDesc] | None = None,
                provide_label: list[DataDesc] | None = None) -> DataBatch:
        data = list(data)
        label = None if label is None else list(label)
        first = data[0] if len(data) == 1 else tuple(data)
        second = None if label is None else (label[0] if len(label) == 1 else tuple(label))
        self = super().__new__(cls, (first, second))
        self.data = data
        self.label = label
        self.pad = int(pad)
        self.index = index
        self.bucket_key = bucket_key
        self.provide_data = provide_data if provide_data is not None else [
            _desc("data" if len(data) == 1 else f"data{i}", d, "NCHW") for i, d in enumerate(data)]
        self.provide_label = provide_label if provide_label is not None or label is None else [
            _desc("softmax_label" if len(label) == 1 else f"label{i}", x, "NCHW")
            for i, x in enumerate(label)]
        return self

    def __reduce__(self) -> Any:
        return (DataBatch, (self.data, self.label, self.pad, self.index, self.bucket_key,
                            self.provide_data, self.provide_label))

    def __repr__(self) -> str:
        shapes = [tuple(d.shape) for d in self.data]
        labels = None if self.label is None else [tuple(x.shape) for x in self.label]
        return f"DataBatch: data shapes: {shapes} label shapes: {labels} pad: {self.pad}"


_GPU = re.compile(r"^(gpu|cuda)(?:\((\d+)\)|:(\d+))?$")


def torch_device(ctx: Any) -> Any:
    """MXNet's ``ctx`` as a ``torch.device``. No device is touched (CUDA need not exist).

    Args:
        ctx: ``"cpu"``/``"cpu(0)"`` -> ``cpu``, ``"gpu"`` -> ``cuda:0``,
            ``"gpu(1)"``/``"cuda:1"`` -> ``cuda:1``; also a ``torch.device`` (returned
            as it is) or an object with MXNet Context's ``device_type``/``device_id``.
            Unknown names raise ``ValueError``, other types ``TypeError``.

    >>> torch_device("gpu(1)"), torch_device("cpu")
    (device(type='cuda', index=1), device(type='cpu'))
    """
    import torch

    if isinstance(ctx, torch.device):
        return ctx
    kind, index = parse_ctx(ctx)
    return torch.device("cpu") if kind == "cpu" else torch.device("cuda", index)


def parse_ctx(ctx: Any) -> tuple[str, int]:
    """MXNet's ``ctx`` as ``("cpu", 0)`` or ``("gpu", N)``, without importing a framework.

    Args:
        ctx: a name (``"cpu"``, ``"cpu_pinned"``, ``"gpu"``, ``"gpu(1)"``, ``"cuda:1"``;
            case and surrounding blanks do not matter), an object with MXNet Context's
            ``device_type``/``device_id``, or a ``torch.device``. Unknown names raise
            ``ValueError``, other types ``TypeError``.

    >>> parse_ctx("gpu(1)"), parse_ctx("cpu"), parse_ctx("cuda")
    (('gpu', 1), ('cpu', 0), ('gpu', 0))
    """
    if type(ctx).__name__ == "device" and hasattr(ctx, "type") and hasattr(ctx, "index"):
        ctx = "cpu" if ctx.type == "cpu" else f"{ctx.type}:{ctx.index or 0}"  # torch.device
    if hasattr(ctx, "device_type") and hasattr(ctx, "device_id"):
        ctx = f"{ctx.device_type}({int(ctx.device_id)})"
    if not isinstance(ctx, str):
        raise TypeError(f"`ctx` must be 'cpu', 'gpu', 'gpu(N)' or a torch.device, got {ctx!r}")
    text = ctx.strip().lower()
    if text in ("cpu", "cpu(0)", "cpu_pinned", "cpu_pinned(0)"):
        return "cpu", 0
    match = _GPU.match(text)
    if match is None:
        raise ValueError(f"`ctx` must be 'cpu', 'gpu', 'gpu(N)' or 'cuda:N', got {ctx!r}")
    return "gpu", int(match.group(2) or match.group(3) or 0)


class DataIter:
    """MXNet's ``DataIter`` protocol over a pipeline whose items are batches.

    ``provide_data`` / ``provide_label`` describe the first batch (read ahead once, then
    served first). ``index`` is ``None`` unless the source items are ``DataBatch``.

    Iterating (``for batch in it``) runs one epoch; at the end ``reset()`` (or a new
    ``for`` loop) starts the next. ``next()`` returns a :class:`DataBatch` or raises
    ``StopIteration``; ``iter_next()`` advances and returns whether a batch is there, the
    ``get*()`` methods read it. ``get_state()`` / ``set_state()`` resume exactly when the
    source is a feedline ``Dataset``.

    >>> x = np.arange(10, dtype=np.float32).reshape(5, 2); y = np.arange(5, dtype=np.float32)
    >>> batches = Dataset.range(5).batch(2).map(lambda rows: (x[rows], y[rows]))
    >>> it = DataIter(batches, batch_size=2, pad_last=True)
    >>> it.provide_data[0].name, it.provide_data[0].shape, it.provide_label[0].name
    ('data', (2, 2), 'softmax_label')
    >>> for batch in it:
    ...     print(batch.data[0].tolist(), batch.label[0].tolist(), batch.pad)
    [[0.0, 1.0], [2.0, 3.0]] [0.0, 1.0] 0
    [[4.0, 5.0], [6.0, 7.0]] [2.0, 3.0] 0
    [[8.0, 9.0], [8.0, 9.0]] [4.0, 4.0] 1

    Args:
        source: a :class:`~feedline.Dataset` (or any re-iterable) yielding per batch a
            ``(data, label)`` tuple, a ``(data,)`` tuple or a bare ``data`` array (no
            label), a dict of arrays split by ``data_names`` / ``label_names``, or a
            :class:`DataBatch` (passed through). Arrays are numpy or torch.
        batch_size: the expected number of rows, a positive int (else
            ``ValueError``/``TypeError``); ``None`` (the default) leaves it unknown.
        pad_last: complete a batch shorter than ``batch_size`` by repeating its own rows
            cyclically, ``pad`` saying how many rows were added; needs ``batch_size``
            (else ``ValueError``). ``False`` (the default): ``pad`` is 0 and the batch
            stays short.
        data_names: the keys of the data arrays in dict items, and the names in
            ``provide_data`` when their number matches (else ``data0``, ``data1``, ...).
        label_names: the keys of the label arrays in dict items (missing keys are
            skipped; none present means no label), and the names in ``provide_label``
            when their number matches (else ``label0``, ``label1``, ...).
        layout: the ``layout`` of every :class:`DataDesc` this iterator makes.
    """

    def __init__(self, source: Any, *, batch_size: int | None = None,
                 pad_last: bool = False, data_names: Sequence[str] = ("data",),
                 label_names: Sequence[str] = ("softmax_label",), layout: str = "NCHW") -> None:
        self.batch_size = optional_positive_int("batch_size", batch_size)
        if pad_last and self.batch_size is None:
            raise ValueError("`pad_last=True` needs `batch_size`")
        self._source = source
        self._pad_last = bool(pad_last)
        self.data_names = list(data_names)
        self.label_names = list(label_names)
        self.layout = layout
        self._it: Any = None
        self._ahead: DataBatch | None = None
        self.current: DataBatch | None = None

    # -- what subclasses adapt
    def _open(self, state: dict | None = None) -> Any:
        source = self._source
        if hasattr(source, "iterator"):
            return source.iterator(state)
        if state is not None:
            raise TypeError("get_state/set_state need a feedline Dataset source")
        return iter(source)

    def _fetch(self) -> DataBatch:
        """The next batch of the current epoch (``StopIteration`` at its end)."""
        if self._it is None:
            self._it = self._open()
        return self._to_batch(next(self._it))

    def _to_batch(self, item: Any) -> DataBatch:
        if isinstance(item, DataBatch):
            return item
        if isinstance(item, dict):
            data = [item[k] for k in self.data_names]
            label = [item[k] for k in self.label_names if k in item] or None
        elif isinstance(item, tuple):
            data, label = [item[0]], ([item[1]] if len(item) > 1 and item[1] is not None else None)
        else:
            data, label = [item], None
        pad = 0
        rows = len(data[0])
        if self._pad_last and self.batch_size is not None and rows < self.batch_size:
            pad = self.batch_size - rows
            take = np.arange(self.batch_size) % rows
            data = [d[take] for d in data]
            label = None if label is None else [x[take] for x in label]
        names = self.data_names if len(self.data_names) == len(data) else [
            f"data{i}" for i in range(len(data))]
        provide_data = [_desc(n, d, self.layout) for n, d in zip(names, data)]
        provide_label = None
        if label is not None:
            lnames = self.label_names if len(self.label_names) == len(label) else [
                f"label{i}" for i in range(len(label))]
            provide_label = [_desc(n, x, self.layout) for n, x in zip(lnames, label)]
        return DataBatch(data, label, pad=pad, provide_data=provide_data,
                         provide_label=provide_label)

    # -- MXNet's protocol
    def __iter__(self) -> DataIter:
        return self

    def reset(self) -> None:
        """End the current epoch; the next batch starts the next epoch."""
        if self._it is not None and hasattr(self._it, "close"):
            self._it.close()
        self._it = None
        self._ahead = None
        self.current = None

    def next(self) -> DataBatch:
        """The next :class:`DataBatch`; ``StopIteration`` at the end of the epoch."""
        if self._ahead is not None:
            batch, self._ahead = self._ahead, None
        else:
            batch = self._fetch()
        self.current = batch
        return batch

    __next__ = next

    def iter_next(self) -> bool:
        """Advance to the next batch; ``False`` at the end of the epoch."""
        try:
            self.next()
        except StopIteration:
            self.current = None
            return False
        return True

    def _current(self) -> DataBatch:
        if self.current is None:
            raise RuntimeError("no current batch: call iter_next() (or next()) first")
        return self.current

    def getdata(self) -> list:
        """The current batch's data arrays (a list)."""
        return self._current().data

    def getlabel(self) -> list | None:
        """The current batch's label arrays (a list, or ``None``)."""
        return self._current().label

    def getpad(self) -> int:
        """Padding rows at the end of the current batch."""
        return self._current().pad

    def getindex(self) -> Any:
        """Record positions of the current batch's rows (``None`` when unknown)."""
        return self._current().index

    def _peek(self) -> DataBatch:
        if self.current is not None:
            return self.current
        if self._ahead is None:
            self._ahead = self._fetch()
        return self._ahead

    @property
    def provide_data(self) -> list[DataDesc]:
        """:class:`DataDesc` of each data array (read from the first batch)."""
        return self._peek().provide_data

    @property
    def provide_label(self) -> list[DataDesc] | None:
        """:class:`DataDesc` of each label array (read from the first batch)."""
        return self._peek().provide_label

    def get_state(self) -> dict[str, Any]:
        """Resumable position (``Dataset`` sources): restoring it continues with the next
        batch."""
        if self._ahead is not None:
            raise RuntimeError("get_state() after provide_data/provide_label read ahead: "
                               "take the state before, or after the first batch")
        if not hasattr(self._source, "iterator"):
            raise TypeError("get_state/set_state need a feedline Dataset source")
        if self._it is None:
            self._it = self._open()
        return {"type": "data_iter", "pipeline": self._it.get_state()}

    def set_state(self, state: dict[str, Any]) -> None:
        """Continue from ``state`` (from :meth:`get_state`).

        Args:
            state: a dict :meth:`get_state` returned; anything else raises
                :class:`~feedline.exceptions.StateError`, and a source that is not a
                feedline ``Dataset`` raises ``TypeError``.
        """
        from feedline.exceptions import StateError

        if not isinstance(state, dict) or state.get("type") != "data_iter":
            raise StateError(f"not a DataIter state: {state!r}")
        self.reset()
        self._it = self._open(state["pipeline"])

    def close(self) -> None:
        """Close the current iterator (idempotent)."""
        self.reset()

    def __enter__(self) -> DataIter:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
