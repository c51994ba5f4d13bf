"""TFRecord: fixtures written by TensorFlow 2.21, round trips, damage, resume, index."""

from __future__ import annotations

import base64
import gzip
import json
import pickle
import re
import struct
import zlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from feedline import tfrecord
from feedline.exceptions import CorruptRecordError
from feedline.formats.tfrecord.scan import frame, scan

FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module")
def tf_dir(fixtures_dir):
    return fixtures_dir / "tensorflow"


@pytest.fixture(scope="module")
def expected(tf_dir):
    return json.loads((tf_dir / "expected.json").read_text())


@pytest.fixture(scope="module")
def payloads(expected):
    return [base64.b64decode(x) for x in expected["raw.tfrecord"]["records_base64"]]


def _read_all(path, **kw):
    return list(tfrecord.read(path, **kw))


# --------------------------------------------------------------------------- fixtures


@pytest.mark.parametrize(
    "name, compression",
    [("raw.tfrecord", None), ("raw.gz.tfrecord", "GZIP"), ("raw.zlib.tfrecord", "ZLIB")],
)
def test_fixture_payloads(tf_dir, expected, name, compression):
    want = [base64.b64decode(x) for x in expected[name]["records_base64"]]
    assert expected[name]["compression"] == compression
    assert tfrecord.detect_compression(tf_dir / name) == compression
    assert _read_all(tf_dir / name) == want
    assert _read_all(tf_dir / name, compression=compression) == want
    batches = list(tfrecord.read_batches(tf_dir / name, 5))
    assert [len(b) for b in batches] == [5, 5, 2]
    assert [r for b in batches for r in b] == want


def test_fixture_offsets(tf_dir, expected):
    it = tfrecord.read(tf_dir / "raw.tfrecord")
    offsets = []
    for _ in it:
        pass
    it = tfrecord.read(tf_dir / "raw.tfrecord")
    while True:
        offsets.append(it.get_state()["offset"])
        if next(it, None) is None:
            break
    assert offsets[:-1] == expected["raw.tfrecord"]["record_offsets"]


def test_writer_is_byte_identical_to_tensorflow(tf_dir, payloads, tmp_path):
    path = tmp_path / "mine.tfrecord"
    with tfrecord.TFRecordWriter(path) as w:
        for p in payloads:
            w.write(p)
    assert path.read_bytes() == (tf_dir / "raw.tfrecord").read_bytes()
    assert tfrecord.write(tmp_path / "again.tfrecord", payloads) == len(payloads)
    assert (tmp_path / "again.tfrecord").read_bytes() == path.read_bytes()


@pytest.mark.parametrize(
    "name", ["corrupt_data_crc.tfrecord", "corrupt_length_crc.tfrecord", "truncated.tfrecord"]
)
def test_damaged_fixtures_fail_where_tensorflow_fails(tf_dir, expected, payloads, name):
    exp = expected[name]
    path = tf_dir / name
    got = []
    with pytest.raises(CorruptRecordError) as info:
        for record in tfrecord.read(path):
            got.append(record)
    assert got == payloads[: exp["records_before_error"]]
    err = info.value
    assert err.offset == exp["bad_record_offset"]
    assert err.index == exp["records_before_error"]
    assert err.path == str(path)
    # TensorFlow's text names the offset it reports; feedline's message carries it too.
    tf_offset = int(re.search(r"record at (\d+)", exp["tensorflow_error"]).group(1))
    assert str(tf_offset) in str(err)
    kind = {
        "corrupt_data_crc.tfrecord": "data CRC mismatch",
        "corrupt_length_crc.tfrecord": "length CRC mismatch",
        "truncated.tfrecord": "truncated record",
    }[name]
    pattern = (
        f"^{re.escape(str(path))}: record {exp['records_before_error']} "
        f"at byte {exp['bad_record_offset']}: .*{kind}"
    )
    with pytest.raises(CorruptRecordError, match=pattern):
        _read_all(path)
    with pytest.raises(CorruptRecordError, match=pattern):
        list(tfrecord.read_batches(path, 100))


def test_data_crc_message_names_tensorflows_data_offset(tf_dir):
    with pytest.raises(CorruptRecordError, match=r"data of 2559 bytes at byte 2755\)"):
        _read_all(tf_dir / "corrupt_data_crc.tfrecord")


