"""The C accelerator of ``feedline.example`` (``formats/example/_wire.c``) against the
pure-Python path: identical results (dtype, shape, values, bytes, types) and identical
errors (class, message, record index) for decode_example, encode_example and
parse_example, on TensorFlow's fixtures and on Examples generated at the wire level,
written the usual way and every unusual way the decoder accepts, then damaged."""

from __future__ import annotations

import contextlib
import struct
import warnings

import numpy as np
import pytest

from feedline import example as ex
from feedline import tfrecord
from feedline.formats.example import _native
from test_example import SPEC as FIXTURE_SPEC  # the fixture's spec, as TF parses it

# --------------------------------------------------------------------------- helpers


@contextlib.contextmanager
def python_path():
    """Run the block with the C extension switched off (the fallback every caller has)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_native, "extension", lambda: None)
        yield


def _outcome(fn):
    """``("ok", result, warnings)`` or ``("error", class, message, index)``."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = fn()
        except Exception as err:  # noqa: BLE001 - every exception must match
            return ("error", type(err), str(err), getattr(err, "index", None))
    return ("ok", result, [(w.category, str(w.message)) for w in caught])


def both(fn):
    """``fn()`` on the compiled path and on the pure-Python path; assert they agree and
    return the compiled path's outcome."""
    fast = _outcome(fn)
    with python_path():
        slow = _outcome(fn)
    assert fast[0] == slow[0], (fast, slow)
    if fast[0] == "error":
        assert fast[1:] == slow[1:]
    else:
        assert_same(fast[1], slow[1])
        assert fast[2] == slow[2]
    return fast


