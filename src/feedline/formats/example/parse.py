"""Batch parsing behind :func:`feedline.example.parse_example` and
:func:`~feedline.example.parse_sequence_example`.

Records are joined into one buffer; :mod:`feedline.formats.example.batch` locates and decodes
the wanted features of all records at once (the scalar decoder of
:mod:`feedline.formats.example.wire` takes the records written unusually); :func:`gather` turns
one key's value chunks into numpy values and per-record counts; :func:`assemble` builds
the result of one spec (dense, sparse, ragged, padded sequence) from those, vectorised.

>>> from feedline.formats.example.wire import encode_example_bytes
>>> from feedline.formats.example.spec import VarLenFeature
>>> out = parse_examples([encode_example_bytes({"a": ("int64", [7, 8])})],
...                      {"a": VarLenFeature("int64")})
>>> out["a"].values.tolist(), out["a"].dense_shape.tolist()
([7, 8], [1, 2])
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from feedline.exceptions import CorruptRecordError, DecodeError, MissingFeatureError
from feedline.formats.example import _native, batch, wire
from feedline.formats.example.spec import (
    SPECS,
    FixedLenSequenceFeature,
    RaggedFeature,
    RaggedTensorValue,
    RowSplitsPartition,
    SparseTensorValue,
    UniformRowLengthPartition,
    VarLenFeature,
)

__all__ = [
    "parse_examples",
    "parse_examples_compiled",
    "parse_sequences",
    "strip_batch",
    "check_specs",
    "as_batch",
]

_CODE = {"string": 1, "float32": 2, "int64": 3}
_CODE_NAME = {1: "string", 2: "float32", 3: "int64"}
_NP = {"int64": np.int64, "float32": np.float32, "string": object}


def _malformed(exc: wire.Malformed, what: str, index: int | None, base: int = 0):
    err = CorruptRecordError(
        f"malformed {what}: {exc.message} at byte {exc.pos - base} of the record", index=index
    )
    err.__cause__ = exc
    return err


def check_specs(features: Any, what: str) -> dict:
    """``features`` as a new ``dict`` after checking that it maps ``str`` names to feature
    specs; ``TypeError`` otherwise.

    Args:
        features: the ``{name: spec}`` mapping to check.
        what: the argument's name, used in the ``TypeError`` for a non-mapping (a bad
            name or spec names the feature instead).

    >>> from feedline.formats.example.spec import VarLenFeature
    >>> check_specs({"tok": VarLenFeature("int64")}, "features")
    {'tok': VarLenFeature(dtype='int64')}
    >>> check_specs({"tok": "int64"}, "features")
    Traceback (most recent call last):
    ...
    TypeError: feature 'tok': spec must be FixedLenFeature, VarLenFeature, RaggedFeature or FixedLenSequenceFeature, got 'int64'
    """
    if not isinstance(features, Mapping):
        raise TypeError(f"`{what}` must be a mapping of names to feature specs")
    for name, spec in features.items():
        if not isinstance(name, str):
            raise TypeError(f"feature names must be str, got {name!r}")
        if not isinstance(spec, SPECS):
            raise TypeError(
                f"feature {name!r}: spec must be FixedLenFeature, VarLenFeature, RaggedFeature "
                f"or FixedLenSequenceFeature, got {spec!r}"
            )
    return dict(features)


def as_batch(serialized: Any, as_bytes) -> list[bytes]:
    """The records of ``serialized`` as a list, each converted by ``as_bytes``.

    Args:
        serialized: a sequence or a numpy array of any shape (flattened); a single record
            (``bytes``, ``bytearray`` or ``str``) is refused with ``TypeError``.
        as_bytes (Callable[[Any, int], bytes]): called as ``as_bytes(record, index)`` for
            each record; its result is the list item.

    >>> as_batch(np.array([[b"a"], [b"b"]], dtype=object), lambda s, i: s + b"%d" % i)
    [b'a0', b'b1']
    >>> as_batch(b"one record", lambda s, i: s)
    Traceback (most recent call last):
    ...
    TypeError: `serialized` must be a sequence of serialized Examples, not one
    """
    if isinstance(serialized, (bytes, bytearray, str)):
        raise TypeError("`serialized` must be a sequence of serialized Examples, not one")
    items = serialized.ravel().tolist() if isinstance(serialized, np.ndarray) else list(serialized)
    return [as_bytes(s, i) for i, s in enumerate(items)]


def _keys_of(spec: Any, name: str) -> list[str]:
    if isinstance(spec, RaggedFeature):
        keys = [spec.value_key or name]
        keys += [p.key for p in spec.partitions if not isinstance(p, UniformRowLengthPartition)]
        return keys
    return [name]


def _wanted(features: dict) -> list[bytes]:
    keys: dict[bytes, None] = {}
    for name, spec in features.items():
        for k in _keys_of(spec, name):
            keys[k.encode("utf-8")] = None
    return list(keys)


# --------------------------------------------------------------------------- values


def _take(arr: np.ndarray, start: np.ndarray, length: np.ndarray) -> np.ndarray:
    """Concatenate ``arr[start[i] : start[i] + length[i]]`` for all ``i``, vectorised."""
    total = int(length.sum())
    if not total:
        return np.empty(0, dtype=arr.dtype)
    shift = np.repeat(start - (np.cumsum(length) - length), length)
    return arr[shift + np.arange(total)]


def _check_kinds(kinds: np.ndarray, dtype: str, name: str, record) -> None:
    """Raise :class:`DecodeError` for the first row whose kind (0 = none) is not
    ``dtype``'s; ``record(row)`` is the record index to name."""
    wrong = np.flatnonzero((kinds != 0) & (kinds != _CODE[dtype]))
    if wrong.size:
        j = int(wrong[0])
        raise DecodeError(
            f"feature {name!r} holds {_CODE_NAME[int(kinds[j])]} values, the spec "
            f"wants {dtype}",
            index=record(j),
        )