@pytest.mark.parametrize(
    "name, missing",
    [
        ("corrupt_data_crc.tfrecord", [6]),
        ("corrupt_length_crc.tfrecord", [4]),
        ("truncated.tfrecord", list(range(8, 12))),
    ],
)
def test_damaged_fixtures_skip_and_warn(tf_dir, payloads, name, missing):
    it = tfrecord.read(tf_dir / name, on_error="skip")
    got = list(it)
    assert got == [p for i, p in enumerate(payloads) if i not in missing]
    assert it.skipped == 1
    assert it.skipped_bytes > 0
    with pytest.warns(RuntimeWarning, match=f"skipping damaged data: .*{re.escape(name)}: record"):
        assert _read_all(tf_dir / name, on_error="warn") == got


def test_verify_false_returns_damaged_payload(tf_dir, payloads):
    got = _read_all(tf_dir / "corrupt_data_crc.tfrecord", verify=False)
    assert len(got) == len(payloads)
    assert got[6] != payloads[6] and len(got[6]) == len(payloads[6])
    assert got[:6] == payloads[:6] and got[7:] == payloads[7:]


def test_repeated_next_after_error_raises_again(tf_dir):
    it = tfrecord.read(tf_dir / "corrupt_length_crc.tfrecord")
    assert len(it.next_batch(100)) == 4  # short batch: the records before the damage
    for _ in range(2):
        with pytest.raises(CorruptRecordError, match="at byte 324"):
            next(it)
    assert it.get_state()["offset"] == 324


# --------------------------------------------------------------------------- round trips


@pytest.mark.parametrize("compression", [None, "GZIP", "ZLIB", "gzip"])
def test_round_trip(tmp_path, compression):
    records = [b"", b"x", bytes(range(256)) * 50, b"\x00" * 7] + [b"r%d" % i for i in range(100)]
    path = tmp_path / "f.tfrecord"
    assert tfrecord.write(path, records, compression=compression) == len(records)
    want = None if compression is None else compression.upper()
    assert tfrecord.detect_compression(path) == want
    assert _read_all(path) == records
    for block in (16, 100, 1 << 20):
        assert list(tfrecord.TFRecordReader(path, block_size=block)) == records


def test_gzip_output_is_standard_gzip(tmp_path):
    path = tmp_path / "f.tfrecord.gz"
    tfrecord.write(path, [b"abc", b"de"], compression="GZIP")
    assert gzip.decompress(path.read_bytes()) == frame(b"abc") + frame(b"de")
    path2 = tmp_path / "g.tfrecord"
    tfrecord.write(path2, [b"abc"], compression="ZLIB")
    assert zlib.decompress(path2.read_bytes()) == frame(b"abc")


def test_concatenated_gzip_members_read_as_one(tmp_path):
    path = tmp_path / "cat.gz"
    path.write_bytes(gzip.compress(frame(b"one")) + gzip.compress(frame(b"two")))
    assert _read_all(path) == [b"one", b"two"]


def test_empty_file(tmp_path):
    path = tmp_path / "empty.tfrecord"
    tfrecord.write(path, [])
    assert path.read_bytes() == b""
    assert _read_all(path) == []
    assert list(tfrecord.read_batches(path, 3)) == []
    tfrecord.write(tmp_path / "e.gz", [], compression="GZIP")
    assert _read_all(tmp_path / "e.gz") == []


def test_writer_flush_makes_records_readable(tmp_path):
    for compression in (None, "GZIP"):
        path = tmp_path / f"flush-{compression}"
        w = tfrecord.TFRecordWriter(path, compression=compression)
        w.write(b"early")
        w.flush()
        data = path.read_bytes()
        if compression:
            data = zlib.decompressobj(31).decompress(data)
        assert data == frame(b"early")
        w.close()
        w.close()  # idempotent
        assert w.closed


def test_writer_rejects_bad_input(tmp_path):
    with pytest.raises(
        ValueError, match="`compression` must be one of None, 'GZIP', 'ZLIB', got 'lz4'"
    ):
        tfrecord.TFRecordWriter(tmp_path / "x", compression="lz4")
    with pytest.raises(
        ValueError, match="`compression` must be one of None, 'GZIP', 'ZLIB', got 'auto'"
    ):
        tfrecord.TFRecordWriter(tmp_path / "x", compression="auto")
    w = tfrecord.TFRecordWriter(tmp_path / "y")
    with pytest.raises(TypeError, match="a TFRecord record must be bytes-like, got str"):
        w.write("text")
    w.write(bytearray(b"ok"))
    w.write(memoryview(b"ok2"))
    w.close()
    with pytest.raises(ValueError, match="write to a closed TFRecordWriter"):
        w.write(b"late")
    assert _read_all(tmp_path / "y") == [b"ok", b"ok2"]


