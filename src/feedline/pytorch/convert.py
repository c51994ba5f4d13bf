"""Turn the feeder's values into PyTorch tensors (needs ``feedline[torch]``).

:func:`to_torch` converts one value or a whole ``{name: value}`` dict from
:class:`~feedline.feeder.DataFeeder`:

* a numpy array (dense, ids) -> a tensor sharing its memory (until pinned or moved);
* a :class:`~feedline.feeder.SparseValue` -> ``torch.sparse_csr_tensor`` of the declared
  ``(rows, dim)`` size; binary vectors get float32 ones as values. The CSR invariants
  are checked on the host first (:meth:`SparseValue.check`), since torch's kernels
  trust them. ``sparse_layout="csc"`` gives ``torch.sparse_csc_tensor`` instead (the
  same matrix, column-compressed: PaddlePaddle's ``SPARSE_CSC``);
* a :class:`~feedline.feeder.SequenceValue`, by ``sequence=``:

  - ``"padded"`` (default): :class:`PaddedSequence` ``(data, lengths)`` with ``data`` of
    shape ``(batch, max_len, *token_shape)`` (``(max_len, batch, ...)`` when
    ``batch_first=False``) filled with ``padding_value`` after each sequence's end; for
    sub-sequences :class:`PaddedSubSequence` ``(data, lengths, sub_lengths)`` with ``data``
    ``(batch, max_subs, max_tokens, *token_shape)``, ``lengths`` the sub-sequences per
    sample and ``sub_lengths`` ``(batch, max_subs)`` the tokens per sub-sequence;
  - ``"packed"``: a ``torch.nn.utils.rnn.PackedSequence`` equal to what
    ``pack_sequence(seqs, enforce_sorted=False)`` makes (``reverse=True`` packs every
    sequence back to front), via :mod:`feedline.sequence`;
  - ``"flat"``: a ``SequenceValue`` whose fields are tensors (values and both start
    position vectors), Paddle's layout on the device.

  Sparse sequences only convert with ``"flat"``; sub-sequences not with ``"packed"``.

``lengths``, ``batch_sizes`` and ``sub_lengths`` stay on the CPU (int64), where
``pack_padded_sequence`` wants them; everything else goes to ``device``. With
``pin_memory=True`` the host buffers are allocated in page-locked memory (padded
batches are filled in place, without an extra copy), so that ``non_blocking=True``
copies overlap with compute; without an accelerator, pinning is skipped with a warning
(as ``torch.utils.data.DataLoader`` does).

>>> import numpy as np
>>> from feedline.feeder import SequenceValue
>>> seqs = SequenceValue(np.array([1, 2, 3, 4]), np.array([0, 3, 4]))
>>> data, lengths = to_torch(seqs)
>>> data.tolist(), lengths.tolist()
([[1, 2, 3], [4, 0, 0]], [3, 1])
>>> to_torch(seqs, sequence="packed").batch_sizes.tolist()
[2, 1, 1]
>>> to_torch({"x": np.zeros((2, 3), np.float32)})["x"].shape
torch.Size([2, 3])
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import numpy as np

from feedline._internal.optional import require
from feedline._internal.validate import one_of
from feedline.feeder import SequenceValue, SparseValue
from feedline.sequence import SequenceToBatch

__all__ = ["to_torch", "converter", "PaddedSequence", "PaddedSubSequence"]


class PaddedSequence(NamedTuple):
    """``data`` ``(batch, max_len, ...)`` padded after each end, ``lengths`` (CPU int64).

    >>> from feedline.feeder import SequenceValue
    >>> padded = to_torch(SequenceValue(np.array([1, 2, 3, 4, 5]), np.array([0, 3, 5])))
    >>> type(padded).__name__, padded.data.tolist(), padded.lengths.tolist()
    ('PaddedSequence', [[1, 2, 3], [4, 5, 0]], [3, 2])
    """

    data: Any
    lengths: Any


class PaddedSubSequence(NamedTuple):
    """``data`` ``(batch, max_subs, max_tokens, ...)``; ``lengths`` sub-sequences per
    sample; ``sub_lengths`` ``(batch, max_subs)`` tokens per sub-sequence (0 = padding).

    >>> from feedline.feeder import SequenceValue
    >>> nested = SequenceValue(np.array([1, 2, 3, 4, 5]), np.array([0, 3, 5]), np.array([0, 1, 3, 5]))
    >>> out = to_torch(nested)              # sample 0: [1], [2, 3]; sample 1: [4, 5]
    >>> type(out).__name__, out.data.tolist(), out.lengths.tolist(), out.sub_lengths.tolist()
    ('PaddedSubSequence', [[[1, 0], [2, 3]], [[4, 5], [0, 0]]], [2, 1], [[1, 2], [2, 0]])
    """

    data: Any
    lengths: Any
    sub_lengths: Any


class _Converter:
    def __init__(self, torch: Any, device: Any, pin: bool, non_blocking: bool,
                 layout: str = "csr") -> None:
        self.torch = torch
        self.layout = layout
        self.device = None if device is None else torch.device(device)
        if self.device is not None and self.device.type == "cpu":
            self.device = None  # from_numpy tensors are on the CPU already
        self.non_blocking = bool(non_blocking)
        self.pin = bool(pin) and _can_pin(torch)

    def tensor(self, arr: np.ndarray) -> Any:
        """Host array -> (pinned) tensor on the target device."""
        if not arr.flags.writeable:
            arr = arr.copy()
        t = self.torch.from_numpy(np.ascontiguousarray(arr))
        if self.pin:
            t = t.pin_memory()
        return self.move(t)

    def move(self, t: Any) -> Any:
        if self.device is not None and t.device != self.device:
            t = t.to(self.device, non_blocking=self.non_blocking)
        return t

    def cpu(self, arr: np.ndarray) -> Any:
        return self.torch.from_numpy(np.ascontiguousarray(arr, dtype=np.int64))

    def empty(self, shape: tuple, dtype: np.dtype, fill: Any) -> tuple[Any, np.ndarray]:
        """A host tensor (pinned when asked) and a numpy view of it to fill in place."""
        torch_dtype = self.torch.from_numpy(np.empty(0, dtype=dtype)).dtype
        t = self.torch.empty(shape, dtype=torch_dtype, pin_memory=self.pin)
        view = t.numpy()
        view.fill(fill)
        return t, view

    def sparse(self, v: SparseValue) -> Any:
        v.check()  # on the host, so torch need not check on the device
        if self.layout == "csc":
            ccol, rows, values = v.to_csc()
            vals = np.ones(len(rows), np.float32) if values is None else values
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="Sparse CSC tensor support is in beta")
                return self.torch.sparse_csc_tensor(
                    self.tensor(ccol), self.tensor(rows), self.tensor(vals),
                    size=tuple(v.shape), check_invariants=False,
                )
        crow = self.tensor(np.asarray(v.indptr, dtype=np.int64))
        col = self.tensor(np.asarray(v.indices, dtype=np.int64))
        vals = self.tensor(v.data(np.float32))
        with warnings.catch_warnings():  # torch notes once per process that CSR is "beta"
            warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
            return self.torch.sparse_csr_tensor(
                crow, col, vals, size=tuple(v.shape), check_invariants=False
            )


def _can_pin(torch: Any) -> bool:
    if torch.cuda.is_available():
        return True
    warnings.warn(
        "pin_memory=True but no accelerator is available; memory is not pinned",
        stacklevel=3,
    )
    return False


def to_torch(
    value: Any,
    *,
    device: Any = None,
    pin_memory: bool = False,
    non_blocking: bool = False,
    sequence: str = "padded",
    padding_value: float = 0,
    batch_first: bool = True,
    reverse: bool = False,
    sparse_layout: str = "csr",
) -> Any:
    """Convert a feeder value, or a dict/list/tuple of them, to tensors.

    See the module docstring for what each value becomes. Objects that are not numpy
    arrays or feeder values (strings, numbers, ``None``) are returned unchanged.

    Args:
        value: a numpy array, :class:`~feedline.feeder.SparseValue`,
            :class:`~feedline.feeder.SequenceValue`, or a dict, list or tuple of them
            (converted item by item; named tuples are returned unchanged).
        device: where the tensors go (anything ``torch.device`` accepts); ``None`` (the
            default) or a CPU device leaves them on the CPU. ``lengths``,
            ``batch_sizes`` and ``sub_lengths`` stay on the CPU in any case.
        pin_memory: allocate the host buffers in page-locked memory (padded batches are
            filled in place, without an extra copy), so that ``non_blocking`` copies
            overlap with compute; without an accelerator, pinning is skipped with a
            warning.
        non_blocking: copy to ``device`` asynchronously (``Tensor.to(non_blocking=True)``).
        sequence: what a ``SequenceValue`` becomes: ``"padded"`` (the default), a
            :class:`PaddedSequence` (:class:`PaddedSubSequence` for sub-sequences);
            ``"packed"``, a ``PackedSequence`` (plain sequences only, else
            ``ValueError``); ``"flat"``, a ``SequenceValue`` of tensors (the only mode for
            sparse tokens, else ``ValueError``). Another value raises ``ValueError``.
        padding_value: what fills the padded places after each sequence's end.
        batch_first: padded data is ``(batch, max_len, ...)``; ``False`` gives
            ``(max_len, batch, ...)`` (``(max_tokens, max_subs, batch, ...)`` for
            sub-sequences).
        reverse: ``"packed"`` only: pack every sequence back to front.
        sparse_layout: ``"csr"`` (the default) gives ``torch.sparse_csr_tensor``;
            ``"csc"`` gives ``torch.sparse_csc_tensor`` (the same matrix,
            column-compressed: PaddlePaddle's ``SPARSE_CSC``). Another value raises
            ``ValueError``.

    >>> import numpy as np
    >>> from feedline.feeder import SparseValue
    >>> csr = to_torch(SparseValue(np.array([0, 1, 1]), np.array([2]), None, (2, 3)))
    >>> csr.layout, csr.to_dense().tolist()
    (torch.sparse_csr, [[0.0, 0.0, 1.0], [0.0, 0.0, 0.0]])
    >>> csc = to_torch(SparseValue(np.array([0, 1, 1]), np.array([2]), None, (2, 3)),
    ...                sparse_layout="csc")
    >>> csc.layout, csc.ccol_indices().tolist(), csc.to_dense().tolist()
    (torch.sparse_csc, [0, 0, 0, 1], [[0.0, 0.0, 1.0], [0.0, 0.0, 0.0]])
    """
    return converter(device=device, pin_memory=pin_memory, non_blocking=non_blocking,
                     sequence=sequence, padding_value=padding_value, batch_first=batch_first,
                     reverse=reverse, sparse_layout=sparse_layout)(value)


def converter(
    *,
    device: Any = None,
    pin_memory: bool = False,
    non_blocking: bool = False,
    sequence: str = "padded",
    padding_value: float = 0,
    batch_first: bool = True,
    reverse: bool = False,
    sparse_layout: str = "csr",
) -> Callable[[Any], Any]:
    """:func:`to_torch` with its options checked once: a function of the value alone,
    for converting batch after batch. Without torch it raises ``ImportError``.

    Args:
        device: the target device, as for :func:`to_torch`; a CPU device converts as
            ``None`` does.
        pin_memory: page-locked host buffers, as for :func:`to_torch`.
        non_blocking: asynchronous copies to ``device``, as for :func:`to_torch`.
        sequence: ``"padded"``, ``"packed"`` or ``"flat"`` (else ``ValueError``), as for
            :func:`to_torch`.
        padding_value: the fill after each sequence's end, as for :func:`to_torch`.
        batch_first: the padded axis order, as for :func:`to_torch`.
        reverse: pack sequences back to front, as for :func:`to_torch`.
        sparse_layout: ``"csr"`` or ``"csc"`` (else ``ValueError``), as for
            :func:`to_torch`.

    >>> import numpy as np
    >>> convert = converter(device="cpu")
    >>> convert({"x": np.ones((2, 3), np.float32)})["x"].shape
    torch.Size([2, 3])
    """
    torch = require("torch", extra="torch")
    one_of("sequence", sequence, ("padded", "packed", "flat"))
    one_of("sparse_layout", sparse_layout, ("csr", "csc"))
    conv = _Converter(torch, device, pin_memory, non_blocking, sparse_layout)
    options = (sequence, padding_value, bool(batch_first), bool(reverse))
    return functools.partial(_convert_value, conv, options)


def _convert_value(conv: _Converter, options: tuple, value: Any) -> Any:
    return _convert(conv, value, *options)


def _convert(conv: _Converter, value: Any, mode: str, pad: Any, batch_first: bool, reverse: bool) -> Any:
    if isinstance(value, np.ndarray):
        return conv.tensor(value)
    if isinstance(value, SparseValue):
        return conv.sparse(value)
    if isinstance(value, SequenceValue):
        if mode == "flat":
            values = value.values
            vals = conv.sparse(values) if isinstance(values, SparseValue) else conv.tensor(values)
            sub = value.sub_sequence_start_positions
            return SequenceValue(
                vals,
                conv.tensor(np.asarray(value.sequence_start_positions, dtype=np.int64)),
                None if sub is None else conv.tensor(np.asarray(sub, dtype=np.int64)),
            )
        if isinstance(value.values, SparseValue):
            raise ValueError(
                f"sequence={mode!r} needs dense or id tokens; convert sparse sequences "
                "with sequence='flat'"
            )
        if mode == "packed":
            return _packed(conv, value, reverse)
        if value.sub_sequence_start_positions is not None:
            return _padded_sub(conv, value, pad, batch_first)
        return _padded(conv, value, pad, batch_first)
    if isinstance(value, Mapping):
        return {k: _convert(conv, v, mode, pad, batch_first, reverse) for k, v in value.items()}
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(_convert(conv, v, mode, pad, batch_first, reverse) for v in value)
    return value


def _padded(conv: _Converter, value: SequenceValue, pad: Any, batch_first: bool) -> PaddedSequence:
    values = np.asarray(value.values)
    starts = np.asarray(value.sequence_start_positions, dtype=np.int64)
    lengths = np.diff(starts)
    n = len(lengths)
    steps = int(lengths.max()) if n else 0
    feat = values.shape[1:]
    shape = (n, steps, *feat) if batch_first else (steps, n, *feat)
    host, view = conv.empty(shape, values.dtype, pad)
    total = int(starts[-1]) - int(starts[0])
    rows = np.repeat(np.arange(n, dtype=np.int64), lengths)
    cols = np.arange(total, dtype=np.int64) - np.repeat(starts[:-1] - starts[0], lengths)
    if batch_first:
        view[rows, cols] = values[starts[0] : starts[-1]]
    else:
        view[cols, rows] = values[starts[0] : starts[-1]]
    return PaddedSequence(conv.move(host), conv.cpu(lengths))


def _padded_sub(conv: _Converter, value: SequenceValue, pad: Any, batch_first: bool) -> PaddedSubSequence:
    values = np.asarray(value.values)
    seq_starts = np.asarray(value.sequence_start_positions, dtype=np.int64)
    sub_starts = np.asarray(value.sub_sequence_start_positions, dtype=np.int64)
    n = len(seq_starts) - 1
    sample_subs = np.searchsorted(sub_starts, seq_starts)  # first sub-sequence of each sample
    subs_per_sample = np.diff(sample_subs)
    sub_lengths = np.diff(sub_starts)
    max_subs = int(subs_per_sample.max()) if n else 0
    max_tokens = int(sub_lengths.max()) if len(sub_lengths) else 0
    feat = values.shape[1:]
    shape = (n, max_subs, max_tokens, *feat) if batch_first else (max_tokens, max_subs, n, *feat)
    host, view = conv.empty(shape, values.dtype, pad)
    sample_of_sub = np.repeat(np.arange(n, dtype=np.int64), subs_per_sample)
    k_of_sub = np.arange(len(sub_lengths), dtype=np.int64) - np.repeat(sample_subs[:-1], subs_per_sample)
    sub_of_tok = np.repeat(np.arange(len(sub_lengths), dtype=np.int64), sub_lengths)
    total = int(sub_starts[-1]) - int(sub_starts[0])
    t_of_tok = np.arange(total, dtype=np.int64) - np.repeat(sub_starts[:-1] - sub_starts[0], sub_lengths)
    tokens = values[sub_starts[0] : sub_starts[-1]]
    if batch_first:
        view[sample_of_sub[sub_of_tok], k_of_sub[sub_of_tok], t_of_tok] = tokens
    else:
        view[t_of_tok, k_of_sub[sub_of_tok], sample_of_sub[sub_of_tok]] = tokens
    sub_len_grid = np.zeros((n, max_subs), dtype=np.int64)
    sub_len_grid[sample_of_sub, k_of_sub] = sub_lengths
    return PaddedSubSequence(conv.move(host), conv.cpu(subs_per_sample), conv.cpu(sub_len_grid))


def _packed(conv: _Converter, value: SequenceValue, reverse: bool) -> Any:
    if value.sub_sequence_start_positions is not None:
        raise ValueError(
            "sequence='packed' needs a plain sequence batch; pack sub-sequences with "
            "feedline.sequence.sequence_to_batch(value, level='sub_sequence') or use 'padded'"
        )
    torch = conv.torch
    lengths = np.diff(np.asarray(value.sequence_start_positions, dtype=np.int64))
    # The order of equal lengths is torch's own (pack_padded_sequence sorts this way).
    _, order = torch.sort(torch.from_numpy(lengths), descending=True)
    plan = SequenceToBatch(
        value.sequence_start_positions, reverse=reverse, sorted_indices=order.numpy()
    )
    data = conv.tensor(plan.to_batch(np.asarray(value.values)))
    rnn = require("torch.nn.utils.rnn", extra="torch")
    return rnn.PackedSequence(
        data,
        conv.cpu(plan.batch_sizes),
        conv.move(conv.cpu(plan.sorted_indices)),
        conv.move(conv.cpu(plan.unsorted_indices)),
    )