class _Cached:
    """Calling ``(key, dtype, name)`` gives ``(present, counts, values)`` of ``key`` read
    as ``dtype``, computed once by the subclass's ``_gather``."""

    _done: dict

    def __call__(self, key: str, dtype: str, name: str):
        cached = self._done.get((key, dtype))
        if cached is None:
            cached = self._done[(key, dtype)] = self._gather(key, dtype, name)
        return cached

    def _gather(self, key: str, dtype: str, name: str):
        raise NotImplementedError


class _Gather(_Cached):
    """Values and per-row counts of each key, computed once per (key, dtype).

    ``rows`` is the number of rows the chunks are grouped by (records, or steps of
    feature lists); ``record_of`` maps a row to its record for error messages.
    """

    def __init__(self, joined: bytes, chunks: dict, rows: int, record_of=None) -> None:
        self.joined = joined
        self.arr = np.frombuffer(joined, dtype=np.uint8)
        self.chunks = chunks
        self.rows = rows
        self.record_of = record_of
        self._done: dict = {}

    def record(self, row: int) -> int:
        return int(self.record_of[row]) if self.record_of is not None else int(row)

    def _gather(self, key: str, dtype: str, name: str):
        ch = self.chunks[key.encode("utf-8")]
        code = _CODE[dtype]
        _check_kinds(ch.kinds, dtype, name, self.record)
        present = ch.kinds != 0
        n = self.rows
        if code == 1:
            values = np.empty(len(ch.start), dtype=object)
            joined = self.joined
            values[:] = [joined[a:b] for a, b in zip(ch.start.tolist(), ch.end.tolist())]
            return present, np.bincount(ch.record, minlength=n).astype(np.int64), values
        length = ch.end - ch.start
        nonzero = length > 0
        rec, start, length = ch.record[nonzero], ch.start[nonzero], length[nonzero]
        data = _take(self.arr, start, length)
        if code == 2:
            counts = np.bincount(rec, weights=length, minlength=n).astype(np.int64) // 4
            return present, counts, data.view("<f4").astype(np.float32)
        try:
            values = wire.decode_varints(data)
        except wire.Malformed as exc:
            chunk = int(np.searchsorted(np.cumsum(length), exc.pos, side="right"))
            raise CorruptRecordError(
                f"malformed Example: feature {name!r}: {exc.message}",
                index=self.record(int(rec[chunk])),
            ) from exc
        if len(values) == len(data):
            counts = np.bincount(rec, weights=length, minlength=n).astype(np.int64)
        else:  # multi-byte varints: count the terminating bytes of each chunk
            per_chunk = np.add.reduceat(data < 0x80, np.cumsum(length) - length)
            counts = np.bincount(rec, weights=per_chunk, minlength=n).astype(np.int64)
        return present, counts, values