def test_reader_rejects_bad_options(tmp_path):
    path = tmp_path / "f"
    tfrecord.write(path, [b"a"])
    with pytest.raises(
        ValueError, match="`on_error` must be one of 'raise', 'skip', 'warn', got 'ignore'"
    ):
        tfrecord.read(path, on_error="ignore")
    with pytest.raises(ValueError, match="`batch_size` must be a positive int, got 0"):
        tfrecord.read_batches(path, 0)
    with pytest.raises(TypeError, match="`verify` must be a bool, got 1"):
        tfrecord.read(path, verify=1)
    with pytest.raises(ValueError, match="`block_size` must be a positive int, got -1"):
        tfrecord.TFRecordReader(path, block_size=-1)
    it = tfrecord.read(path)
    it.close()
    it.close()
    with pytest.raises(ValueError, match="read from a closed TFRecordReader"):
        next(it)


def test_large_record_grows_the_buffer(tmp_path):
    big = bytes(np.random.default_rng(1).integers(0, 256, 300_000, dtype=np.uint8))
    path = tmp_path / "big"
    tfrecord.write(path, [b"a", big, b"b", big])
    it = tfrecord.TFRecordReader(path, block_size=1024)
    assert list(it) == [b"a", big, b"b", big]


def test_fixed_length_runs_and_mixed_lengths(tmp_path):
    rng = np.random.default_rng(2)
    records = [rng.bytes(100) for _ in range(500)] + [
        rng.bytes(int(n)) for n in rng.integers(0, 300, 300)
    ]
    records += [b""] * 50 + [rng.bytes(64) for _ in range(100)]
    path = tmp_path / "mixed"
    tfrecord.write(path, records)
    assert _read_all(path) == records
    for bs in (1, 7, 1000):
        got = [r for b in tfrecord.read_batches(path, bs) for r in b]
        assert got == records
    assert [len(b) for b in tfrecord.read_batches(path, 300, drop_remainder=True)] == [300] * 3


def test_run_path_detects_damage_inside_a_run(tmp_path):
    records = [bytes([i]) * 100 for i in range(200)]
    data = bytearray(b"".join(frame(r) for r in records))
    stride = 116
    data[150 * stride + 12 + 50] ^= 0x40  # data byte of record 150
    data[170 * stride + 3] ^= 0x01  # length byte of record 170
    path = tmp_path / "runs"
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptRecordError, match=f"record 150 at byte {150 * stride}: .*data CRC"):
        _read_all(path)
    it = tfrecord.read(path, on_error="skip")
    got = list(it)
    assert got == [r for i, r in enumerate(records) if i not in (150, 170)]
    assert it.skipped == 2


# --------------------------------------------------------------------------- hypothesis

payload_lists = st.lists(st.binary(max_size=300), max_size=30)


@FAST
@given(
    records=payload_lists,
    compression=st.sampled_from([None, "GZIP", "ZLIB"]),
    block=st.integers(16, 2048),
    batch=st.integers(1, 7),
)
def test_hypothesis_round_trip(tmp_path_factory, records, compression, block, batch):
    path = tmp_path_factory.mktemp("h") / "f"
    tfrecord.write(path, records, compression=compression)
    assert list(tfrecord.TFRecordReader(path, block_size=block)) == records
    got = [r for b in tfrecord.read_batches(path, batch) for r in b]
    assert got == records


@FAST
@given(data=st.binary(max_size=400), prefix=st.sampled_from([b"", b"\x1f\x8b", b"\x78\x9c"]))
def test_hypothesis_random_bytes_raise_feedline_errors(tmp_path_factory, data, prefix):
    path = tmp_path_factory.mktemp("fuzz") / "f"
    path.write_bytes(prefix + data)
    try:
        for record in tfrecord.read(path):
            assert isinstance(record, bytes)
    except CorruptRecordError as err:
        assert err.path == str(path)
    it = tfrecord.read(path, on_error="skip")
    for record in it:  # skip mode never raises and always ends
        assert isinstance(record, bytes)


@FAST
@given(records=st.lists(st.binary(max_size=60), min_size=1, max_size=12), data=st.data())
def test_hypothesis_any_flipped_byte_is_detected(tmp_path_factory, records, data):
    blob = bytearray(b"".join(frame(r) for r in records))
    at = data.draw(st.integers(0, len(blob) - 1))
    blob[at] ^= data.draw(st.integers(1, 255))
    path = tmp_path_factory.mktemp("flip") / "f"
    path.write_bytes(bytes(blob))
    with pytest.raises(CorruptRecordError):
        _read_all(path)
    it = tfrecord.read(path, on_error="skip")
    got = list(it)
    assert it.skipped >= 1
    # every record returned is one that was written, in order
    rest = iter(records)
    assert all(any(g == r for r in rest) for g in got)


