"""Encoding, decoding and parsing of ``tf.train.Example`` records; documented in
:mod:`feedline.example`.

>>> decode_example(encode_example({"label": 3}))
{'label': array([3])}
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from feedline.exceptions import CorruptRecordError
from feedline.formats.example import _native, wire
from feedline.formats.example import parse as _parse
from feedline.formats.example.spec import (
    FixedLenFeature,
    FixedLenSequenceFeature,
    RaggedFeature,
    RaggedTensorValue,
    SparseTensorValue,
    VarLenFeature,
)

__all__ = [
    "BytesList",
    "FixedLenFeature",
    "VarLenFeature",
    "RaggedFeature",
    "FixedLenSequenceFeature",
    "SparseTensorValue",
    "RaggedTensorValue",
    "encode_example",
    "decode_example",
    "encode_sequence_example",
    "decode_sequence_example",
    "parse_example",
    "parse_single_example",
    "parse_sequence_example",
    "parse_single_sequence_example",
]

# --------------------------------------------------------------------------- encoding


class BytesList(list):
    """A ``list`` of ``bytes`` that is known to be a ``bytes_list``, even when empty.

    :func:`decode_example` returns one for an empty ``bytes_list`` (an empty plain list
    would encode as a ``Feature`` with no list set); :func:`encode_example` writes it as a
    ``bytes_list`` whatever its length. It compares, iterates and indexes as a list.

    >>> empty = BytesList()
    >>> empty == [], encode_example({"t": empty}) == encode_example({"t": []})
    (True, False)
    >>> decode_example(encode_example({"t": empty}))["t"]
    BytesList([])
    """

    __slots__ = ()

    def __repr__(self) -> str:
        return f"BytesList({list.__repr__(self)})"


def _int64_array(name: str, values: Any) -> np.ndarray:
    arr = np.asarray(values)
    if arr.dtype.kind == "u" and arr.size and int(arr.max()) > np.iinfo(np.int64).max:
        raise ValueError(f"feature {name!r}: value {int(arr.max())} does not fit in int64")
    if arr.dtype.kind == "O":
        for v in arr.ravel():
            if not -(2**63) <= int(v) < 2**63:
                raise ValueError(f"feature {name!r}: value {int(v)} does not fit in int64")
    return arr.astype(np.int64).ravel()


def _to_feature(name: str, value: Any) -> tuple[str | None, Any]:
    """Map a Python/numpy value to ``(kind, values)`` for :mod:`feedline.formats.example.wire`."""
    tp = type(value)  # the usual types first, without the abstract-class checks
    if tp is np.ndarray and value.dtype.kind in "if":
        if value.dtype.kind == "f":
            return "float", value.astype(np.float32).ravel()
        return "int64", value.astype(np.int64).ravel()
    if tp is int and -(2**63) <= value < 2**63:
        return "int64", np.array([value], np.int64)
    if tp is float:
        return "float", np.array([value], np.float32)
    if tp is bytes:
        return "bytes", [value]
    if tp is list and value:
        first = type(value[0])
        if first is bytes and all(type(v) is bytes for v in value):
            return "bytes", value
        if first is int and all(type(v) is int for v in value):
            try:
                return "int64", np.array(value, np.int64)
            except OverflowError:
                pass  # the general path names the value that does not fit
        elif first is float and all(type(v) is float for v in value):
            return "float", np.array(value, np.float32)
    if value is None:
        return None, None
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "bytes", [bytes(value)]
    if isinstance(value, str):
        return "bytes", [value.encode("utf-8")]
    if isinstance(value, (bool, np.bool_, numbers.Integral)):
        return "int64", _int64_array(name, [int(value)])
    if isinstance(value, numbers.Real):
        return "float", np.asarray([value], dtype=np.float32)
    if isinstance(value, np.ndarray):
        kind = value.dtype.kind
        if kind in "biu":
            return "int64", _int64_array(name, value)
        if kind == "f":
            return "float", value.astype(np.float32).ravel()
        if kind in "SUO":
            return "bytes", [_bytes_item(name, v) for v in value.ravel().tolist()]
        raise TypeError(f"feature {name!r}: cannot encode a numpy array of dtype {value.dtype}")
    if isinstance(value, (list, tuple, range)):
        items = list(value)
        if not items:
            return ("bytes", []) if isinstance(value, BytesList) else (None, None)
        if all(isinstance(v, (bytes, bytearray, memoryview, str)) for v in items):
            return "bytes", [_bytes_item(name, v) for v in items]
        if any(isinstance(v, (bytes, bytearray, memoryview, str)) for v in items):
            raise TypeError(f"feature {name!r}: a list mixes strings and numbers")
        try:
            arr = np.asarray(items)
        except ValueError as exc:
            raise TypeError(f"feature {name!r}: cannot encode {value!r}") from exc
        if arr.dtype.kind in "biu" or (
            arr.dtype.kind == "O" and all(isinstance(v, numbers.Integral) for v in arr.ravel())
        ):
            return "int64", _int64_array(name, arr)
        if arr.dtype.kind == "f":
            return "float", arr.astype(np.float32).ravel()
        raise TypeError(f"feature {name!r}: cannot encode {value!r}")
    raise TypeError(f"feature {name!r}: cannot encode a value of type {type(value).__name__}")


def _bytes_item(name: str, v: Any) -> bytes:
    if isinstance(v, str):
        return v.encode("utf-8")
    if isinstance(v, (bytes, bytearray, memoryview, np.bytes_)):
        return bytes(v)
    raise TypeError(f"feature {name!r}: expected bytes or str items, got {type(v).__name__}")


def _feature_bytes(name: str, value: Any, packed: Any) -> bytes:
    """One serialized ``Feature`` of ``value``: what :func:`encode_example` writes for it."""
    kind, values = _to_feature(name, value)
    return wire.encode_feature(kind, values, packed=packed)


_native.provide(BytesList, _feature_bytes)


def _features_arg(features: Mapping[str, Any], what: str) -> dict:
    if not isinstance(features, Mapping):
        raise TypeError(
            f"`{what}` must be a mapping of names to values, got {type(features).__name__}"
        )
    out = {}
    for name, value in features.items():
        if not isinstance(name, str):
            raise TypeError(f"feature names must be str, got {name!r}")
        out[name] = _to_feature(name, value)
    return out


def encode_example(features: Mapping[str, Any], *, packed: bool = True) -> bytes:
    """Serialize a ``tf.train.Example`` from ``{name: value}`` (see the module doc).

    Args:
        features: feature names (str) to values: ints, floats, ``bytes``/``str``, lists of
            one kind, numpy arrays, or ``None`` for a ``Feature`` with no list set. A
            non-mapping, a non-str name or a value of another type raises ``TypeError``; an
            integer outside int64 raises ``ValueError``.
        packed: true (the default) writes numbers as one packed run; false writes the older
            unpacked encoding.

    >>> import numpy as np
    >>> blob = encode_example({"label": [1, 2], "x": np.array([0.5], np.float32), "name": [b"ab"]})
    >>> type(blob), len(blob)
    (<class 'bytes'>, 50)
    >>> decode_example(blob)
    {'label': array([1, 2]), 'x': array([0.5], dtype=float32), 'name': [b'ab']}
    """
    ext = _native.extension()
    if ext is not None and type(features) is dict:
        blob = ext.encode_example(features, packed)  # None: a name the Python path rejects
        if blob is not None:
            return blob
    if not isinstance(features, Mapping):
        _features_arg(features, "features")  # raises the TypeError
    entries = []
    for name, value in features.items():
        if type(name) is not str:
            raise TypeError(f"feature names must be str, got {name!r}")
        kind, values = _to_feature(name, value)
        entries.append(wire.entry(name.encode("utf-8"), wire.encode_feature(kind, values, packed=packed)))
    return wire.wrap_features(entries)


def encode_sequence_example(
    context: Mapping[str, Any] | None = None,
    feature_lists: Mapping[str, Sequence[Any]] | None = None,
    *,
    packed: bool = True,
) -> bytes:
    """Serialize a ``tf.train.SequenceExample``.

    Args:
        context: the context features, encoded like :func:`encode_example`'s ``features``;
            ``None`` (the default) writes none.
        feature_lists: ``{name: [value per step, ...]}``, each step encoded like a value of
            :func:`encode_example`; ``None`` (the default) writes none. A non-mapping, or a
            list of steps that is a str/bytes or not a sequence, raises ``TypeError``.
        packed: true (the default) writes numbers packed; false writes them unpacked.

    >>> data = encode_sequence_example({"id": 7}, {"tok": [[1, 2], [3]]})
    >>> ctx, lists = decode_sequence_example(data)
    >>> ctx["id"], [v.tolist() for v in lists["tok"]]
    (array([7]), [[1, 2], [3]])
    """
    ctx = _features_arg(context or {}, "context")
    lists = {}
    if feature_lists is not None and not isinstance(feature_lists, Mapping):
        raise TypeError(
            "`feature_lists` must be a mapping of names to lists of values, got "
            f"{type(feature_lists).__name__}"
        )
    for name, steps in (feature_lists or {}).items():
        if not isinstance(name, str):
            raise TypeError(f"feature names must be str, got {name!r}")
        if isinstance(steps, (str, bytes)) or not isinstance(steps, (Sequence, np.ndarray)):
            raise TypeError(f"feature list {name!r} must be a list of steps, got {steps!r}")
        lists[name] = [_to_feature(name, step) for step in steps]
    return wire.encode_sequence_bytes(ctx, lists, packed=packed)


# --------------------------------------------------------------------------- decoding


def _malformed(exc: wire.Malformed, what: str, index: int | None) -> CorruptRecordError:
    err = CorruptRecordError(
        f"malformed {what}: {exc.message} at byte {exc.pos} of the record", index=index
    )
    err.__cause__ = exc
    return err


def _name(key: bytes, what: str, index: int | None) -> str:
    try:
        return key.decode("utf-8")
    except UnicodeDecodeError:
        raise CorruptRecordError(
            f"malformed {what}: feature name {key!r} is not UTF-8", index=index
        ) from None


def _value(buf: bytes, raw: wire.RawFeature) -> Any:
    if raw.kind is None:
        return None
    if raw.kind == "bytes":
        return raw.chunks(buf) if raw.starts else BytesList()
    data = b"".join(raw.chunks(buf))
    if raw.kind == "float":
        return np.frombuffer(data, dtype="<f4").astype(np.float32)
    return wire.decode_varints(data)


def _fast_value(buf: bytes, rng: Any) -> Any:
    """The value of the ``Feature`` at ``rng`` when it is written the usual way (one list
    field with one-byte lengths and, for numbers, one packed run); else the general
    decoder's value. Every shortcut checks exactly what the general path would, so both
    accept and reject the same bytes."""
    if type(rng) is tuple:
        s, e = rng
        if e - s >= 2:
            tag = buf[s]
            n = buf[s + 1]
            if n < 0x80 and s + 2 + n == e:
                if tag == 0x0A:  # bytes_list
                    out = BytesList() if n == 0 else []
                    pos = s + 2
                    while pos < e:
                        if buf[pos] != 0x0A or pos + 1 >= e:
                            break
                        m = buf[pos + 1]
                        stop = pos + 2 + m
                        if m >= 0x80 or stop > e:
                            break
                        out.append(buf[pos + 2:stop])
                        pos = stop
                    else:
                        return out
                elif n == 0:
                    if tag == 0x1A:
                        return np.empty(0, np.int64)
                    if tag == 0x12:
                        return np.empty(0, np.float32)
                elif buf[s + 2] == 0x0A and n >= 2:
                    m = buf[s + 3]
                    if m < 0x80 and s + 4 + m == e:
                        if tag == 0x1A and buf[e - 1] < 0x80:
                            return wire.decode_varints(buf[s + 4:e])
                        if tag == 0x12 and not m % 4:
                            return np.frombuffer(buf, "<f4", m >> 2, s + 4).astype(np.float32)
    return _value(buf, wire.parse_feature_value(buf, rng))


def decode_example(serialized: bytes, *, index: int | None = None) -> dict[str, Any]:
    """Decode a serialized ``Example`` to ``{name: value}``: int64 / float32 arrays,
    lists of ``bytes``, ``None`` for a ``Feature`` with no list set.

    Args:
        serialized: one serialized ``Example`` (``bytes``, ``bytearray``, ``memoryview``);
            another type raises ``TypeError``, damaged bytes
            :class:`~feedline.exceptions.CorruptRecordError` naming the byte position.
        index: the record number to name in errors; it changes nothing else.

    >>> decode_example(encode_example({"ids": [4, 5], "text": [b"hi"], "w": [1.5]}))
    {'ids': array([4, 5]), 'text': [b'hi'], 'w': array([1.5], dtype=float32)}
    >>> decode_example(b"garbage", index=3)
    Traceback (most recent call last):
    ...
    feedline.exceptions.CorruptRecordError: ...
    """
    ext = _native.extension()
    if ext is not None and type(serialized) is bytes:
        decoded = ext.decode_example(serialized)  # None: damaged or unusual, see below
        if decoded is not None:
            return decoded
    buf = _as_bytes(serialized, index)
    try:
        ranges = wire.feature_ranges(buf, 0, len(buf), example=True, strict=True)
        return {_name(k, "Example", index): _fast_value(buf, v) for k, v in ranges.items()}
    except wire.Malformed as exc:
        raise _malformed(exc, "Example", index) from exc


def decode_sequence_example(
    serialized: bytes, *, index: int | None = None
) -> tuple[dict[str, Any], dict[str, list]]:
    """Decode a serialized ``SequenceExample`` to ``(context, feature_lists)``; values as
    in :func:`decode_example`, a feature list as a list of per-step values.

    Args:
        serialized: one serialized ``SequenceExample``; another type than bytes-like raises
            ``TypeError``, damaged bytes :class:`~feedline.exceptions.CorruptRecordError`.
        index: the record number to name in errors; it changes nothing else.

    >>> blob = encode_sequence_example({"id": [7]}, {"tokens": [[1, 2], [3]]})
    >>> decode_sequence_example(blob)
    ({'id': array([7])}, {'tokens': [array([1, 2]), array([3])]})
    """
    buf = _as_bytes(serialized, index)
    what = "SequenceExample"
    try:
        context, lists = wire.parse_sequence(buf, strict=True)
        ctx = {
            _name(k, what, index): _value(buf, wire.parse_feature_value(buf, v))
            for k, v in context.items()
        }
        out = {
            _name(k, what, index): [_value(buf, wire.parse_feature(buf, s, e)) for s, e in steps]
            for k, steps in lists.items()
        }
        return ctx, out
    except wire.Malformed as exc:
        raise _malformed(exc, what, index) from exc


def _as_bytes(serialized: Any, index: int | None) -> bytes:
    if isinstance(serialized, bytes):
        return serialized
    if isinstance(serialized, (bytearray, memoryview, np.bytes_)):
        return bytes(serialized)
    where = "" if index is None else f" (record {index})"
    raise TypeError(f"a serialized Example must be bytes, got {type(serialized).__name__}{where}")


# --------------------------------------------------------------------------- parsing


def parse_example(serialized: Sequence[bytes], features: Mapping[str, Any]) -> dict[str, Any]:
    """Parse a batch of serialized ``Example``s with ``features`` (``{name: spec}``), as
    ``tf.io.parse_example`` does; see the module docstring for the result of each spec.

    The batch is decoded with array operations over all records at once (records
    written in an unusual but valid way take a per-record path with the same result).
    Errors name the record's index in the batch.

    Args:
        serialized: the serialized ``Example``s, a sequence or a numpy array of any shape
            (flattened); one ``bytes`` or ``str`` record alone raises ``TypeError``.
        features: ``{name: spec}`` with :class:`FixedLenFeature`, :class:`VarLenFeature`,
            :class:`RaggedFeature` or :class:`FixedLenSequenceFeature` specs; anything else
            raises ``TypeError`` naming the feature.

    >>> import numpy as np
    >>> batch = [encode_example({"label": [1, 2], "name": [b"ab"]}),
    ...          encode_example({"label": [5, 6], "name": [b"c", b"d"]})]
    >>> out = parse_example(batch, {"label": FixedLenFeature([2], np.int64),
    ...                             "name": VarLenFeature("string")})
    >>> out["label"]
    array([[1, 2],
           [5, 6]])
    >>> out["name"].indices.tolist(), out["name"].values.tolist(), out["name"].dense_shape.tolist()
    ([[0, 0], [1, 0], [1, 1]], [b'ab', b'c', b'd'], [2, 2])
    """
    features = _parse.check_specs(features, "features")
    if type(serialized) is list:  # records already bytes need no conversion
        out = _parse.parse_examples_compiled(serialized, features)
        if out is not None:
            return out
    return _parse.parse_examples(_parse.as_batch(serialized, _as_bytes), features)


def parse_single_example(serialized: bytes, features: Mapping[str, Any]) -> dict[str, Any]:
    """Parse one serialized ``Example``: like :func:`parse_example` without the batch
    dimension (a :class:`RaggedFeature` without partitions gives a plain array).

    Args:
        serialized: one serialized ``Example``.
        features: ``{name: spec}``, as in :func:`parse_example`.

    >>> parse_single_example(encode_example({"x": [1.5, 2]}), {"x": FixedLenFeature([2], float)})
    {'x': array([1.5, 2. ], dtype=float32)}
    """
    out = parse_example([serialized], features)
    return {name: _parse.strip_batch(v) for name, v in out.items()}


def parse_sequence_example(
    serialized: Sequence[bytes],
    context_features: Mapping[str, Any] | None = None,
    sequence_features: Mapping[str, Any] | None = None,
) -> tuple[dict[str, Any], dict[str, Any], dict[str, np.ndarray]]:
    """Parse a batch of serialized ``SequenceExample``s as ``tf.io.parse_sequence_example``:
    returns ``(context, feature_lists, lengths)``; ``lengths[name]`` (int64, per record)
    for each :class:`FixedLenSequenceFeature`.

    Args:
        serialized: the serialized ``SequenceExample``s, a sequence or numpy array (one
            ``bytes`` record alone raises ``TypeError``).
        context_features: ``{name: spec}`` for the context, as in :func:`parse_example`;
            ``None`` (the default) parses none.
        sequence_features: ``{name: spec}`` for the feature lists:
            :class:`FixedLenSequenceFeature`, :class:`VarLenFeature` or
            :class:`RaggedFeature` (a :class:`FixedLenFeature` raises ``TypeError``);
            ``None`` (the default) parses none.

    >>> data = [encode_sequence_example({"id": 1}, {"tok": [[5], [6]]}),
    ...         encode_sequence_example({"id": 2}, {"tok": [[7]]})]
    >>> ctx, seq, lengths = parse_sequence_example(
    ...     data, {"id": FixedLenFeature([], "int64")},
    ...     {"tok": FixedLenSequenceFeature([], "int64")})
    >>> ctx["id"], seq["tok"], lengths["tok"]
    (array([1, 2]), array([[5, 6],
           [7, 0]]), array([2, 1]))
    """
    context_features = _parse.check_specs(context_features or {}, "context_features")
    sequence_features = _parse.check_specs(sequence_features or {}, "sequence_features")
    for name, spec in sequence_features.items():
        if isinstance(spec, FixedLenFeature):
            raise TypeError(
                f"feature list {name!r}: use FixedLenSequenceFeature, not FixedLenFeature"
            )
    bufs = _parse.as_batch(serialized, _as_bytes)
    return _parse.parse_sequences(bufs, context_features, sequence_features)


def parse_single_sequence_example(
    serialized: bytes,
    context_features: Mapping[str, Any] | None = None,
    sequence_features: Mapping[str, Any] | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Parse one serialized ``SequenceExample``: ``(context, feature_lists)`` without the
    batch dimension (a fixed-length feature list is ``(steps, *shape)``).

    Args:
        serialized: one serialized ``SequenceExample``.
        context_features: ``{name: spec}`` for the context; ``None`` parses none.
        sequence_features: ``{name: spec}`` for the feature lists, as in
            :func:`parse_sequence_example`; ``None`` parses none.

    >>> import numpy as np
    >>> blob = encode_sequence_example({"id": [7]}, {"frames": [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]})
    >>> context, lists = parse_single_sequence_example(
    ...     blob, {"id": FixedLenFeature([], np.int64)},
    ...     {"frames": FixedLenSequenceFeature([2], np.float32)})
    >>> int(context["id"]), lists["frames"].shape, lists["frames"][2].tolist()
    (7, (3, 2), [5.0, 6.0])
    """
    ctx, seq, _ = parse_sequence_example([serialized], context_features, sequence_features)
    return (
        {k: _parse.strip_batch(v) for k, v in ctx.items()},
        {k: _parse.strip_batch(v) for k, v in seq.items()},
    )