def assert_same(a, b, where="result"):
    """Equal values of equal types: arrays by dtype, shape and bytes (NaN payloads and
    the sign of zero included), lists by type (``BytesList`` vs ``list``) and items."""
    assert type(a) is type(b), f"{where}: {type(a).__name__} vs {type(b).__name__}"
    if isinstance(a, dict):
        assert list(a) == list(b), where
        for k in a:
            assert_same(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape, f"{where}: {a!r} vs {b!r}"
        if a.dtype == object:
            assert a.tolist() == b.tolist(), where
            assert all(type(x) is bytes for x in a.ravel().tolist()), where
        else:
            assert a.tobytes() == b.tobytes(), f"{where}: {a!r} vs {b!r}"
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{where}[{i}]")
    else:
        assert a == b, f"{where}: {a!r} vs {b!r}"


def _ext():
    ext = _native.extension()
    if ext is None:
        pytest.skip("the C extension is not built")
    return ext


def test_the_extension_is_built():
    """CI builds it (it needs only a C compiler); without it the Python path does the
    same work."""
    assert _native.extension() is not None


# --------------------------------------------------------------------------- wire writer


def varint(v: int) -> bytes:
    v &= 2**64 - 1
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _wide(v: int) -> bytes:
    """``v`` (< 2**14) as a two-byte varint, the second byte possibly 0 (non-canonical)."""
    return bytes(((v & 0x7F) | 0x80, v >> 7))


def field(number: int, wire: int, payload: bytes = b"", *, wide_tag: bool = False,
          wide_len: bool = False) -> bytes:
    """A field; ``wide_tag``/``wide_len`` write the tag/length as two-byte varints."""
    key = number << 3 | wire
    tag = _wide(key) if wide_tag and key < 0x4000 else varint(key)
    if wire == 2:
        n = len(payload)
        return tag + (_wide(n) if wide_len and n < 0x4000 else varint(n)) + payload
    return tag + payload


INTS = [0, 1, 127, 128, 300, -1, -(2**63), 2**63 - 1, 2**40, -5]
FLOATS = [0.0, -0.0, 1.5, -2.25, float("inf"), float("-inf"), float("nan"), 1e-45, 3.4e38]
NAN_PAYLOAD = struct.pack("<I", 0x7FC12345)  # a NaN with a payload: bytes must survive
KEYS = ["label", "ids", "名前", "", "k" * 150, "e\u0301", "x", "tags"]


def list_body(rng, kind: str, n: int) -> bytes:
    """A BytesList/FloatList/Int64List body of ``n`` values, written one of the ways
    the decoder accepts (packed, unpacked, split runs, unknown fields between)."""
    how = rng.integers(0, 5)
    if kind == "bytes":
        vals = [bytes(rng.integers(0, 256, int(rng.choice([0, 1, 3, 130])), dtype=np.uint8))
                for _ in range(n)]
        body = b"".join(field(1, 2, v) for v in vals)
    elif kind == "float":
        raw = [NAN_PAYLOAD if rng.random() < 0.1 else struct.pack("<f", rng.choice(FLOATS))
               for _ in range(n)]
        if how == 0:
            body = b"".join(field(1, 5, r) for r in raw)  # unpacked
        elif how == 1 and n > 1:
            body = field(1, 2, b"".join(raw[:1])) + field(1, 2, b"".join(raw[1:]))
        else:
            body = field(1, 2, b"".join(raw)) if n else b""
    else:
        vals = [int(rng.choice(INTS)) if rng.random() < 0.7 else int(rng.integers(-99, 999))
                for _ in range(n)]
        if how == 0:
            body = b"".join(field(1, 0, varint(v)) for v in vals)  # unpacked
        elif how == 1 and n > 1:  # a packed run, then unpacked values
            body = field(1, 2, varint(vals[0])) + b"".join(field(1, 0, varint(v)) for v in vals[1:])
        else:
            body = field(1, 2, b"".join(varint(v) for v in vals)) if n else b""
    if how == 4:  # unknown fields inside the list
        body = field(7, 0, varint(5)) + body + field(8, 2, b"zz") + field(9, 5, b"abcd")
    return body


FIELD_OF = {"bytes": 1, "float": 2, "int64": 3}


def feature(rng, kind: str | None, n: int) -> bytes:
    """A Feature message of ``kind`` (None: no list set) with ``n`` values."""
    if kind is None:
        return b"" if rng.random() < 0.7 else field(9, 0, b"\x01")  # only an unknown field
    body = field(FIELD_OF[kind], 2, list_body(rng, kind, n), wide_tag=rng.random() < 0.1)
    r = rng.random()
    if r < 0.1:  # another kind first (after this one): the last oneof member wins
        other = [k for k in FIELD_OF if k != kind][int(rng.integers(0, 2))]
        body = field(FIELD_OF[other], 2, list_body(rng, other, 2)) + body
        if rng.random() < 0.5:
            body = field(FIELD_OF[kind], 2, list_body(rng, kind, 2)) + body
    elif r < 0.2 and n:  # the same kind twice: the lists merge
        body = field(FIELD_OF[kind], 2, list_body(rng, kind, 1)) + body
    elif r < 0.3:
        body = field(6, 1, b"12345678") + body  # an unknown fixed64 field
    return body


def entry(rng, key: str, feat: bytes, odd: bool, rare: bool) -> bytes:
    """A map entry; ``odd`` picks an unusual valid layout, ``rare`` includes the ones the
    C decoder leaves to Python (an unknown field in the entry, the value twice)."""
    k = field(1, 2, key.encode("utf-8"))
    v = field(2, 2, feat)
    if odd:
        r = rng.integers(0, 6 if rare else 4)
        if r == 0:
            return v + k  # value first
        if r == 1 and not feat:
            return k  # no value: an empty Feature
        if r == 2:
            return field(1, 2, key.encode("utf-8"), wide_len=True) + field(2, 2, feat, wide_len=True)
        if r == 4:
            return k + v + field(3, 0, b"\x01")  # an unknown field: Python drops the entry
        if r == 5:
            return k + v + field(2, 2, b"")  # the value twice: protobuf merges them
        return field(1, 2, key.encode("utf-8"), wide_tag=True) + v
    return k + v


def example_bytes(rng, features: list[tuple[str, bytes]], odd: bool, rare: bool) -> bytes:
    entries = [field(1, 2, entry(rng, k, f, odd and rng.random() < 0.3, rare))
               for k, f in features]
    if not odd:
        return field(1, 2, b"".join(entries)) if entries else b""
    cut = int(rng.integers(0, len(entries) + 1))
    parts = [field(1, 2, b"".join(entries[:cut])), field(1, 2, b"".join(entries[cut:]))]
    r = rng.random()
    if r < 0.2:
        parts.insert(1, field(5, 0, varint(2**40)))  # unknown Example fields
        parts.append(field(6, 5, b"wxyz") + field(7, 1, b"8bytes!!"))
    elif r < 0.3:
        parts.insert(1, field(1, 0, b"\x01"))  # field 1 with another wire type: skipped
    elif r < 0.4:
        parts.insert(0, field(4, 2, b"x", wide_tag=True, wide_len=True))
    elif r < 0.5 and rare:
        parts.append(field(3, 3) + field(1, 0, b"\x01") + field(3, 4))  # a group
    return b"".join(parts)


def random_example(rng, schema: dict[str, tuple[str, int | None]], odd: bool,
                   rare: bool = True) -> bytes:
    """An Example following ``schema`` ``{key: (kind, fixed count or None)}``: keys
    missing at random, a few of the wrong kind, duplicates, unknown fields; ``odd``
    writes it in unusual valid ways, ``rare`` also in those the C decoder leaves to
    Python."""
    feats = []
    for key, (kind, count) in schema.items():
        if rng.random() < 0.15:
            continue
        n = count if count is not None else int(rng.integers(0, 6))
        k: str | None = kind
        if rng.random() < 0.05:
            k = None
        elif odd and rng.random() < 0.03:
            k = [x for x in FIELD_OF if x != kind][0]
        feats.append((key, feature(rng, k, n)))
    if odd and feats and rng.random() < 0.3:  # a key twice: the last entry wins
        key = feats[int(rng.integers(0, len(feats)))][0]
        feats.append((key, feature(rng, schema[key][0], int(rng.integers(0, 4)))))
    if rng.random() < 0.3:
        feats.insert(0, ("unwanted", feature(rng, "bytes", 2)))
    rng.shuffle(feats)
    return example_bytes(rng, feats, odd, rare)


def damaged(rng, blob: bytes) -> bytes:
    if not blob:
        return b"\x0a"
    b = bytearray(blob)
    r = rng.random()
    if r < 0.4:
        return bytes(b[: int(rng.integers(0, len(b)))])
    for _ in range(int(rng.integers(1, 3))):
        b[int(rng.integers(0, len(b)))] = int(rng.integers(0, 256))
    return bytes(b)


SCHEMA = {
    "fi": ("int64", 2),
    "ff": ("float", 4),
    "fs": ("bytes", 1),
    "vi": ("int64", None),
    "vf": ("float", None),
    "vs": ("bytes", None),
    "名前": ("int64", None),
}


@pytest.fixture(scope="module")
def tf_records(fixtures_dir):
    tf = fixtures_dir / "tensorflow"
    public = fixtures_dir / "public"
    return {
        "examples": list(tfrecord.read(tf / "examples.tfrecord")),
        "sequences": list(tfrecord.read(tf / "sequence_examples.tfrecord")),
        "pwnall": list(tfrecord.read(public / "pwnall_singles.tfrecords")),
        "penguin": list(tfrecord.read(public / "tfx_penguin_eval.tfrecord.gz"))[:200],
        "tfx_sequence": list(tfrecord.read(public / "tfx_sequence_eval.tfrecord.gz"))[:100],
    }


# --------------------------------------------------------------------------- decode_example


def test_decode_matches_python_on_the_fixtures(tf_records):
    ext = _ext()
    for name, records in tf_records.items():
        for r in records:
            both(lambda r=r: ex.decode_example(r))
            if name != "sequences" and name != "tfx_sequence":
                assert ext.decode_example(r) is not None  # the compiled path took it


@pytest.mark.parametrize("seed", range(6))
def test_decode_matches_python_on_generated_examples(seed):
    ext = _ext()
    rng = np.random.default_rng(seed)
    for i in range(300):
        blob = random_example(rng, SCHEMA, odd=bool(i % 2), rare=i % 4 == 1)
        bad = damaged(rng, blob)
        both(lambda blob=blob: ex.decode_example(blob))
        both(lambda bad=bad, i=i: ex.decode_example(bad, index=i))
        both(lambda blob=blob, i=i: ex.decode_example(bytearray(blob), index=i))
        # all but the rare layouts decode in C
        assert ext.decode_example(blob) is not None or i % 4 == 1


def test_decode_edge_cases_match_python():
    cases = [
        b"",
        b"\x0a\x00",
        b"\x0a\x05\x0a",
        b"\x0a\x80",
        b"\x0e",
        b"\x1c",
        b"\x1b\x08\x01",
        b"\x08" + b"\xff" * 11,
        b"\x00",
        b"garbage",
        field(1, 2, field(1, 2, field(1, 2, b"\xff") + field(2, 2, b""))),  # name not UTF-8
        field(1, 2, field(1, 2, field(2, 2, field(3, 2, field(1, 2, b"\x80"))))),  # cut varint
        field(1, 2, field(1, 2, field(2, 2, field(2, 2, field(1, 2, b"abc"))))),  # floats % 4
        field(1, 2, field(1, 2, field(2, 2, field(3, 2, field(1, 2, b"\xff" * 10 + b"\x01"))))),
        field(1, 2, field(1, 2, field(1, 2, b"k") + field(2, 2, b"") + field(2, 2, b""))),
        field(1, 2, field(1, 2, field(1, 2, b"a") + field(1, 2, b"b"))),  # the key twice
        field(1, 2, field(1, 2, field(2, 2, field(1, 2, b"")))),  # no key: name ""
        field(1, 2, field(1, 2, field(1, 2, b"k") + field(2, 2, field(0, 0, b"\x01")))),
        field(1, 2, field(1, 2, field(1, 2, b"k") + field(2, 2, field(3, 2, field(1, 1, b"1234567"))))),
    ]
    for blob in cases:
        both(lambda blob=blob: ex.decode_example(blob, index=4))
    for bad in ("text", 5, None):
        both(lambda bad=bad: ex.decode_example(bad))


# --------------------------------------------------------------------------- encode_example


def _values(rng):
    """Python and numpy values of every kind encode_example takes (and some it refuses)."""
    return [
        None, 0, -1, 2**63 - 1, -(2**63), 2**63, -(2**63) - 1, True, np.int64(5), np.float32(2.5),
        1.5, -0.0, float("nan"), float("inf"), 1e300, -1e300, 3.4028235e38, 3.4028236e38,
        b"", b"abc", bytes(200), "", "名前", "\ud800", bytearray(b"ba"), memoryview(b"mv"),
        [], [1, 2, 3], [1, 2**63], [1, 2.5], [2.5, 1], [0.5, float("nan")], [1e300],
        [b"a", b""], [b"a", "b"], ["x", "y"], ["\udc80"], [b"a", 1], [1, b"a"], [True, 1],
        [[1, 2]], [None], (1, 2), range(3), [np.int64(1)], {1: 2}, object(),
        ex.BytesList(), ex.BytesList([b"q"]), ex.BytesList(["s"]), ex.BytesList([1]),
        np.arange(5), np.arange(5, dtype=np.int8) - 2, np.arange(4, dtype=np.int16) * 1000,
        np.arange(3, dtype=np.int32) - 7, np.arange(4, dtype=np.uint8) + 250,
        np.arange(3, dtype=np.uint16) * 30000, np.array([2**32 - 2, 2**32 - 1], dtype=np.uint32),
        np.array([2**63 + 5], dtype=np.uint64), np.array([7], dtype=np.uint64),
        np.array([True, False]), np.array([1.5, np.nan], dtype=np.float32),
        np.frombuffer(NAN_PAYLOAD * 2, dtype=np.float32), np.array([1.1, 1e300, -0.0]),
        np.array([0.1, 2.5]), np.array([1.5], dtype=np.float16), np.array(7), np.array(7.5),
        np.arange(12).reshape(3, 4), np.arange(12).reshape(3, 4).T, np.arange(10)[::2],
        np.arange(6, dtype=np.float32).reshape(2, 3)[:, ::-1], np.array([], dtype=np.int64),
        np.array([], dtype=np.float32), np.array([], dtype=bytes), np.array([b"a", b"bc"]),
        np.array(["u", "v"]), np.array([b"o", "p"], dtype=object), np.array([1, 2], dtype=">i8"),
        np.array([1.5], dtype=">f4"), np.array([1 + 2j]), np.array([1.5], dtype=np.longdouble),
        np.array(["2020-01-01"], dtype="datetime64[D]"), np.ma.array([1, 2]),
        rng.integers(-(2**63), 2**63 - 1, 40, dtype=np.int64), rng.standard_normal(30),
        rng.standard_normal(30).astype(np.float32), list(rng.integers(0, 2**40, 20).tolist()),
    ]


@pytest.mark.parametrize("packed", [True, False])
def test_encode_matches_python_for_each_value(packed):
    _ext()
    rng = np.random.default_rng(0)
    for value in _values(rng):
        for name in ("v", "名前", ""):
            both(lambda value=value, name=name: ex.encode_example({name: value}, packed=packed))


@pytest.mark.parametrize("seed", range(4))
def test_encode_matches_python_for_mixed_dicts(seed):
    _ext()
    rng = np.random.default_rng(seed)
    values = _values(rng)
    for _ in range(200):
        n = int(rng.integers(0, 6))
        d = {KEYS[int(rng.integers(0, len(KEYS)))] + str(j): values[int(rng.integers(0, len(values)))]
             for j in range(n)}
        both(lambda d=d: ex.encode_example(d))
        both(lambda d=d: ex.encode_example(d, packed=0))


def test_encode_arguments_and_names_match_python():
    _ext()
    for features in ({1: 2}, {"a": 1, 2: 3}, {"a": 1, "\ud800": 2}, [("a", 1)], "a", None):
        both(lambda f=features: ex.encode_example(f))

    class Mapping(dict):
        pass

    both(lambda: ex.encode_example(Mapping(a=1)))


def test_encode_reencodes_decoded_records_byte_identically(tf_records):
    _ext()
    for name, records in tf_records.items():
        if "sequence" in name:
            continue
        for r in records:
            decoded = ex.decode_example(r)
            blob = both(lambda d=decoded: ex.encode_example(d))[1]
            assert blob == r


# --------------------------------------------------------------------------- parse_example

SPECS = {
    "dense_int": ex.FixedLenFeature([2], "int64", default_value=[-1, -2]),
    "dense_int_2d": ex.FixedLenFeature([1, 2], np.int64, default_value=7),
    "dense_float": ex.FixedLenFeature([2, 2], "float32", default_value=0.5),
    "dense_str": ex.FixedLenFeature([], "string", default_value="d"),
    "required_int": ex.FixedLenFeature([2], "int64"),
    "var_int": ex.VarLenFeature("int64"),
    "var_float": ex.VarLenFeature("float32"),
    "var_str": ex.VarLenFeature(bytes),
    "ragged": ex.RaggedFeature("int64", value_key="vi"),
    "ragged_str": ex.RaggedFeature("string", value_key="vs"),
    "ragged_uniform": ex.RaggedFeature(
        "float32", value_key="ff", partitions=[ex.RaggedFeature.UniformRowLength(2)]
    ),
    "ragged_rows": ex.RaggedFeature(
        "int64", value_key="vi", partitions=[ex.RaggedFeature.RowLengths("名前")]
    ),
    "seq_int": ex.FixedLenSequenceFeature([], "int64", allow_missing=True),
    "seq_float": ex.FixedLenSequenceFeature([2], "float32", allow_missing=True, default_value=9),
    "seq_str": ex.FixedLenSequenceFeature([], "string", allow_missing=True),
    "seq_no_missing": ex.FixedLenSequenceFeature([], "int64"),
    "wrong_kind": ex.VarLenFeature("float32"),
}
# which generated key each spec reads (Ragged specs name theirs with value_key)
SPEC_KEYS = {
    "dense_int": "fi", "dense_int_2d": "fi", "dense_float": "ff", "dense_str": "fs",
    "required_int": "fi", "var_int": "vi", "var_float": "vf", "var_str": "vs",
    "seq_int": "vi", "seq_float": "vf", "seq_str": "vs", "seq_no_missing": "vi",
    "wrong_kind": "vi",
}


def _spec_dict(name: str) -> dict:
    key = SPEC_KEYS.get(name, name)
    return {key: SPECS[name]}


def _parse_both(batch, spec):
    both(lambda: ex.parse_example(batch, spec))
    both(lambda: ex.parse_example(np.array(batch + [b""], dtype=object), spec))


def test_parse_matches_python_on_the_fixtures(tf_records):
    ext = _ext()
    spec = FIXTURE_SPEC
    records = tf_records["examples"]
    assert ext.scan_examples(records, [k.encode() for k in spec]) is not None
    _parse_both(records, spec)
    _parse_both(records[:1], spec)
    both(lambda: ex.parse_single_example(records[0], spec))
    both(lambda: ex.parse_example([], spec))
    # everything else as Examples read with a spec of every key they hold
    for recs in tf_records.values():
        keys = {k for r in recs[:50] for k in ex.decode_example(r)}
        for kind in ("int64", "float32", "string"):
            _parse_both(recs, {k: ex.VarLenFeature(kind) for k in keys})
            _parse_both(recs, {k: ex.RaggedFeature(kind) for k in keys})


@pytest.mark.parametrize("seed", range(5))
def test_parse_matches_python_on_generated_batches(seed):
    ext = _ext()
    rng = np.random.default_rng(100 + seed)
    taken = 0
    for round_ in range(12):
        odd, rare = round_ % 3 > 0, round_ % 3 == 2
        batch = [random_example(rng, SCHEMA, odd, rare) for _ in range(int(rng.integers(1, 40)))]
        scanned = ext.scan_examples(batch, [k.encode() for k in SCHEMA]) is not None
        assert scanned or rare  # unusual but valid layouts are scanned in C too
        taken += scanned
        for name in SPECS:
            _parse_both(batch, _spec_dict(name))
        both(lambda batch=batch: ex.parse_example(batch, {"vi": SPECS["var_int"],
                                                          "vs": SPECS["ragged_str"],
                                                          "ff": SPECS["dense_float"]}))
        # damaged records: the same CorruptRecordError, naming the same record and byte
        i = int(rng.integers(0, len(batch)))
        bad = batch[:i] + [damaged(rng, batch[i])] + batch[i + 1:]
        _parse_both(bad, {"vi": SPECS["var_int"], "fs": SPECS["dense_str"]})
    assert taken >= 8


def test_parse_with_consistent_records_has_no_errors():
    """Batches every spec accepts, so the comparison covers values, not just errors."""
    _ext()
    rng = np.random.default_rng(7)
    for _ in range(10):
        batch = []
        for _ in range(int(rng.integers(1, 30))):
            n = int(rng.integers(0, 4))
            batch.append(ex.encode_example({
                "fi": rng.integers(-(2**63), 2**63 - 1, 2, dtype=np.int64),
                "ff": rng.standard_normal(4).astype(np.float32),
                "fs": [bytes(rng.integers(0, 256, int(rng.integers(0, 5)), dtype=np.uint8))],
                "vi": rng.integers(-5, 2**40, 2 * n, dtype=np.int64),
                "vf": rng.standard_normal(2 * n).astype(np.float32),
                "vs": ex.BytesList([b"s%d" % j for j in range(n)]),
                "名前": [n, n],
            }, packed=bool(rng.integers(0, 2))))
        for name in SPECS:
            outcome = both(lambda batch=batch, name=name: ex.parse_example(batch, _spec_dict(name)))
            if name not in ("seq_no_missing", "wrong_kind"):
                assert outcome[0] == "ok", (name, outcome)


def test_parse_argument_errors_match_python():
    _ext()
    good = ex.encode_example({"x": [1.0, 2.0]})
    spec = {"x": ex.FixedLenFeature([2], "float32")}
    for batch in ([good, 5], [good, "text"], good, [good, bytearray(good)], (good, good),
                  [good, good[:-3]], [good, ex.encode_example({"x": [1, 2]})],
                  [good, ex.encode_example({"x": 1.5})], [ex.encode_example({})]):
        both(lambda batch=batch: ex.parse_example(batch, spec))