# --------------------------------------------------------------------------- state


def _check_resume_everywhere(make):
    full = list(make())
    it = make()
    states = []
    for _ in range(len(full) + 1):
        states.append(json.loads(json.dumps(it.get_state())))
        if next(it, None) is None:
            break
    for k, state in enumerate(states):
        fresh = make()
        fresh.set_state(state)
        assert list(fresh) == full[k:], f"resume at step {k}"


@pytest.mark.parametrize("compression", [None, "GZIP"])
def test_resume_at_every_step(tmp_path, compression):
    rng = np.random.default_rng(3)
    records = [rng.bytes(int(n)) for n in rng.integers(0, 80, 60)] + [b"z" * 30] * 40
    path = tmp_path / "s"
    tfrecord.write(path, records, compression=compression)
    _check_resume_everywhere(lambda: tfrecord.TFRecordReader(path, block_size=256))
    _check_resume_everywhere(lambda: tfrecord.read_batches(path, 7))


@pytest.mark.parametrize(
    "name", ["corrupt_length_crc.tfrecord", "corrupt_data_crc.tfrecord", "truncated.tfrecord"]
)
def test_resume_across_skipped_damage(tf_dir, name):
    path = tf_dir / name
    _check_resume_everywhere(lambda: tfrecord.read(path, on_error="skip"))


