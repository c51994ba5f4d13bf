"""Locating and decoding the features of a whole batch of ``Example``s with numpy.

Writers encode an Example the same way every time: one ``features`` field spanning the
record, then map entries ``0a Le 0a klen key 12 vlen Feature``, and a Feature is one list
field holding one packed run (numbers) or a run of ``0a len value`` (bytes). The batch is
joined into one buffer and walked *in lockstep*: step ``k`` reads the ``k``-th entry of
every record at once with array operations (a few dozen numpy calls per step instead of
Python work per record and entry). A record that deviates anywhere (unknown fields,
another field order, a multi-byte key length, unpacked numbers, truncation or any damage)
is handed to the scalar decoder of :mod:`feedline.formats.example.wire`, which implements the
full protobuf rules and reports damage precisely; the result is the same either way.

:func:`locate` returns, for each wanted key, the byte range of its ``Feature`` in each
record; :func:`decode` turns those ranges into per-record kinds and value chunks.

>>> from feedline.formats.example.wire import encode_example_bytes
>>> bufs = [encode_example_bytes({"a": ("int64", [1, 2])}), b""]
>>> joined, starts, ranges, slow = locate(bufs, [b"a", b"b"])
>>> ranges[b"a"].tolist(), ranges[b"b"].tolist(), slow
([[9, 15], [-1, -1]], [[-1, -1], [-1, -1]], [])
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from feedline.formats.example import wire

__all__ = ["join", "locate", "Chunks", "decode"]

_PAD = (
    256  # zero bytes after the joined buffer: reads up to a key length past a record stay in bounds
)
_MASKS = np.array([(1 << (8 * k)) - 1 for k in range(8)] + [2**64 - 1], dtype=np.uint64)


def _varint(arr: np.ndarray, pos: np.ndarray):
    """Vectorised varint of at most 3 bytes at ``pos``: ``(value, size, ok)``."""
    b0 = arr[pos].astype(np.int64)
    one = b0 < 0x80
    if one.all():  # the usual case: every length below 128
        return b0, np.ones(len(pos), dtype=np.int64), one
    b1 = arr[pos + 1].astype(np.int64)
    b2 = arr[pos + 2].astype(np.int64)
    two = ~one & (b1 < 0x80)
    three = ~one & ~two & (b2 < 0x80)
    value = np.where(
        one,
        b0,
        np.where(two, (b0 & 0x7F) | (b1 << 7), (b0 & 0x7F) | ((b1 & 0x7F) << 7) | (b2 << 14)),
    )
    size = np.where(one, 1, np.where(two, 2, 3))
    return value, size, one | two | three


def _u64_at(buf: bytes, pos: np.ndarray) -> np.ndarray:
    view = np.ndarray((len(buf) - 7,), dtype="<u8", buffer=buf, offset=0, strides=(1,))
    return view[pos]


def join(bufs: list[bytes]) -> tuple[bytes, np.ndarray, np.ndarray]:
    """``(joined, lengths, starts)``: the records joined plus zero padding, and each
    record's int64 length and offset in ``joined``.

    Args:
        bufs: the records, each ``bytes``.

    >>> joined, lengths, starts = join([b"ab", b"", b"c"])
    >>> joined[:3], lengths.tolist(), starts.tolist()
    (b'abc', [2, 0, 1], [0, 2, 2])
    """
    n = len(bufs)
    lengths = np.fromiter(map(len, bufs), dtype=np.int64, count=n)
    starts = np.zeros(n, dtype=np.int64)
    if n:
        np.cumsum(lengths[:-1], out=starts[1:])
    return b"".join(bufs) + bytes(_PAD), lengths, starts


def locate(bufs: list[bytes], keys: list[bytes]):
    """Find the ``Feature`` of each wanted key in each record.

    Args:
        bufs: the serialized ``Example``s, each ``bytes``.
        keys: the wanted feature names, UTF-8 encoded.

    Returns ``(joined, starts, ranges, slow)``: the records joined (plus padding), the
    offset of each record in it, ``{key: int64 array (n, 2)}`` of Feature byte ranges in
    ``joined`` (``-1`` where the record lacks the key; the last entry wins), and the
    indices of the records the lockstep walk could not take (their ranges are -1 and
    must be found by the scalar decoder).

    >>> from feedline.example import encode_example
    >>> records = [encode_example({"a": [1, 2]}), encode_example({"b": [b"x"]}), encode_example({"a": [3]})]
    >>> joined, starts, ranges, slow = locate(records, [b"a"])
    >>> starts.tolist(), ranges[b"a"][1].tolist(), slow         # record 1 has no "a"
    ([0, 15, 29], [-1, -1], [])
    >>> s, e = ranges[b"a"][2]
    >>> joined[s:e] == records[2][s - 29:e - 29]                  # a byte range of record 2
    True
    """
    n = len(bufs)
    joined, lengths, starts = join(bufs)
    arr = np.frombuffer(joined, dtype=np.uint8)
    ends = starts + lengths
    ranges = {k: np.full((n, 2), -1, dtype=np.int64) for k in keys}
    bad = np.zeros(n, dtype=bool)

    # the features field: 0a L, spanning the record (an empty record has no features)
    nonempty = lengths > 0
    pos = starts.copy()
    stop = starts.copy()
    idx = np.flatnonzero(nonempty)
    if idx.size:
        p = starts[idx]
        length, size, ok = _varint(arr, p + 1)
        ok &= arr[p] == 0x0A
        body = p + 1 + size
        ok &= body + length == ends[idx]
        bad[idx[~ok]] = True
        pos[idx] = body
        stop[idx] = np.where(ok, body + length, body)

    sigs = []
    for k in keys:
        first = int.from_bytes(k[:8].ljust(8, b"\0"), "little")
        sigs.append((len(k), np.uint64(first), k))

    by_key = {k: ranges[k] for k in keys}
    active = np.flatnonzero(~bad & (pos < stop))
    while active.size:
        p = pos[active]
        elen, esize, ok = _varint(arr, p + 1)
        ok &= arr[p] == 0x0A
        estart = p + 1 + esize
        eend = estart + elen
        ok &= eend <= stop[active]
        ok &= arr[estart] == 0x0A
        klen = arr[estart + 1].astype(np.int64)
        ok &= klen < 0x80
        kstart = estart + 2
        kend = kstart + klen
        ok &= arr[kend] == 0x12
        vlen, vsize, vok = _varint(arr, kend + 1)
        ok &= vok
        vstart = kend + 1 + vsize
        ok &= vstart + vlen == eend
        if not ok.all():
            bad[active[~ok]] = True
            keep = ok
            active, kstart, klen, vstart, eend = (
                active[keep],
                kstart[keep],
                klen[keep],
                vstart[keep],
                eend[keep],
            )
        if active.size:
            head = _u64_at(joined, kstart) & _MASKS[np.minimum(klen, 8)]
            # Writers put the keys in the same order in every record: when the whole
            # step holds the key of its first record, one comparison settles it.
            k0 = int(klen[0])
            same = (klen == k0) & (head == head[0])
            if k0 > 8 and same.all():
                tail = arr[(kstart + 8)[:, None] + np.arange(k0 - 8)]
                same &= (tail == tail[0]).all(axis=1)
            if same.all():
                key = joined[int(kstart[0]):int(kstart[0]) + k0]
                out = by_key.get(key)
                if out is not None:
                    out[active, 0] = vstart
                    out[active, 1] = eend
            else:
                for size, first, key in sigs:
                    hit = np.flatnonzero((klen == size) & (head == first))
                    if hit.size and size > 8:
                        tail = np.frombuffer(key[8:], dtype=np.uint8)
                        got = arr[(kstart[hit] + 8)[:, None] + np.arange(size - 8)]
                        hit = hit[(got == tail).all(axis=1)]
                    if hit.size:
                        out = ranges[key]
                        out[active[hit], 0] = vstart[hit]
                        out[active[hit], 1] = eend[hit]
            pos[active] = eend
        active = active[pos[active] < stop[active]]
    slow = np.flatnonzero(bad)
    for r in ranges.values():
        r[slow] = -1
    return joined, starts, ranges, slow.tolist()


class Chunks(NamedTuple):
    """The values of one key across a batch.

    ``kinds``: per record 0 (absent or a Feature with no list set), 1 bytes, 2 float,
    3 int64. ``record``, ``start``, ``end``: the value chunks in record order (one per
    ``bytes`` value; raw float32 / varint runs for numbers), as byte ranges of the buffer.

    >>> from feedline.example import encode_example
    >>> records = [encode_example({"a": [1, 2]}), encode_example({}), encode_example({"a": [3]})]
    >>> joined, _, ranges, _ = locate(records, [b"a"])
    >>> chunks = decode(joined, ranges[b"a"], {})
    >>> type(chunks).__name__, chunks.kinds.tolist(), chunks.record.tolist()   # 3 = int64, 0 = absent
    ('Chunks', [3, 0, 3], [0, 2])
    """

    kinds: np.ndarray
    record: np.ndarray
    start: np.ndarray
    end: np.ndarray


_KIND_CODE = {None: 0, "bytes": 1, "float": 2, "int64": 3}
_TAG_CODE = np.zeros(256, dtype=np.int8)
_TAG_CODE[0x0A], _TAG_CODE[0x12], _TAG_CODE[0x1A] = 1, 2, 3


def decode(joined: bytes, ranges: np.ndarray, extra: dict[int, wire.RawFeature]) -> Chunks:
    """Kinds and value chunks of the Features at ``ranges``.

    Features written the usual way are decoded in lockstep; the others go through
    :func:`feedline.formats.example.wire.parse_feature`, which raises
    :class:`~feedline.formats.example.wire.Malformed` for damage. Such an exception carries a
    ``record`` attribute naming the record.

    Args:
        joined: the records joined by :func:`join` (or :func:`locate`).
        ranges: int64 ``(n, 2)`` byte ranges of one key's ``Feature`` in ``joined``, one
            row per record, ``-1`` where the record lacks it.
        extra: record index -> :class:`~feedline.formats.example.wire.RawFeature` already
            decoded by the scalar path (ranges into ``joined``); these take precedence
            over ``ranges`` for their record.

    >>> from feedline.example import encode_example
    >>> records = [encode_example({"t": [b"ab", b"c"]}), encode_example({"t": [b"d"]})]
    >>> joined, _, ranges, _ = locate(records, [b"t"])
    >>> chunks = decode(joined, ranges[b"t"], {})
    >>> chunks.kinds.tolist(), [joined[s:e] for s, e in zip(chunks.start, chunks.end)]
    ([1, 1], [b'ab', b'c', b'd'])
    """
    n = len(ranges)
    arr = np.frombuffer(joined, dtype=np.uint8)
    kinds = np.zeros(n, dtype=np.int8)
    recs: list[np.ndarray] = []
    starts: list[np.ndarray] = []
    ends: list[np.ndarray] = []
    scalar: list[int] = []

    present = np.flatnonzero(ranges[:, 0] >= 0)
    fs, fe = ranges[present, 0], ranges[present, 1]
    nonempty = fe > fs
    # a Feature message with no bytes has no list set: kind 0, nothing to add
    idx, fs, fe = present[nonempty], fs[nonempty], fe[nonempty]
    if idx.size:
        code = _TAG_CODE[arr[fs]]
        llen, lsize, ok = _varint(arr, fs + 1)
        ls = fs + 1 + lsize
        ok &= (code > 0) & (ls + llen == fe)
        numeric = ok & (code >= 2)
        # numbers: one packed run 0a m payload filling the list, or an empty list
        num_idx = np.flatnonzero(numeric)
        if num_idx.size:
            nls, nle = ls[num_idx], fe[num_idx]
            empty = nls == nle
            plen, psize, pok = _varint(arr, nls + 1)
            pstart = nls + 1 + psize
            good = empty | (pok & (arr[nls] == 0x0A) & (pstart + plen == nle))
            ncode = code[num_idx]
            # damage the scalar decoder must report: floats not in 4s, a cut varint
            good &= ~((ncode == 2) & (plen % 4 != 0) & ~empty)
            good &= ~((ncode == 3) & (arr[nle - 1] >= 0x80) & ~empty)
            ok[num_idx[~good]] = False
            use = good & ~empty
            recs.append(idx[num_idx[use]])
            starts.append(pstart[use])
            ends.append(nle[use])
        # bytes: a run of 0a len value filling the list, walked in lockstep
        byte_idx = np.flatnonzero(ok & (code == 1))
        if byte_idx.size:
            q, qend, who = ls[byte_idx].copy(), fe[byte_idx], byte_idx
            walking = np.flatnonzero(q < qend)
            while walking.size:
                p = q[walking]
                vlen, vsize, vok = _varint(arr, p + 1)
                vstart = p + 1 + vsize
                vend = vstart + vlen
                vok &= (arr[p] == 0x0A) & (vend <= qend[walking])
                ok[who[walking[~vok]]] = False
                walking = walking[vok]
                recs.append(idx[who[walking]])
                starts.append(vstart[vok])
                ends.append(vend[vok])
                q[walking] = vend[vok]
                walking = walking[q[walking] < qend[walking]]
        kinds[idx[ok]] = code[ok]
        scalar = idx[~ok].tolist()
    record = np.concatenate(recs) if recs else np.empty(0, np.int64)
    start = np.concatenate(starts) if starts else np.empty(0, np.int64)
    end = np.concatenate(ends) if ends else np.empty(0, np.int64)
    if scalar:  # drop partial lockstep results of records that need the full decoder
        keep = ~np.isin(record, scalar)
        record, start, end = record[keep], start[keep], end[keep]
    todo: dict[int, wire.RawFeature | None] = {i: None for i in scalar}
    todo.update(extra)
    if todo:
        more_r, more_s, more_e = [record], [start], [end]
        for i, raw in todo.items():
            if raw is None:
                try:
                    raw = wire.parse_feature(joined, int(ranges[i, 0]), int(ranges[i, 1]))
                except wire.Malformed as exc:
                    exc.record = i
                    raise
            kinds[i] = _KIND_CODE[raw.kind]
            if raw.starts:
                more_r.append(np.full(len(raw.starts), i, dtype=np.int64))
                more_s.append(np.asarray(raw.starts, dtype=np.int64))
                more_e.append(np.asarray(raw.ends, dtype=np.int64))
        record = np.concatenate(more_r)
        start = np.concatenate(more_s)
        end = np.concatenate(more_e)
    order = np.argsort(record, kind="stable")
    return Chunks(kinds, record[order], start[order], end[order])