class _Scanned(_Cached):
    """What :class:`_Gather` gives, from the C extension's scan of a batch: per key the
    kind of each record, its number of values and the values of each kind in record
    order (``scan_examples`` in ``_wire.c``)."""

    def __init__(self, found: dict, rows: int) -> None:
        self.found = found
        self.rows = rows
        self._done: dict = {}

    @staticmethod
    def record(row: int) -> int:
        return int(row)

    def _gather(self, key: str, dtype: str, name: str):
        kinds, counts, ints, floats, strings = self.found[key.encode("utf-8")]
        kinds = np.frombuffer(kinds, dtype=np.int8)
        _check_kinds(kinds, dtype, name, self.record)
        counts = np.frombuffer(counts, dtype=np.int64)
        if dtype == "string":
            values = np.empty(len(strings), dtype=object)
            values[:] = strings
        elif dtype == "float32":
            values = np.frombuffer(floats, dtype=np.float32)
        else:
            values = np.frombuffer(ints, dtype=np.int64)
        return kinds != 0, counts, values


# --------------------------------------------------------------------------- results


def _padded(counts: np.ndarray, values: np.ndarray, row: tuple, dtype: str, pad: Any) -> np.ndarray:
    """Place ``counts[i]`` rows of shape ``row`` per record into ``(n, longest, *row)``."""
    n = len(counts)
    longest = int(counts.max()) if n else 0
    fill = pad if pad is not None else (b"" if dtype == "string" else 0)
    out = np.full((n, longest, *row), fill, dtype=_NP[dtype])
    if len(values):
        rec = np.repeat(np.arange(n), counts)
        pos = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
        out[rec, pos] = values.reshape(-1, *row)
    return out