def test_resume_across_a_broken_gzip_stream(tmp_path):
    path = tmp_path / "t.gz"
    good = gzip.compress(b"".join(frame(b"%d" % i * 30) for i in range(300)))
    path.write_bytes(good[: len(good) * 2 // 3])
    _check_resume_everywhere(lambda: tfrecord.TFRecordReader(path, on_error="skip", block_size=512))


def test_skip_counter_in_state(tf_dir):
    path = tf_dir / "corrupt_length_crc.tfrecord"
    it = tfrecord.read(path, on_error="skip")
    list(it)
    assert it.get_state()["skipped"] == 1


def test_set_state_rejects_foreign_state(tmp_path):
    path = tmp_path / "f"
    tfrecord.write(path, [b"a"])
    from feedline.exceptions import StateError

    with pytest.raises(StateError, match="state was made by stage 'recordio', not by 'tfrecord'"):
        tfrecord.read(path).set_state({"type": "recordio", "offset": 0, "index": 0})


# --------------------------------------------------------------------------- compressed damage


def test_truncated_gzip_stream_names_path(tmp_path):
    path = tmp_path / "t.gz"
    good = gzip.compress(b"".join(frame(b"%d" % i * 50) for i in range(200)))
    path.write_bytes(good[: len(good) // 2])
    with pytest.raises(
        CorruptRecordError, match=re.escape(str(path)) + r": record \d+ at byte \d+: GZIP stream: "
    ):
        _read_all(path)
    it = tfrecord.read(path, on_error="skip")
    got = list(it)
    assert 0 < len(got) < 200 and it.skipped == 1


def test_garbage_after_zlib_header(tmp_path):
    path = tmp_path / "z"
    path.write_bytes(b"\x78\x9c" + b"\xff" * 40)
    with pytest.raises(
        CorruptRecordError, match="ZLIB stream: .*record 0|record 0 at byte 0: ZLIB stream"
    ):
        _read_all(path)


# --------------------------------------------------------------------------- index


def test_build_index_format_and_random_access(tmp_path, tf_dir, payloads, expected):
    src = tmp_path / "raw.tfrecord"
    src.write_bytes((tf_dir / "raw.tfrecord").read_bytes())
    assert tfrecord.build_index(src) == 12
    raw = (tmp_path / "raw.tfrecord.index").read_bytes()
    magic, version, code, count, size = struct.unpack_from("<8sIIQQ", raw)
    assert (magic, version, code, count, size) == (b"FLTFRIDX", 1, 0, 12, src.stat().st_size)
    arrays = np.frombuffer(raw, "<u8", offset=32)
    assert arrays[:12].tolist() == expected["raw.tfrecord"]["record_offsets"]
    assert arrays[12:].tolist() == [len(p) for p in payloads]
    f = tfrecord.TFRecordFile(src)
    assert len(f) == 12
    assert [f[i] for i in range(12)] == payloads
    assert (
        f[-1] == payloads[-1]
        and f[2:5] == payloads[2:5]
        and f[[3, 0]] == [payloads[3], payloads[0]]
    )
    assert list(f) == payloads
    with pytest.raises(IndexError, match="record index 12 out of range for 12 records"):
        f[12]
    with pytest.raises(TypeError, match="TFRecordFile indices must be int or slice, got 'a'"):
        f["a"]
    g = pickle.loads(pickle.dumps(f))
    assert g[5] == payloads[5]
    f.close()
    g.close()


def test_tfrecord_file_without_index_scans(tmp_path):
    path = tmp_path / "f"
    tfrecord.write(path, [b"a", b"bc"])
    with tfrecord.TFRecordFile(path) as f:
        assert len(f) == 2 and f[1] == b"bc"


def test_index_errors(tmp_path, tf_dir):
    path = tmp_path / "f"
    tfrecord.write(path, [b"a" * 10, b"b" * 20])
    tfrecord.build_index(path)
    with open(path, "ab") as out:
        out.write(frame(b"c"))
    with pytest.raises(
        CorruptRecordError, match=r"stale index: built for a file of 62 bytes, the file has 79"
    ):
        tfrecord.TFRecordFile(path)
    (tmp_path / "bad.index").write_bytes(b"NOTINDEX" + bytes(24))
    with pytest.raises(
        CorruptRecordError, match=r"bad.index: at byte 0: not a feedline TFRecord index"
    ):
        tfrecord.TFRecordFile(path, index_path=tmp_path / "bad.index")
    (tmp_path / "short.index").write_bytes(b"FLTFRIDX" + struct.pack("<IIQQ", 1, 0, 5, 81))
    with pytest.raises(
        CorruptRecordError, match="TFRecord index of 5 records should be 112 bytes, is 32"
    ):
        tfrecord.TFRecordFile(path, index_path=tmp_path / "short.index")
    gz = tmp_path / "g.gz"
    gz.write_bytes((tf_dir / "raw.gz.tfrecord").read_bytes())
    assert tfrecord.build_index(gz) == 12
    with pytest.raises(
        ValueError, match="random access needs an uncompressed TFRecord file, this one is GZIP"
    ):
        tfrecord.TFRecordFile(gz)


def test_index_detects_damage_on_random_access(tmp_path):
    path = tmp_path / "f"
    tfrecord.write(path, [b"hello", b"world"])
    tfrecord.build_index(path)
    data = bytearray(path.read_bytes())
    data[21 + 12 + 1] ^= 1  # a data byte of record 1
    path.write_bytes(bytes(data))
    f = tfrecord.TFRecordFile(path)
    assert f[0] == b"hello"
    with pytest.raises(
        CorruptRecordError, match=r"f: record 1 at byte 21: corrupted record: data CRC mismatch"
    ):
        f[1]
    assert tfrecord.TFRecordFile(path, verify=False)[1] != b"world"


def test_skip_resynchronises_by_index(tmp_path):
    records = [bytes([i]) * (10 + i) for i in range(30)]
    path = tmp_path / "f"
    tfrecord.write(path, records)
    tfrecord.build_index(path)
    offsets = tfrecord.TFRecordIndex.load(str(path) + ".index").offsets
    data = bytearray(path.read_bytes())
    # wreck record 10's header and make record 11's header look valid nowhere else
    for k in range(int(offsets[10]), int(offsets[10]) + 12):
        data[k] ^= 0xFF
    path.write_bytes(bytes(data))
    it = tfrecord.read(path, on_error="skip")
    assert list(it) == records[:10] + records[11:]
    assert it.skipped == 1
    # the same without the index: scanning for the next valid header
    (tmp_path / "f.index").unlink()
    it = tfrecord.read(path, on_error="skip")
    assert list(it) == records[:10] + records[11:]


def test_stale_index_is_ignored_with_a_warning_when_skipping(tmp_path):
    path = tmp_path / "f"
    tfrecord.write(path, [b"abc"] * 5)
    (tmp_path / "f.index").write_bytes(b"garbage")
    data = bytearray(path.read_bytes())
    data[19 + 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.warns(RuntimeWarning, match="ignoring the sidecar index"):
        got = _read_all(path, on_error="skip")
    assert got == [b"abc"] * 4


def test_scan_reports_partial_and_limit():
    data = bytearray(frame(b"a" * 5) * 3 + frame(b"b")[:7])
    records, offsets, pos, problem = scan(data, 0, len(data), 2, True)
    assert (
        records == [b"aaaaa"] * 2 and offsets.tolist() == [0, 21] and pos == 42 and problem is None
    )
    records, offsets, pos, problem = scan(data, 42, len(data), 10, True)
    assert records == [b"aaaaa"] and problem.kind == "partial" and problem.pos == 63
    assert problem.length is None
