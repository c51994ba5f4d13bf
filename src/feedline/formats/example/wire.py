"""Protocol-buffer wire format of ``tf.train.Example`` and ``SequenceExample``, by hand.

The messages (``tensorflow/core/example/{example,feature}.proto``)::

    Example         { Features features = 1; }
    SequenceExample { Features context = 1; FeatureLists feature_lists = 2; }
    Features        { map<string, Feature> feature = 1; }
    FeatureLists    { map<string, FeatureList> feature_list = 1; }
    FeatureList     { repeated Feature feature = 1; }
    Feature         { oneof kind { BytesList bytes_list = 1; FloatList float_list = 2;
                                   Int64List int64_list = 3; } }
    BytesList { repeated bytes value = 1; }
    FloatList { repeated float value = 1 [packed = true]; }
    Int64List { repeated int64 value = 1 [packed = true]; }

Decoding follows protobuf's rules: fields in any order, unknown fields skipped (groups
included), a repeated message field merged, the last map entry for a key winning, the
last member of a ``oneof`` winning (two members of the same kind merge), packed and
unpacked numeric encodings both accepted. Damage (a truncated field, a varint longer
than 10 bytes, a length running past its message, a packed float run not a multiple of
4 bytes, wire types 6 and 7, an unbalanced group) raises :class:`Malformed` with the
byte position inside the message.

A decoded ``Feature`` is a :class:`RawFeature`: its kind (``"bytes"``, ``"float"``,
``"int64"`` or ``None`` for a ``Feature`` with no list set) and the byte ranges
(``starts``, ``ends``) in the message holding its values: one range per ``bytes`` value,
raw little-endian float32 runs, raw varint runs. Turning ranges into numbers is left to
:func:`decode_varints` and numpy, so a batch is converted with a few array operations.

>>> msg = encode_example_bytes({"a": ("int64", [1, 300]), "b": ("bytes", [b"x"])})
>>> raw = parse_features(msg, 0, len(msg), example=True)
>>> raw[b"a"].kind, decode_varints(b"".join(raw[b"a"].chunks(msg))).tolist()
('int64', [1, 300])
>>> [bytes(c) for c in raw[b"b"].chunks(msg)]
[b'x']
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = [
    "Malformed",
    "RawFeature",
    "parse_features",
    "parse_feature",
    "parse_feature_value",
    "Merged",
    "single_run",
    "parse_sequence",
    "decode_varints",
    "encode_varint",
    "encode_feature",
    "encode_example_bytes",
    "encode_sequence_bytes",
]

KINDS = ("bytes", "float", "int64")
_KIND_OF_FIELD = {1: "bytes", 2: "float", 3: "int64"}
_FIELD_OF_KIND = {"bytes": 1, "float": 2, "int64": 3}


class Malformed(Exception):
    """The bytes are not a valid message; ``pos`` is the byte position of the problem."""

    def __init__(self, message: str, pos: int) -> None:
        super().__init__(message)
        self.message = message
        self.pos = pos

    record: int  # set by the batch decoder: the record (or step) the problem is in


class RawFeature(NamedTuple):
    """A ``Feature`` located in a serialized message: ``kind`` and value byte ranges.

    >>> buf = encode_feature("bytes", [b"ab", b"c"])
    >>> raw = parse_feature(buf, 0, len(buf))
    >>> raw.kind, raw.chunks(buf), raw.nbytes()
    ('bytes', [b'ab', b'c'], 3)
    """

    kind: str | None
    starts: list[int]
    ends: list[int]

    def chunks(self, buf: bytes) -> list[bytes]:
        """The value byte ranges cut out of ``buf``, in order.

        Args:
            buf: the buffer the feature was located in (its ranges index into it).
        """
        return [buf[s:e] for s, e in zip(self.starts, self.ends)]

    def nbytes(self) -> int:
        return sum(self.ends) - sum(self.starts)


EMPTY = RawFeature(None, [], [])

# --------------------------------------------------------------------------- primitives


def _varint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """Decode the varint at ``pos``; return ``(value, next position)``."""
    result = 0
    shift = 0
    start = pos
    while True:
        if pos >= end:
            raise Malformed("truncated varint", start)
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result & 0xFFFFFFFFFFFFFFFF, pos
        shift += 7
        if shift >= 70:
            raise Malformed("varint longer than 10 bytes", start)


def _tag(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """Decode a field tag (a varint below 2**32 with a field number >= 1)."""
    key, nxt = _varint(buf, pos, end)
    if key >> 32 or key < 8:
        raise Malformed("invalid field tag" if key >> 32 else "field number 0", pos)
    return key, nxt


def _length(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """Length prefix at ``pos``: return ``(end of the field's bytes, start of them)``."""
    b = buf[pos] if pos < end else 0x80
    if b < 0x80:
        n, pos = b, pos + 1
    else:
        n, pos = _varint(buf, pos, end)
    stop = pos + n
    if stop > end:
        raise Malformed(f"length {n} runs past the end of its message", pos)
    return stop, pos


def _skip_field(buf: bytes, pos: int, end: int) -> int:
    """Skip the whole field (tag and value) that starts at ``pos``; return its end."""
    key, after = _tag(buf, pos, end)
    if key >> 3 == 0:
        raise Malformed("field number 0", pos)
    return _skip(buf, after, end, key, pos)


def _skip(buf: bytes, pos: int, end: int, key: int, tag_pos: int, depth: int = 0) -> int:
    """Skip the value of the field whose tag ``key`` ended at ``pos``."""
    wire = key & 7
    if wire == 0:
        return _varint(buf, pos, end)[1]
    if wire == 2:
        return _length(buf, pos, end)[0]
    if wire == 5:
        if pos + 4 > end:
            raise Malformed("truncated fixed32", pos)
        return pos + 4
    if wire == 1:
        if pos + 8 > end:
            raise Malformed("truncated fixed64", pos)
        return pos + 8
    if wire == 3:  # a group: skip fields up to the end-group tag of the same number
        if depth > 64:
            raise Malformed("groups nested too deeply", tag_pos)
        while True:
            if pos >= end:
                raise Malformed("group without its end tag", tag_pos)
            inner_pos = pos
            inner, pos = _tag(buf, pos, end)
            if inner >> 3 == 0:
                raise Malformed("field number 0", inner_pos)
            if inner & 7 == 4:
                if inner >> 3 != key >> 3:
                    raise Malformed("end-group tag does not match its group", inner_pos)
                return pos
            pos = _skip(buf, pos, end, inner, inner_pos, depth + 1)
    if wire == 4:
        raise Malformed("end-group tag without a group", tag_pos)
    raise Malformed(f"invalid wire type {wire}", tag_pos)


# --------------------------------------------------------------------------- features


def _list_ranges(buf: bytes, pos: int, end: int, kind: str, starts: list, ends: list) -> None:
    """Append the value ranges of a BytesList/FloatList/Int64List in ``buf[pos:end]``."""
    while pos < end:
        tag_pos = pos
        b = buf[pos]
        if b < 0x80:
            key, pos = b, pos + 1
        else:
            key, pos = _tag(buf, pos, end)
        field, wire = key >> 3, key & 7
        if field == 0:
            raise Malformed("field number 0", tag_pos)
        if field == 1:
            if wire == 2:
                stop, pos = _length(buf, pos, end)
                if kind == "float" and (stop - pos) % 4:
                    raise Malformed("packed floats not a multiple of 4 bytes", pos)
                if kind == "int64" and stop > pos and buf[stop - 1] >= 0x80:
                    raise Malformed("packed varints end inside a varint", stop - 1)
                starts.append(pos)
                ends.append(stop)
                pos = stop
                continue
            if wire == 5 and kind == "float":
                if pos + 4 > end:
                    raise Malformed("truncated fixed32", pos)
                starts.append(pos)
                ends.append(pos + 4)
                pos += 4
                continue
            if wire == 0 and kind == "int64":
                stop = _varint(buf, pos, end)[1]
                starts.append(pos)
                ends.append(stop)
                pos = stop
                continue
        pos = _skip(buf, pos, end, key, tag_pos)


def single_run(buf: bytes, pos: int, end: int) -> tuple[str, int, int] | None:
    """``(kind, start, end)`` when the ``Feature`` in ``buf[pos:end]`` is written the
    usual way with one value range (one packed run, or one bytes value), else ``None``
    (then use :func:`parse_feature`).

    Args:
        buf: the buffer holding the ``Feature`` message.
        pos: the message's first byte in ``buf``.
        end: one past its last byte.

    Raises:
        Malformed: packed floats not a multiple of 4 bytes, or packed varints that end
            inside a varint.

    >>> buf = encode_feature("int64", np.array([1, 2, 3]))       # one packed varint run
    >>> kind, start, end = single_run(buf, 0, len(buf))
    >>> kind, list(buf[start:end])
    ('int64', [1, 2, 3])
    >>> buf = encode_feature("bytes", [b"a", b"b"])              # two values: no single run
    >>> single_run(buf, 0, len(buf)) is None
    True
    """
    if end - pos < 4 or buf[pos + 2] != 0x0A:
        return None
    tag = buf[pos]
    n = buf[pos + 1]
    m = buf[pos + 3]
    if n >= 0x80 or m >= 0x80 or pos + 4 + m != end or pos + 2 + n != end:
        return None
    start = pos + 4
    if tag == 0x12:
        if m % 4:
            raise Malformed("packed floats not a multiple of 4 bytes", start)
        return "float", start, end
    if tag == 0x1A:
        if m and buf[end - 1] >= 0x80:
            raise Malformed("packed varints end inside a varint", end - 1)
        return "int64", start, end
    if tag == 0x0A:
        return "bytes", start, end
    return None


def parse_feature(buf: bytes, pos: int, end: int) -> RawFeature:
    """Decode the ``Feature`` message in ``buf[pos:end]``.

    Args:
        buf: the buffer holding the message.
        pos: the message's first byte in ``buf``.
        end: one past its last byte (``pos == end`` is an empty ``Feature``).

    Raises:
        Malformed: the bytes are not a valid ``Feature``.

    >>> buf = encode_feature("float", np.array([1.5], dtype=np.float32))
    >>> raw = parse_feature(buf, 0, len(buf))
    >>> raw.kind, np.frombuffer(raw.chunks(buf)[0], "<f4").tolist()
    ('float', [1.5])
    """
    if pos == end:
        return EMPTY
    # Fast path: one list field holding one packed run (or nothing), as writers emit.
    tag = buf[pos]
    if tag in (0x0A, 0x12, 0x1A) and pos + 1 < end:
        n = buf[pos + 1]
        if n < 0x80 and pos + 2 + n == end:
            kind = _KIND_OF_FIELD[tag >> 3]
            if n == 0:
                return RawFeature(kind, [], [])
            if kind != "bytes" and buf[pos + 2] == 0x0A:
                m = buf[pos + 3]
                if m < 0x80 and pos + 4 + m == end:
                    start = pos + 4
                    if kind == "float" and m % 4:
                        raise Malformed("packed floats not a multiple of 4 bytes", start)
                    if kind == "int64" and m and buf[end - 1] >= 0x80:
                        raise Malformed("packed varints end inside a varint", end - 1)
                    return RawFeature(kind, [start], [end])
    return _feature_fields(buf, ((pos, end),))


def parse_feature_value(buf: bytes, value) -> RawFeature:
    """Decode a ``Feature`` given as a ``(start, end)`` range or a :class:`Merged`.

    Args:
        buf: the buffer the range indexes into.
        value (tuple[int, int] | Merged): a ``(start, end)`` byte range, or a
            :class:`Merged` of ranges (a key that appeared more than once, merged as
            protobuf does).

    >>> buf = encode_feature("int64", np.array([7]))
    >>> parse_feature_value(buf, (0, len(buf))) == parse_feature(buf, 0, len(buf))
    True
    """
    if isinstance(value, Merged):
        return _feature_fields(buf, value)
    return parse_feature(buf, value[0], value[1])


def _feature_fields(buf: bytes, ranges) -> RawFeature:
    kind = None
    starts: list[int] = []
    ends: list[int] = []
    for pos, end in ranges:
        while pos < end:
            tag_pos = pos
            key, pos = _tag(buf, pos, end)
            field, wire = key >> 3, key & 7
            if field in _KIND_OF_FIELD and wire == 2:
                stop, pos = _length(buf, pos, end)
                new = _KIND_OF_FIELD[field]
                if new != kind:  # another oneof member replaces the current one
                    kind, starts, ends = new, [], []
                _list_ranges(buf, pos, stop, new, starts, ends)
                pos = stop
            else:
                pos = _skip(buf, pos, end, key, tag_pos)
    return RawFeature(kind, starts, ends)


class Merged(tuple):
    """Several byte ranges of one message field that protobuf merges (a map entry whose
    value field appears more than once); parse them in order as one message.

    >>> a, b = encode_feature("int64", np.array([1])), encode_feature("int64", np.array([2]))
    >>> buf = a + b                    # the same field twice: protobuf merges the lists
    >>> raw = parse_feature_value(buf, Merged([(0, len(a)), (len(a), len(buf))]))
    >>> raw.kind, [list(c) for c in raw.chunks(buf)]
    ('int64', [[1], [2]])
    """


def _utf8(key: bytes, pos: int) -> None:
    try:
        key.decode("utf-8")
    except UnicodeDecodeError:
        raise Malformed(f"feature name {key!r} is not UTF-8", pos) from None


def _map_entry(buf: bytes, pos: int, end: int, check=None, strict: bool = False):
    """Decode a map entry: return ``(key, value)`` where value is ``(start, end)`` of
    the value message (or a :class:`Merged` of ranges), or ``None`` when the entry holds
    fields other than its key and value (protobuf's upb parser then keeps the whole
    entry as an unknown field, so the map does not get it)."""
    # Fast path: key (field 1) then value (field 2), short lengths.
    if end - pos >= 4 and buf[pos] == 0x0A:
        klen = buf[pos + 1]
        if klen < 0x80:
            kend = pos + 2 + klen
            if kend + 2 <= end and buf[kend] == 0x12:
                vlen = buf[kend + 1]
                if vlen < 0x80 and kend + 2 + vlen == end:
                    if strict:
                        _utf8(buf[pos + 2 : kend], pos + 2)
                    return buf[pos + 2 : kend], (kend + 2, end)
    key = b""
    values = []
    unknown = False
    while pos < end:
        tag_pos = pos
        k, pos = _tag(buf, pos, end)
        if k == 0x0A:
            stop, pos = _length(buf, pos, end)
            key = buf[pos:stop]
            if strict:
                _utf8(key, pos)
            pos = stop
        elif k == 0x12:
            stop, pos = _length(buf, pos, end)
            values.append((pos, stop))
            pos = stop
        else:
            pos = _skip(buf, pos, end, k, tag_pos)
            unknown = True
    if unknown:
        if check is not None:  # the value is still parsed (and must be well formed)
            check(buf, Merged(values))
        return key, None
    if not values:
        return key, (end, end)  # an absent value is an empty message
    return key, values[0] if len(values) == 1 else Merged(values)


def _features_into(buf: bytes, pos: int, end: int, out: dict, strict: bool = False) -> None:
    """Add the entries of the ``Features`` message in ``buf[pos:end]`` to ``out``
    (key -> (start, end) of the Feature message)."""
    while pos < end:
        tag_pos = pos
        if buf[pos] == 0x0A:
            n = buf[pos + 1] if pos + 1 < end else 0x80
            if n < 0x80:
                start = pos + 2
                stop = start + n
                if stop > end:
                    raise Malformed(f"length {n} runs past the end of its message", start)
            else:
                stop, start = _length(buf, pos + 1, end)
            # Fast path: key (field 1) then value (field 2), one-byte lengths.
            if stop - start >= 4 and buf[start] == 0x0A:
                kend = start + 2 + buf[start + 1]
                if kend + 2 <= stop and buf[kend] == 0x12 and kend + 2 + buf[kend + 1] == stop:
                    if buf[start + 1] < 0x80 and buf[kend + 1] < 0x80:
                        if strict:
                            _utf8(buf[start + 2 : kend], start + 2)
                        out[buf[start + 2 : kend]] = (kend + 2, stop)
                        pos = stop
                        continue
            key, value = _map_entry(buf, start, stop, _feature_fields, strict)
            if value is not None:
                out[key] = value
            pos = stop
            continue
        pos = _skip_field(buf, tag_pos, end)


def parse_features(buf: bytes, pos: int, end: int, *, example: bool, strict: bool = True) -> dict:
    """Return ``{key bytes: RawFeature}`` for an ``Example`` (``example=True``) or a bare
    ``Features`` message in ``buf[pos:end]``, in first-appearance order of the keys.

    Args:
        buf: the buffer holding the message.
        pos: the message's first byte in ``buf``.
        end: one past its last byte.
        example: true when ``buf[pos:end]`` is an ``Example`` (features in its field 1),
            false for a bare ``Features`` message.
        strict: true (the default) rejects feature names that are not UTF-8 with
            :class:`Malformed` (as protobuf does).

    >>> buf = encode_example_bytes({"a": ("int64", np.array([5])), "b": ("bytes", [b"x"])})
    >>> found = parse_features(buf, 0, len(buf), example=True)
    >>> list(found), found[b"b"].chunks(buf)
    ([b'a', b'b'], [b'x'])
    """
    ranges = feature_ranges(buf, pos, end, example=example, strict=strict)
    return {k: parse_feature_value(buf, v) for k, v in ranges.items()}


def feature_ranges(buf: bytes, pos: int, end: int, *, example: bool, strict: bool = False) -> dict:
    """Like :func:`parse_features` but the values are the ``(start, end)`` byte ranges of
    the (not yet decoded) ``Feature`` messages (or a :class:`Merged` of ranges)."""
    out: dict = {}
    if not example:
        _features_into(buf, pos, end, out, strict)
        return out
    while pos < end:
        tag_pos = pos
        b = buf[pos]
        if b == 0x0A:
            stop, start = _length(buf, pos + 1, end)
            _features_into(buf, start, stop, out, strict)
            pos = stop
            continue
        pos = _skip_field(buf, tag_pos, end)
    return out


def _feature_list_into(buf: bytes, pos: int, end: int, out: list) -> None:
    """Append the ``(start, end)`` ranges of the Features of a ``FeatureList``."""
    while pos < end:
        tag_pos = pos
        if buf[pos] == 0x0A:
            stop, start = _length(buf, pos + 1, end)
            out.append((start, stop))
            pos = stop
            continue
        pos = _skip_field(buf, tag_pos, end)


def _check_feature_list(buf: bytes, ranges) -> None:
    steps: list = []
    for start, stop in ranges:
        _feature_list_into(buf, start, stop, steps)
    for step in steps:
        _feature_fields(buf, (step,))


def parse_sequence(buf: bytes, strict: bool = False) -> tuple[dict, dict]:
    """Decode a ``SequenceExample``: ``(context ranges, feature lists)`` where context is
    ``{key: (start, end)}`` of Feature messages and feature lists are ``{key: [(start,
    end), ...]}``, one range per step.

    Args:
        buf: the whole serialized ``SequenceExample``.
        strict: true rejects feature names that are not UTF-8 with :class:`Malformed`;
            false (the default) accepts any bytes.

    >>> buf = encode_sequence_bytes({"id": ("int64", np.array([7]))},
    ...                             {"t": [("int64", np.array([1])), ("int64", np.array([2, 3]))]})
    >>> context, lists = parse_sequence(buf)
    >>> list(context), len(lists[b"t"])
    ([b'id'], 2)
    >>> start, end = lists[b"t"][1]
    >>> [list(c) for c in parse_feature(buf, start, end).chunks(buf)]
    [[2, 3]]
    """
    context: dict = {}
    lists: dict = {}
    pos, end = 0, len(buf)
    while pos < end:
        tag_pos = pos
        key, pos = _tag(buf, pos, end)
        field, wire = key >> 3, key & 7
        if field == 0:
            raise Malformed("field number 0", tag_pos)
        if field == 1 and wire == 2:
            stop, pos = _length(buf, pos, end)
            _features_into(buf, pos, stop, context, strict)
            pos = stop
        elif field == 2 and wire == 2:
            stop, pos = _length(buf, pos, end)
            while pos < stop:  # FeatureLists: map<string, FeatureList> = 1
                inner = pos
                k, pos = _tag(buf, pos, stop)
                if k == 0x0A:
                    estop, estart = _length(buf, pos, stop)
                    name, value = _map_entry(buf, estart, estop, _check_feature_list, strict)
                    if value is not None:
                        steps: list = []
                        for vs, ve in value if isinstance(value, Merged) else (value,):
                            _feature_list_into(buf, vs, ve, steps)
                        lists[name] = steps
                    pos = estop
                else:
                    if k >> 3 == 0:
                        raise Malformed("field number 0", inner)
                    pos = _skip(buf, pos, stop, k, inner)
            pos = stop
        else:
            pos = _skip(buf, pos, end, key, tag_pos)
    return context, lists


# --------------------------------------------------------------------------- numbers


def decode_varints(data: bytes | np.ndarray) -> np.ndarray:
    """Decode concatenated varints (each ending with a byte < 0x80) to int64, vectorised.

    Values are taken modulo 2**64 and reinterpreted as signed, as protobuf does for int64.

    Args:
        data: the varints, ``bytes`` or a uint8 array; it must end with a terminating
            byte (the parsers guarantee it). A varint longer than 10 bytes raises
            :class:`Malformed`.

    >>> decode_varints(bytes([1, 0xAC, 0x02]) + b"\\xff" * 9 + b"\\x01").tolist()
    [1, 300, -1]
    """
    if not isinstance(data, bytes):
        pass
    elif data.isascii():  # every byte < 0x80: one byte per value (also the empty case)
        return np.frombuffer(data, dtype=np.uint8).astype(np.int64)
    elif len(data) <= 64:  # a short run: a Python loop beats numpy's per-call costs
        out = []
        value = shift = 0
        start = 0
        for i, b in enumerate(data):
            value |= (b & 0x7F) << shift
            if b < 0x80:
                out.append(value & 0xFFFFFFFFFFFFFFFF)
                value = shift = 0
                start = i + 1
            else:
                shift += 7
                if shift >= 70:
                    raise Malformed("varint longer than 10 bytes", start)
        return np.array(out, dtype=np.uint64).view(np.int64)
    arr = np.frombuffer(data, dtype=np.uint8)
    if not arr.size:
        return np.empty(0, dtype=np.int64)
    if int(arr.max()) < 0x80:
        return arr.astype(np.int64)
    is_end = arr < 0x80
    ends = np.flatnonzero(is_end)
    starts = np.empty_like(ends)
    starts[0] = 0
    starts[1:] = ends[:-1] + 1
    # position of each byte inside its varint
    group: np.ndarray = np.cumsum(is_end) - is_end
    within = np.arange(arr.size) - starts[group]
    if int(within.max()) >= 10:
        raise Malformed("varint longer than 10 bytes", int(starts[group[np.argmax(within)]]))
    parts = (arr & 0x7F).astype(np.uint64) << (7 * within).astype(np.uint64)
    return np.bitwise_or.reduceat(parts, starts).view(np.int64)


def count_varints(data: bytes) -> int:
    return int(np.count_nonzero(np.frombuffer(data, dtype=np.uint8) < 0x80))


# --------------------------------------------------------------------------- encoding


_ONE_BYTE = [bytes((i,)) for i in range(0x80)]
_INT64 = np.dtype(np.int64)
_FLOAT32 = np.dtype("<f4")


def encode_varint(value: int) -> bytes:
    """Varint of ``value`` taken modulo 2**64 (negative int64 use 10 bytes).

    Args:
        value: any Python int; it is reduced modulo 2**64.

    >>> list(encode_varint(1)), list(encode_varint(300)), len(encode_varint(-1))
    ([1], [172, 2], 10)
    """
    if 0 <= value < 0x80:
        return _ONE_BYTE[value]
    value &= 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _len_field(tag: int, payload: bytes) -> bytes:
    n = len(payload)
    if n < 0x80:
        return bytes((tag, n)) + payload
    return bytes((tag,)) + encode_varint(n) + payload


def _packed_list(tag: int, data: bytes) -> bytes:
    """A ``FloatList``/``Int64List`` field ``tag`` holding the packed values ``data``
    (an empty list has no ``value`` field)."""
    if not data:
        return bytes((tag, 0))
    n = len(data)
    if n < 0x7E:
        return bytes((tag, n + 2, 0x0A, n)) + data
    return _len_field(tag, _len_field(0x0A, data))


def _varints(values: np.ndarray) -> bytes:
    """Encode int64 values as concatenated varints (vectorised)."""
    if values.size <= 16:  # short lists: Python ints beat numpy's per-call costs
        items = values.tolist()
        if not items:
            return b""
        if min(items) >= 0 and max(items) < 0x80:
            return bytes(items)
        parts = []
        for v in items:
            if 0 <= v < 0x4000:
                parts.append(bytes((v,)) if v < 0x80 else bytes(((v & 0x7F) | 0x80, v >> 7)))
            else:
                parts.append(encode_varint(v))
        return b"".join(parts)
    u = values.astype(np.int64).view(np.uint64)
    if int(u.max()) < 0x80:
        return u.astype(np.uint8).tobytes()
    nbytes = np.ones(u.size, dtype=np.int64)
    rest = u >> np.uint64(7)
    while True:
        more = rest > 0
        if not more.any():
            break
        nbytes += more
        rest >>= np.uint64(7)
    total = int(nbytes.sum())
    offsets = np.cumsum(nbytes) - nbytes
    owner = np.repeat(np.arange(u.size), nbytes)
    k = np.arange(total) - offsets[owner]
    byte = ((u[owner] >> (np.uint64(7) * k.astype(np.uint64))) & np.uint64(0x7F)).astype(np.uint8)
    last = k == nbytes[owner] - 1
    byte[~last] |= 0x80
    return byte.tobytes()


def encode_feature(kind: str | None, values, *, packed: bool = True) -> bytes:
    """Serialize one ``Feature``.

    Args:
        kind: ``"bytes"``, ``"float"`` or ``"int64"``, or ``None`` for an empty
            ``Feature`` (no list set); another value raises ``ValueError``.
        values (Any): for ``"bytes"`` a list of ``bytes``; for ``"float"``/``"int64"``
            anything numpy turns into a float32/int64 array (flattened); ignored for
            ``None``.
        packed: true (the default) writes numbers as one packed run; false writes one
            field per number.

    >>> encode_feature("int64", np.array([1, 2, 3])).hex()    # Feature{int64_list{packed 1, 2, 3}}
    '1a050a03010203'
    >>> encode_feature(None, None).hex()                      # an empty Feature
    ''
    """
    if kind is None:
        return b""
    if kind == "bytes":
        body = b"".join([bytes((0x0A, len(v))) + v if len(v) < 0x80 else _len_field(0x0A, v)
                         for v in values])
        return _len_field(0x0A, body)
    if kind == "float":
        arr = values if type(values) is np.ndarray and values.dtype == _FLOAT32 and values.ndim == 1 \
            else np.asarray(values, dtype="<f4").ravel()
        if packed:
            return _packed_list(0x12, arr.tobytes())
        body = b"".join(b"\x0d" + v.tobytes() for v in arr)
        return _len_field(0x12, body)
    if kind == "int64":
        arr = values if type(values) is np.ndarray and values.dtype == _INT64 and values.ndim == 1 \
            else np.asarray(values, dtype=np.int64).ravel()
        if packed:
            return _packed_list(0x1A, _varints(arr))
        body = b"".join(b"\x08" + encode_varint(int(v)) for v in arr)
        return _len_field(0x1A, body)
    raise ValueError(f"unknown feature kind {kind!r}")


def entry(name: bytes, feature: bytes) -> bytes:
    """A ``Features`` map entry (field 1) for ``name`` and a serialized ``Feature``."""
    k = len(name)
    f = len(feature)
    if k < 0x80 and f < 0x80 and k + f + 4 < 0x80:
        return bytes((0x0A, k + f + 4, 0x0A, k)) + name + bytes((0x12, f)) + feature
    return _len_field(0x0A, _len_field(0x0A, name) + _len_field(0x12, feature))


def _features_bytes(features: dict, packed: bool) -> bytes:
    return b"".join([entry(name.encode("utf-8"), encode_feature(kind, values, packed=packed))
                     for name, (kind, values) in features.items()])


def wrap_features(entries: list) -> bytes:
    """An ``Example`` from its serialized ``Features`` map entries (:func:`entry`)."""
    if not entries:
        return b""
    return _len_field(0x0A, b"".join(entries))


def encode_example_bytes(features: dict, *, packed: bool = True) -> bytes:
    """Serialize an ``Example`` from ``{name: (kind, values)}``.

    Args:
        features: feature name (str) to ``(kind, values)`` as :func:`encode_feature`
            takes them; an empty dict gives ``b""``.
        packed: true (the default) writes numbers packed.

    >>> from feedline.example import decode_example
    >>> buf = encode_example_bytes({"a": ("int64", np.array([5])), "b": ("bytes", [b"x"])})
    >>> decode_example(buf)
    {'a': array([5]), 'b': [b'x']}
    """
    if not features:
        return b""
    return _len_field(0x0A, _features_bytes(features, packed))


def encode_sequence_bytes(context: dict, feature_lists: dict, *, packed: bool = True) -> bytes:
    """Serialize a ``SequenceExample`` from ``{name: (kind, values)}`` context features and
    ``{name: [(kind, values), ...]}`` feature lists.

    Args:
        context: context feature name to ``(kind, values)``, as :func:`encode_feature`
            takes them; empty writes no context.
        feature_lists: feature list name to one ``(kind, values)`` per step; empty writes
            no feature lists.
        packed: true (the default) writes numbers packed.

    >>> from feedline.example import decode_sequence_example
    >>> buf = encode_sequence_bytes({"id": ("int64", np.array([7]))},
    ...                             {"t": [("int64", np.array([1])), ("int64", np.array([2, 3]))]})
    >>> decode_sequence_example(buf)
    ({'id': array([7])}, {'t': [array([1]), array([2, 3])]})
    """
    out = []
    if context:
        out.append(_len_field(0x0A, _features_bytes(context, packed)))
    if feature_lists:
        entries = []
        for name, steps in feature_lists.items():
            body = b"".join(
                _len_field(0x0A, encode_feature(kind, values, packed=packed))
                for kind, values in steps
            )
            entry = _len_field(0x0A, name.encode("utf-8")) + _len_field(0x12, body)
            entries.append(_len_field(0x0A, entry))
        out.append(_len_field(0x12, b"".join(entries)))
    return b"".join(out)