def _sparse(counts: np.ndarray, values: np.ndarray) -> SparseTensorValue:
    n = len(counts)
    rec = np.repeat(np.arange(n, dtype=np.int64), counts)
    pos = np.arange(len(values), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    longest = int(counts.max()) if n else 0
    return SparseTensorValue(
        np.stack([rec, pos], axis=1) if len(values) else np.empty((0, 2), dtype=np.int64),
        values,
        np.array([n, longest], dtype=np.int64),
    )


def _partition_lengths(
    spec: RaggedFeature, name: str, counts: np.ndarray, get: Any
) -> tuple[np.ndarray, ...]:
    """Row lengths for ``spec``'s partitions, applied innermost first, per record."""
    inner: list[np.ndarray] = []
    units = counts  # per record: how many items the current level has
    for part in reversed(spec.partitions):
        if isinstance(part, UniformRowLengthPartition):
            k = part.length
            bad = np.flatnonzero(units % k)
            if bad.size:
                i = int(bad[0])
                raise DecodeError(
                    f"feature {name!r}: {int(units[i])} values do not split into rows of {k}",
                    index=get.record(i),
                )
            rows = units // k
            lengths = np.full(int(rows.sum()), k, dtype=np.int64)
        elif isinstance(part, RowSplitsPartition):
            _, pcounts, splits = get(part.key, "int64", part.key)
            rows = np.maximum(pcounts - 1, 0)
            pieces = []
            start = 0
            for i, c in enumerate(pcounts.tolist()):
                sp = splits[start : start + c]
                start += c
                if (c == 0 and units[i] != 0) or (
                    c and (sp[0] != 0 or sp[-1] != units[i] or (np.diff(sp) < 0).any())
                ):
                    raise DecodeError(
                        f"feature {name!r}: row splits {part.key!r} do not partition "
                        f"{int(units[i])} values",
                        index=get.record(i),
                    )
                pieces.append(np.diff(sp))
            lengths = np.concatenate(pieces).astype(np.int64) if pieces else np.empty(0, np.int64)
        else:  # RowLengths
            _, pcounts, pvals = get(part.key, "int64", part.key)
            rows = pcounts
            lengths = pvals.astype(np.int64)
            ends = np.cumsum(pcounts)
            total = np.concatenate(([0], np.cumsum(lengths)))
            per_record = total[ends] - total[ends - pcounts]
            record_of = np.repeat(np.arange(len(pcounts)), pcounts)
            bad = np.concatenate((record_of[lengths < 0], np.flatnonzero(per_record != units)))
            if bad.size:
                i = int(bad.min())
                raise DecodeError(
                    f"feature {name!r}: row lengths {part.key!r} do not add up to "
                    f"{int(units[i])} values",
                    index=get.record(i),
                )
        inner.insert(0, lengths)
        units = rows
    return (units.astype(np.int64), *inner)


def _assemble(name: str, spec: Any, get: Any, n: int) -> Any:
    """The result of ``spec`` for feature ``name``; ``get`` is a :class:`_Gather` or a
    :class:`_Scanned` (the same values either way)."""
    if isinstance(spec, RaggedFeature):
        key = spec.value_key or name
        _, counts, values = get(key, spec.dtype, key)
        return RaggedTensorValue(values, _partition_lengths(spec, name, counts, get))
    present, counts, values = get(name, spec.dtype, name)
    if isinstance(spec, VarLenFeature):
        return _sparse(counts, values)
    size = math.prod(spec.shape)
    if isinstance(spec, FixedLenSequenceFeature):
        if not spec.allow_missing:
            raise ValueError(
                f"feature {name!r}: FixedLenSequenceFeature in parse_example needs "
                "allow_missing=True"
            )
        if size == 0:
            rows = np.zeros(n, dtype=np.int64)
        else:
            bad = np.flatnonzero(counts % size)
            if bad.size:
                i = int(bad[0])
                raise DecodeError(
                    f"feature {name!r}: {int(counts[i])} {spec.dtype} values are not a "
                    f"multiple of {size} (shape {list(spec.shape)})",
                    index=i,
                )
            rows = counts // size
        return _padded(rows, values, spec.shape, spec.dtype, spec.default_value)
    # FixedLenFeature
    wrong = np.flatnonzero(present & (counts != size))
    if wrong.size:
        i = int(wrong[0])
        raise DecodeError(
            f"feature {name!r} has {int(counts[i])} {spec.dtype} values, shape "
            f"{list(spec.shape)} needs {size}",
            index=i,
        )
    out = np.empty((n, *spec.shape), dtype=_NP[spec.dtype])
    if present.all():
        out[...] = values.reshape(out.shape)
        return out
    if spec.default_value is None:
        i = int(np.flatnonzero(~present)[0])
        raise MissingFeatureError(
            f"feature {name!r} ({spec.dtype}, FixedLenFeature shape {list(spec.shape)}) is "
            "required but missing; give it a default_value to make it optional",
            index=i,
        )
    out[present] = values.reshape(-1, *spec.shape)
    out[~present] = spec.default_value
    return out


# --------------------------------------------------------------------------- Examples


def _decode_all(joined: bytes, starts: np.ndarray, ranges: dict, extras: dict, what: str):
    """``{key: Chunks}``: all keys decoded in one lockstep pass (their ``(n, 2)`` range
    arrays stacked, so the numpy calls are shared), then split by key."""
    keys = list(ranges)
    n = len(starts)
    if len(keys) < 2 or any(len(r) != n for r in ranges.values()):
        return _decode_each(joined, starts, ranges, extras, what)
    stacked = np.concatenate([ranges[k] for k in keys])
    extra = {j * n + i: raw for j, k in enumerate(keys) for i, raw in extras.get(k, {}).items()}
    try:
        ch = batch.decode(joined, stacked, extra)
    except wire.Malformed as exc:
        i = getattr(exc, "record", None)
        i = None if i is None else i % n
        raise _malformed(exc, what, i, int(starts[i]) if i is not None else 0) from exc
    bounds = np.searchsorted(ch.record, np.arange(len(keys) + 1) * n).tolist()
    chunks = {}
    for j, k in enumerate(keys):
        a, b = bounds[j], bounds[j + 1]
        chunks[k] = batch.Chunks(ch.kinds[j * n:(j + 1) * n], ch.record[a:b] - j * n,
                                 ch.start[a:b], ch.end[a:b])
    return chunks


def _decode_each(joined: bytes, starts: np.ndarray, ranges: dict, extras: dict, what: str):
    chunks = {}
    for key, r in ranges.items():
        try:
            chunks[key] = batch.decode(joined, r, extras.get(key, {}))
        except wire.Malformed as exc:
            i = getattr(exc, "record", None)
            raise _malformed(exc, what, i, int(starts[i]) if i is not None else 0) from exc
    return chunks


def parse_examples_compiled(records: list, features: dict) -> dict[str, Any] | None:
    """``parse_example`` on checked ``features`` by the C extension's scan, or ``None``
    (then run :func:`parse_examples`) where it is not built, where a record is not
    exactly ``bytes``, or where a record is damaged or written in a way the scan leaves
    to the Python decoder. The results and the errors raised while assembling them are
    :func:`parse_examples`'s.

    Args:
        records: the serialized ``Example``s.
        features: ``{name: spec}`` already checked by :func:`check_specs`.

    >>> from feedline.example import FixedLenFeature, encode_example
    >>> out = parse_examples_compiled([encode_example({"a": [1, 2]})],
    ...                               {"a": FixedLenFeature([2], "int64")})
    >>> out is None or out["a"].tolist() == [[1, 2]]
    True
    """
    ext = _native.extension()
    if ext is None:
        return None
    keys = _wanted(features)
    found = ext.scan_examples(records, keys)
    if found is None:
        return None
    n = len(records)
    get = _Scanned(dict(zip(keys, found)), n)
    return {name: _assemble(name, spec, get, n) for name, spec in features.items()}


def parse_examples(bufs: list[bytes], features: dict) -> dict[str, Any]:
    """``parse_example`` on already checked arguments (the C extension's scan first,
    where it is built and takes the records; else numpy over the whole batch).

    Args:
        bufs: the serialized ``Example``s, each ``bytes``.
        features: ``{name: spec}`` already checked by :func:`check_specs`.

    >>> from feedline.example import FixedLenFeature, encode_example
    >>> records = [encode_example({"a": [1, 2]}), encode_example({"a": [3, 4]})]
    >>> parse_examples(records, {"a": FixedLenFeature([2], "int64")})["a"].tolist()
    [[1, 2], [3, 4]]
    """
    out = parse_examples_compiled(bufs, features)
    if out is not None:
        return out
    keys = _wanted(features)
    joined, starts, ranges, slow = batch.locate(bufs, keys)
    extras: dict[bytes, dict] = {k: {} for k in keys}
    for i in slow:  # records written unusually: the full protobuf rules, one by one
        base = int(starts[i])
        try:
            found = wire.feature_ranges(joined, base, base + len(bufs[i]), example=True)
            for key in keys:
                value = found.get(key)
                if value is None:
                    continue
                if isinstance(value, wire.Merged):
                    extras[key][i] = wire.parse_feature_value(joined, value)
                    ranges[key][i] = (0, 0)
                else:
                    ranges[key][i] = value
        except wire.Malformed as exc:
            raise _malformed(exc, "Example", i, base) from exc
    n = len(bufs)
    get = _Gather(joined, _decode_all(joined, starts, ranges, extras, "Example"), n)
    return {name: _assemble(name, spec, get, n) for name, spec in features.items()}


# --------------------------------------------------------------------------- SequenceExamples


def _shift(value: Any, base: int) -> Any:
    if isinstance(value, wire.Merged):
        return wire.Merged(tuple((s + base, e + base) for s, e in value))
    return (value[0] + base, value[1] + base)


def _sequence_value(name: str, key: str, spec: Any, get: _Gather, steps_per: np.ndarray):
    """One feature list across the batch: ``(value, lengths or None)``."""
    n = len(steps_per)
    dtype = spec.dtype
    _, counts, values = get(key, dtype, name)
    record_of_step = np.repeat(np.arange(n), steps_per)
    if isinstance(spec, FixedLenSequenceFeature):
        size = math.prod(spec.shape)
        bad = np.flatnonzero(counts != size)
        if bad.size:
            j = int(bad[0])
            i = int(record_of_step[j])
            step = j - int(np.cumsum(steps_per)[i] - steps_per[i])
            raise DecodeError(
                f"feature list {name!r} step {step} has {int(counts[j])} {dtype} values, "
                f"shape {list(spec.shape)} needs {size}",
                index=i,
            )
        return _padded(steps_per, values, spec.shape, dtype, spec.default_value), steps_per
    if isinstance(spec, VarLenFeature):
        step_start = np.cumsum(steps_per) - steps_per
        step_index = np.arange(len(counts)) - np.repeat(step_start, steps_per)
        rec = np.repeat(record_of_step, counts)
        stp = np.repeat(step_index, counts)
        pos = np.arange(len(values)) - np.repeat(np.cumsum(counts) - counts, counts)
        shape = np.array(
            [n, int(steps_per.max()) if n else 0, int(counts.max()) if len(counts) else 0],
            dtype=np.int64,
        )
        indices = np.stack([rec, stp, pos], axis=1).astype(np.int64)
        return SparseTensorValue(indices.reshape(-1, 3), values, shape), None
    if spec.partitions:
        raise ValueError(f"feature list {name!r}: RaggedFeature partitions are not supported")
    return RaggedTensorValue(values, (steps_per, counts)), None


def parse_sequences(bufs: list[bytes], context_features: dict, sequence_features: dict):
    """``parse_sequence_example`` on already checked arguments.

    Args:
        bufs: the serialized ``SequenceExample``s, each ``bytes``.
        context_features: ``{name: spec}`` for the context, already checked.
        sequence_features: ``{name: spec}`` for the feature lists, already checked.

    It returns ``(context, feature_lists, lengths)`` as
    :func:`feedline.example.parse_sequence_example` does.

    >>> from feedline.example import FixedLenFeature, VarLenFeature, encode_sequence_example
    >>> record = encode_sequence_example({"id": [7]}, {"t": [[1], [2, 3]]})
    >>> context, lists, _ = parse_sequences([record], {"id": FixedLenFeature([], "int64")},
    ...                                     {"t": VarLenFeature("int64")})
    >>> context["id"].tolist(), lists["t"].values.tolist(), lists["t"].dense_shape.tolist()
    ([7], [1, 2, 3], [1, 2, 2])
    """
    n = len(bufs)
    joined, _, starts = batch.join(bufs)
    ctx_keys = _wanted(context_features)
    ctx_ranges = {k: np.full((n, 2), -1, dtype=np.int64) for k in ctx_keys}
    ctx_extras: dict[bytes, dict] = {k: {} for k in ctx_keys}
    seq_names = {
        name: ((spec.value_key or name) if isinstance(spec, RaggedFeature) else name).encode()
        for name, spec in sequence_features.items()
    }
    steps: dict[bytes, list] = {k: [None] * n for k in seq_names.values()}
    for i, buf in enumerate(bufs):
        base = int(starts[i])
        try:
            context, lists = wire.parse_sequence(buf)
            for key in ctx_keys:
                value = context.get(key)
                if value is None:
                    continue
                if isinstance(value, wire.Merged):
                    ctx_extras[key][i] = wire.parse_feature_value(joined, _shift(value, base))
                    ctx_ranges[key][i] = (0, 0)
                else:
                    ctx_ranges[key][i] = _shift(value, base)
            for key, per_record in steps.items():
                found = lists.get(key)
                if found is not None:
                    per_record[i] = [(s + base, e + base) for s, e in found]
        except wire.Malformed as exc:
            raise _malformed(exc, "SequenceExample", i) from exc
    get_ctx = _Gather(
        joined, _decode_all(joined, starts, ctx_ranges, ctx_extras, "SequenceExample"), n
    )
    ctx = {name: _assemble(name, spec, get_ctx, n) for name, spec in context_features.items()}
    seq: dict[str, Any] = {}
    out_lengths: dict[str, np.ndarray] = {}
    for name, spec in sequence_features.items():
        key = seq_names[name]
        per_record = steps[key]
        missing = [i for i, s in enumerate(per_record) if s is None]
        if missing and isinstance(spec, FixedLenSequenceFeature) and not spec.allow_missing:
            raise MissingFeatureError(
                f"feature list {name!r} ({spec.dtype}, FixedLenSequenceFeature) is required but "
                "missing; use allow_missing=True to read it as empty",
                index=missing[0],
            )
        steps_per = np.array([len(s) if s else 0 for s in per_record], dtype=np.int64)
        flat = [r for s in per_record if s for r in s]
        step_ranges = np.array(flat, dtype=np.int64).reshape(-1, 2)
        record_of_step = np.repeat(np.arange(n), steps_per)
        try:
            chunks = batch.decode(joined, step_ranges, {})
        except wire.Malformed as exc:
            i = int(record_of_step[exc.record])
            raise _malformed(exc, "SequenceExample", i, int(starts[i])) from exc
        # an empty Feature is a step with no values, of whatever kind the spec wants
        chunks = chunks._replace(kinds=np.where(chunks.kinds == 0, _CODE[spec.dtype], chunks.kinds))
        get = _Gather(joined, {key: chunks}, len(step_ranges), record_of_step)
        value, lens = _sequence_value(name, key.decode("utf-8"), spec, get, steps_per)
        seq[name] = value
        if lens is not None:
            out_lengths[name] = lens
    return ctx, seq, out_lengths


def strip_batch(value: Any) -> Any:
    """The first (only) record of a batch result.

    Args:
        value: one feature's batch result: a :class:`SparseTensorValue` loses its record
            column, a :class:`RaggedTensorValue` its outermost ragged dimension (one with a
            single dimension becomes its flat values), an array its first row.

    >>> from feedline.example import encode_example
    >>> batch = parse_examples([encode_example({"a": [1, 2]})], {"a": VarLenFeature("int64")})
    >>> single = strip_batch(batch["a"])               # indices lose the record column
    >>> single.indices.tolist(), single.values.tolist(), single.dense_shape.tolist()
    ([[0], [1]], [1, 2], [2])
    >>> strip_batch(np.array([[5, 6]])).tolist()
    [5, 6]
    """
    if isinstance(value, SparseTensorValue):
        return SparseTensorValue(
            value.indices[:, 1:].copy(), value.values, value.dense_shape[1:].copy()
        )
    if isinstance(value, RaggedTensorValue):
        if len(value.row_lengths) == 1:
            return value.values
        return RaggedTensorValue(value.values, value.row_lengths[1:])
    return value[0]
