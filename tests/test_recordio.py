"""feedline.recordio: byte compatibility with MXNet 1.9.1, damage handling, random access."""

from __future__ import annotations

import base64
import hashlib
import json
import pickle
import struct
import threading
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from feedline import recordio
from feedline.exceptions import CorruptRecordError, DecodeError, StateError
from feedline.recordio import MAGIC, IRHeader

M = MAGIC.to_bytes(4, "little")
SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@pytest.fixture(scope="module")
def mx(fixtures_dir):
    return fixtures_dir / "mxnet"


@pytest.fixture(scope="module")
def expected(mx):
    return json.loads((mx / "expected.json").read_text())


def _payloads(expected) -> list[bytes]:
    return [base64.b64decode(p) for p in expected["raw.rec"]["records_base64"]]


def _write(path, payloads) -> list[int]:
    with recordio.RecordIOWriter(path) as w:
        return [w.write(p) for p in payloads]


# ----------------------------------------------------------------- MXNet-written fixtures


def test_raw_fixture_decodes_to_mxnet_payloads(mx, expected):
    assert list(recordio.read(mx / "raw.rec")) == _payloads(expected)


def test_raw_fixture_index_keys_offsets_and_random_access(mx, expected):
    raw = expected["raw.rec"]
    payloads = _payloads(expected)
    ir = recordio.IndexedRecordIO(mx / "raw.idx", mx / "raw.rec", "r")
    assert ir.keys == raw["keys"]
    assert [ir.offset(k) for k in ir.keys] == raw["idx_offsets"]
    assert [ir.read_idx(k) for k in raw["keys"]] == payloads
    assert len(ir) == len(payloads)
    assert ir[0] == payloads[0] and ir[-1] == payloads[-1]
    with pytest.raises(IndexError, match="record position 17 out of range for 17 records"):
        ir[17]
    with pytest.raises(KeyError, match="no record with key 12345"):
        ir.read_idx(12345)
    ir.close()


def test_writing_the_fixture_payloads_is_byte_identical_to_mxnet(mx, expected, tmp_path):
    raw = expected["raw.rec"]
    with recordio.IndexedRecordIO(tmp_path / "o.idx", tmp_path / "o.rec", "w") as w:
        for key, payload in zip(raw["keys"], _payloads(expected)):
            w.write_idx(key, payload)
    assert (tmp_path / "o.rec").read_bytes() == (mx / "raw.rec").read_bytes()
    assert (tmp_path / "o.idx").read_bytes() == (mx / "raw.idx").read_bytes()


def test_fixture_exercises_every_escape_case(expected):
    # the fixture contains payloads whose encodings use cflag 1, 2 and 3 parts
    flags = set()
    for payload in _payloads(expected):
        data = recordio.encode(payload)
        pos = 0
        while pos < len(data):
            magic, lrec = struct.unpack_from("<II", data, pos)
            assert magic == MAGIC
            flags.add(lrec >> 29)
            pos += 8 + ((lrec & (2**29 - 1)) + 3) // 4 * 4
    assert flags == {0, 1, 2, 3}


def test_build_index_matches_mxnet_offsets(mx, expected, tmp_path):
    idx = tmp_path / "raw.idx"
    assert recordio.build_index(mx / "raw.rec", idx) == 17
    lines = idx.read_text().splitlines()
    assert lines == [f"{i}\t{o}" for i, o in enumerate(expected["raw.rec"]["idx_offsets"])]


def test_build_index_after_skipping_damage(tmp_path):
    rec = tmp_path / "dmg.rec"
    offsets = _write(rec, [b"r0", b"r1", b"r2" * 9, b"r3"])
    data = bytearray(rec.read_bytes())
    data[offsets[1] + 2] ^= 0x55
    rec.write_bytes(bytes(data))
    with pytest.raises(CorruptRecordError, match=rf"record 1 at byte {offsets[1]}: bad magic"):
        recordio.build_index(rec)
    assert not (tmp_path / "dmg.idx").exists()
    assert recordio.build_index(rec, on_error="skip") == 3
    assert (tmp_path / "dmg.idx").read_text() == f"0\t0\n1\t{offsets[2]}\n2\t{offsets[3]}\n"
    ir = recordio.IndexedRecordIO(tmp_path / "dmg.idx", rec)
    assert [ir[i] for i in range(3)] == [b"r0", b"r2" * 9, b"r3"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dmg.idx", "dmg.rec"]


def test_build_index_default_name(tmp_path):
    rec = tmp_path / "d.rec"
    _write(rec, [b"a", b"b"])
    assert recordio.build_index(rec) == 2
    assert (tmp_path / "d.idx").read_text() == "0\t0\n1\t12\n"
    assert recordio.default_idx_path("x.bin") == "x.bin.idx"


def test_image_fixture_headers_payloads_and_pixels(mx, expected):
    ir = recordio.IndexedRecordIO(mx / "images.idx", mx / "images.rec", "r")
    for rec in expected["images.rec"]["records"]:
        raw = ir.read_idx(rec["key"])
        header, body = recordio.unpack(raw)
        assert header.flag == rec["flag"]
        if rec["flag"]:
            assert header.label.dtype == np.float32
            assert header.label.tolist() == rec["label"]
        else:
            assert header.label == rec["label"]
        assert (header.id, header.id2) == (rec["id"], rec["id2"])
        assert body == base64.b64decode(rec["encoded_base64"])
        # packing the same header and bytes reproduces MXNet's record exactly
        assert recordio.pack(IRHeader(rec["flag"], rec["label"], rec["id"], rec["id2"]), body) == raw

        _, rgb = recordio.unpack_img(raw)
        assert list(rgb.shape) == rec["decoded_shape_hwc"] and rgb.dtype == np.uint8
        if rec["format"] == "png":
            assert hashlib.sha256(rgb.tobytes()).hexdigest() == rec["decoded_rgb_sha256"]
        else:
            assert abs(float(rgb.mean()) - rec["decoded_rgb_mean"]) <= 2.0
        _, bgr = recordio.unpack_img(raw, color_order="bgr")
        np.testing.assert_array_equal(bgr, rgb[:, :, ::-1])


# ----------------------------------------------------------------- framing


def test_encode_escapes_only_aligned_magic_words():
    assert recordio.encode(b"") == struct.pack("<II", MAGIC, 0)
    # unaligned magic stays inside one part (cflag 0), padded to 8
    assert recordio.encode(b"x" + M) == struct.pack("<II", MAGIC, 5) + b"x" + M + b"\0\0\0"
    # aligned magic in the middle: start part "abcd", end part "ef"
    assert recordio.encode(b"abcd" + M + b"ef") == (
        struct.pack("<II", MAGIC, (1 << 29) | 4) + b"abcd"
        + struct.pack("<II", MAGIC, (3 << 29) | 2) + b"ef\0\0"
    )
    # two magic words back to back: empty start, empty middle, empty end
    assert recordio.encode(M + M) == b"".join(
        struct.pack("<II", MAGIC, f << 29) for f in (1, 2, 3)
    )


def test_encode_rejects_oversized_payload(monkeypatch):
    from feedline.formats.recordio import stream as _recordio_stream

    monkeypatch.setattr(_recordio_stream, "_MAX_PAYLOAD", 16)  # the real limit is 2**29 - 1
    assert len(recordio.encode(b"x" * 16)) == 24
    with pytest.raises(ValueError, match="a RecordIO record holds at most 16 bytes, got 17"):
        recordio.encode(b"x" * 17)


payload_pieces = st.lists(
    st.one_of(st.just(M), st.binary(max_size=9), st.sampled_from([b"\x0a", b"\x23\xd7", b"\xce"])),
    max_size=12,
).map(b"".join)


@SETTINGS
@given(st.lists(payload_pieces, max_size=8))
def test_round_trip_with_magic_words_anywhere(tmp_path, payloads):
    path = tmp_path / "rt.rec"
    offsets = _write(path, payloads)
    data = path.read_bytes()
    assert len(data) % 4 == 0
    assert data == b"".join(recordio.encode(p) for p in payloads)
    # no aligned magic word inside any payload region: every aligned magic is a header
    assert list(recordio.read(path)) == payloads
    reader = recordio.RecordIOReader(path)
    for offset, payload in zip(offsets, payloads):
        reader.seek(offset)
        assert reader.read() == payload
    reader.close()


def test_records_larger_than_the_read_buffer(tmp_path):
    big = bytes(np.random.default_rng(0).integers(0, 256, 3 * 2**20 + 5, dtype=np.uint8))
    magic_heavy = (b"abcd" + M) * (300_000)  # ~2.9 MB, thousands of parts
    payloads = [b"head", big, magic_heavy, b"", big[:1_048_573], b"tail"]
    path = tmp_path / "big.rec"
    _write(path, payloads)
    assert list(recordio.read(path)) == payloads


# ----------------------------------------------------------------- reader protocol


def test_reader_read_seek_tell_like_mxrecordio(tmp_path):
    path = tmp_path / "r.rec"
    offsets = _write(path, [b"r0", b"r1", b"r2"])
    with recordio.RecordIOReader(path) as r:
        assert r.tell() == 0
        assert r.read() == b"r0" and r.tell() == offsets[1]
        r.seek(offsets[2])
        assert r.read() == b"r2"
        assert r.read() is None
        r.seek(0)
        assert list(r) == [b"r0", b"r1", b"r2"]
        with pytest.raises(ValueError, match="`offset` must be a multiple of 4"):
            r.seek(6)
        with pytest.raises(ValueError, match="`offset` must be a non-negative int, got -4"):
            r.seek(-4)


def test_state_restores_at_every_step(tmp_path):
    payloads = [b"p%d" % i * i + (M if i % 3 == 0 else b"") for i in range(12)]
    path = tmp_path / "s.rec"
    _write(path, payloads)
    it = recordio.read(path)
    for step in range(len(payloads) + 1):
        state = it.get_state()
        assert json.loads(json.dumps(state)) == state
        fresh = recordio.read(path)
        fresh.set_state(state)
        assert list(fresh) == payloads[step:]
        if step < len(payloads):
            assert next(it) == payloads[step]
    with pytest.raises(StopIteration):
        next(it)
    with pytest.raises(StateError, match="state was made by stage 'map', not by 'recordio'"):
        recordio.read(path).set_state({"type": "map"})


def test_on_error_must_be_a_known_policy(tmp_path):
    path = tmp_path / "e.rec"
    _write(path, [b"x"])
    with pytest.raises(ValueError, match="`on_error` must be one of 'raise', 'skip', 'warn', got 'ignore'"):
        recordio.read(path, on_error="ignore")


def test_writer_closed_and_reader_closed(tmp_path):
    w = recordio.RecordIOWriter(tmp_path / "c.rec")
    w.close()
    w.close()
    with pytest.raises(ValueError, match="write to a closed RecordIOWriter"):
        w.write(b"x")
    r = recordio.read(tmp_path / "c.rec")
    r.close()
    r.close()
    assert list(r) == []


# ----------------------------------------------------------------- damage


def _damaged(tmp_path, payloads, mutate):
    path = tmp_path / "bad.rec"
    offsets = _write(path, payloads)
    data = bytearray(path.read_bytes())
    mutate(data, offsets)
    path.write_bytes(bytes(data))
    return path, offsets


def test_bad_magic_names_path_index_offset_and_skip_resyncs(tmp_path):
    payloads = [b"zero", b"one!", b"two!!", b"three"]

    def flip(data, offsets):
        data[offsets[1]] ^= 0xFF

    path, offsets = _damaged(tmp_path, payloads, flip)
    with pytest.raises(
        CorruptRecordError,
        match=rf"bad\.rec: record 1 at byte {offsets[1]}: bad magic word 0xced723f5",
    ) as info:
        list(recordio.read(path))
    assert info.value.index == 1 and info.value.offset == offsets[1]
    assert isinstance(info.value, ValueError)

    it = recordio.read(path, on_error="skip")
    assert list(it) == [b"zero", b"two!!", b"three"]
    assert it.skipped == 1 and it.skipped_bytes == offsets[2] - offsets[1]

    with pytest.warns(RuntimeWarning, match="skipping damaged data: .*bad magic word"):
        assert list(recordio.read(path, on_error="warn")) == [b"zero", b"two!!", b"three"]


def test_truncated_tail(tmp_path):
    payloads = [b"a" * 10, b"b" * 20]
    path = tmp_path / "t.rec"
    offsets = _write(path, payloads)
    data = path.read_bytes()
    path.write_bytes(data[:-9])
    with pytest.raises(
        CorruptRecordError,
        match=rf"record 1 at byte {offsets[1]}: truncated record: needs 20 payload bytes, the data has 11",
    ):
        list(recordio.read(path))
    it = recordio.read(path, on_error="skip")
    assert list(it) == [b"a" * 10] and it.skipped == 1
    path.write_bytes(data[: offsets[1] + 5])
    with pytest.raises(CorruptRecordError, match=r"truncated record header: 5 of 8 bytes"):
        list(recordio.read(path))


def test_truncated_large_record_read_directly(tmp_path):
    payloads = [b"s" * 10, b"L" * 1_500_001, b"after"]
    path = tmp_path / "tl.rec"
    offsets = _write(path, payloads)
    data = path.read_bytes()
    path.write_bytes(data[: offsets[2] - 100])
    with pytest.raises(
        CorruptRecordError,
        match=rf"record 1 at byte {offsets[1]}: truncated record: needs 1500001 payload bytes, "
        r"the data has 1499904",
    ):
        list(recordio.read(path))
    it = recordio.read(path, on_error="skip")
    assert list(it) == [b"s" * 10] and it.skipped == 1
    path.write_bytes(data[: offsets[2] - 1])  # only a padding byte missing: still readable
    assert list(recordio.read(path)) == payloads[:2]


def test_bad_cflag_sequences(tmp_path):
    path = tmp_path / "f.rec"
    start = struct.pack("<II", MAGIC, (1 << 29) | 4) + b"abcd"
    whole = struct.pack("<II", MAGIC, 4) + b"good"
    middle = struct.pack("<II", MAGIC, (2 << 29) | 4) + b"mmmm"
    path.write_bytes(start + whole)
    with pytest.raises(
        CorruptRecordError,
        match=r"record 0 at byte 0: multi-part record interrupted: part 1 at byte 12 has cflag 0",
    ):
        list(recordio.read(path))
    path.write_bytes(middle + whole)
    with pytest.raises(CorruptRecordError, match=r"record 0 at byte 0: record starts with a continuation part \(cflag 2\)"):
        list(recordio.read(path))
    it = recordio.read(path, on_error="skip")
    assert list(it) == [b"good"] and it.skipped == 1
    path.write_bytes(struct.pack("<II", MAGIC, (5 << 29) | 4) + b"abcd")
    with pytest.raises(CorruptRecordError, match=r"record starts with an invalid part \(cflag 5\)"):
        list(recordio.read(path))
    path.write_bytes(start)
    with pytest.raises(CorruptRecordError, match=r"truncated multi-part record: part 1 header"):
        list(recordio.read(path))


def test_skip_resyncs_past_long_garbage(tmp_path):
    path = tmp_path / "g.rec"
    garbage = bytes(np.random.default_rng(1).integers(0, 256, 2_500_001, dtype=np.uint8))
    garbage = garbage.replace(M, b"xxxx")
    good = recordio.encode(b"after")
    path.write_bytes(recordio.encode(b"before") + garbage + b"\0\0\0" + good)
    it = recordio.read(path, on_error="skip")
    assert list(it) == [b"before", b"after"]
    assert it.skipped == 1


def test_random_access_errors_name_the_record(tmp_path):
    payloads = [b"first", b"second"]

    def flip(data, offsets):
        data[offsets[1] + 1] ^= 1

    path, _ = _damaged(tmp_path, payloads, flip)
    idx = tmp_path / "bad.idx"
    idx.write_text(f"0\t0\n1\t{recordio.encode(b'first').__len__()}\n")
    ir = recordio.IndexedRecordIO(idx, path)
    assert ir[0] == b"first"
    with pytest.raises(CorruptRecordError, match=r"bad\.rec: record 1 at byte 16: bad magic word"):
        ir[1]


def test_bad_index_lines(tmp_path):
    (tmp_path / "x.rec").write_bytes(b"")
    idx = tmp_path / "x.idx"
    idx.write_text("0\t0\n\nabc\n")
    with pytest.raises(CorruptRecordError, match=r"x\.idx: line 3 at byte 5: bad index line 'abc'"):
        recordio.IndexedRecordIO(idx, tmp_path / "x.rec")
    idx.write_text("0\t-8\n")
    with pytest.raises(CorruptRecordError, match="negative offset -8"):
        recordio.read_index(idx)
    idx.write_text("a\t0\n")
    assert recordio.read_index(idx, key_type=str) == [("a", 0)]


@SETTINGS
@given(st.binary(max_size=200))
def test_random_bytes_raise_a_feedline_error(tmp_path, data):
    path = tmp_path / "fuzz.rec"
    path.write_bytes(data)
    if not data:
        assert list(recordio.read(path)) == []
        return
    if data[:4] == M:  # only a file starting with the magic word can hold records
        return
    with pytest.raises(CorruptRecordError):
        list(recordio.read(path))


@SETTINGS
@given(
    st.lists(payload_pieces, min_size=1, max_size=6),
    st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=4),
    st.integers(0, 10_000),
)
def test_damaged_files_never_crash_or_hang(tmp_path, payloads, flips, cut):
    path = tmp_path / "dmg.rec"
    _write(path, payloads)
    data = bytearray(path.read_bytes())
    for pos, value in flips:
        data[pos % len(data)] = value
    data = bytes(data[: max(cut % (len(data) + 1), 0)])
    path.write_bytes(data)
    try:
        list(recordio.read(path))
    except CorruptRecordError:
        pass
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        it = recordio.read(path, on_error="warn")
        got = list(it)
    assert len(got) <= len(payloads) + len(data) // 8


# ----------------------------------------------------------------- indexed files


def test_indexed_write_read_pickle_and_threads(tmp_path):
    idx, rec = tmp_path / "i.idx", tmp_path / "i.rec"
    payloads = {k: (b"%d" % k) * (k % 7) + (M if k % 5 == 0 else b"") for k in range(40)}
    with recordio.IndexedRecordIO(idx, rec, "w") as w:
        offsets = {}
        for k in reversed(range(40)):
            offsets[k] = w.tell()
            w.write_idx(k, payloads[k])
    with recordio.IndexedRecordIO(tmp_path / "s.idx", tmp_path / "s.rec", "w", key_type=str) as w:
        with pytest.raises(ValueError, match="`key` must not contain tabs or newlines, got 'a"):
            w.write_idx("a\tb", b"")
    r = recordio.IndexedRecordIO(idx, rec, "r")
    assert r.keys == list(reversed(range(40)))
    assert all(r.offset(k) == o for k, o in offsets.items())
    r2 = pickle.loads(pickle.dumps(r))
    assert all(r2.read_idx(k) == v for k, v in payloads.items())
    errors = []

    def worker(seed):
        rng = np.random.default_rng(seed)
        for k in rng.integers(0, 40, 200):
            if r.read_idx(int(k)) != payloads[int(k)]:
                errors.append(k)

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with pytest.raises(ValueError, match="write_idx needs mode 'w'"):
        r.write_idx(1, b"")
    with pytest.raises(ValueError, match="`mode` must be one of 'r', 'w', got 'a'"):
        recordio.IndexedRecordIO(idx, rec, "a")
    with pytest.raises(TypeError, match="an IndexedRecordIO in mode 'w' cannot be pickled"):
        with recordio.IndexedRecordIO(tmp_path / "j.idx", tmp_path / "j.rec", "w") as w:
            pickle.dumps(w)
    r.close()


def test_duplicate_keys_read_the_last_record_as_mxnet(tmp_path):
    idx, rec = tmp_path / "d.idx", tmp_path / "d.rec"
    with recordio.IndexedRecordIO(idx, rec, "w") as w:
        w.write_idx(1, b"old")
        w.write_idx(1, b"new")
    r = recordio.IndexedRecordIO(idx, rec)
    assert r.keys == [1, 1] and r.read_idx(1) == b"new" and r[0] == b"old"


# ----------------------------------------------------------------- IRHeader and images


def test_pack_unpack_scalar_and_multi_label():
    rec = recordio.pack(IRHeader(5, 2.5, 7, 9), b"data")  # numeric label forces flag 0
    assert rec == struct.pack("<IfQQ", 0, 2.5, 7, 9) + b"data"
    header, body = recordio.unpack(rec)
    assert header == IRHeader(0, 2.5, 7, 9) and body == b"data"

    rec = recordio.pack(IRHeader(0, [1.5, -2.0, 3.0], 1, 0), b"x")
    assert rec[:24] == struct.pack("<IfQQ", 3, 0.0, 1, 0)
    assert rec[24:36] == np.array([1.5, -2.0, 3.0], "<f4").tobytes()
    header, body = recordio.unpack(rec)
    assert header.flag == 3 and header.label.tolist() == [1.5, -2.0, 3.0] and body == b"x"

    assert recordio.unpack(recordio.pack(IRHeader(0, np.float32(4), 0, 0), b""))[0].flag == 0
    with pytest.raises(DecodeError, match="an IRHeader needs 24 bytes, the record has 3"):
        recordio.unpack(b"abc")
    with pytest.raises(DecodeError, match="IRHeader flag 4 announces 4 float32 labels"):
        recordio.unpack(struct.pack("<IfQQ", 4, 0.0, 0, 0) + b"12345678")


def _image(h=20, w=30):
    yy, xx = np.mgrid[0:h, 0:w]
    return np.stack([xx * 8 % 256, yy * 12 % 256, (xx + yy) * 4 % 256], -1).astype(np.uint8)


def test_pack_img_png_is_lossless_in_both_color_orders():
    pytest.importorskip("PIL")
    img = _image()
    header = IRHeader(0, [1.0, 2.0], 42, 0)
    rec = recordio.pack_img(header, img, img_fmt=".PNG")
    h, out = recordio.unpack_img(rec)
    assert h.flag == 2 and h.id == 42
    np.testing.assert_array_equal(out, img)
    # MXNet convention: BGR in, BGR out
    rec = recordio.pack_img(header, img[:, :, ::-1], img_fmt=".png", color_order="bgr")
    _, out_bgr = recordio.unpack_img(rec, color_order="bgr")
    np.testing.assert_array_equal(out_bgr, img[:, :, ::-1])
    gray = img[:, :, 0]
    _, out = recordio.unpack_img(recordio.pack_img(header, gray, img_fmt=".png"))
    np.testing.assert_array_equal(out, np.repeat(gray[:, :, None], 3, axis=2))


def test_pack_img_jpeg_is_close_and_decodable():
    pytest.importorskip("simplejpeg")
    img = _image(64, 48)
    rec = recordio.pack_img(IRHeader(0, 3.0, 1, 0), img, quality=95)
    header, body = recordio.unpack(rec)
    assert body[:3] == b"\xff\xd8\xff" and header.label == 3.0
    _, out = recordio.unpack_img(rec)
    assert out.shape == img.shape
    assert abs(float(out.astype(float).mean()) - float(img.mean())) < 2
    _, gray = recordio.unpack_img(recordio.pack_img(IRHeader(0, 0.0, 0, 0), img[:, :, :1]))
    assert gray.shape == (64, 48, 3)


def test_pack_img_validation_and_decode_errors():
    img = _image()
    with pytest.raises(ValueError, match="`img_fmt` must be one of '.jpg', '.jpeg', '.png', got '.gif'"):
        recordio.pack_img(IRHeader(0, 0.0, 0, 0), img, img_fmt=".gif")
    with pytest.raises(ValueError, match="`quality` must be an int in \\[0, 100\\], got 101"):
        recordio.pack_img(IRHeader(0, 0.0, 0, 0), img, quality=101)
    with pytest.raises(TypeError, match="`img` must be a uint8 array, got dtype float32"):
        recordio.pack_img(IRHeader(0, 0.0, 0, 0), img.astype(np.float32))
    with pytest.raises(ValueError, match="`img` must have shape HxW, HxWx1 or HxWx3"):
        recordio.pack_img(IRHeader(0, 0.0, 0, 0), np.zeros((2, 2, 4), np.uint8))
    with pytest.raises(ValueError, match="`color_order` must be one of 'rgb', 'bgr', got 'RGB'"):
        recordio.unpack_img(recordio.pack(IRHeader(0, 0.0, 0, 0), b""), color_order="RGB")
    with pytest.raises(DecodeError, match="cannot decode image"):
        recordio.unpack_img(recordio.pack(IRHeader(0, 0.0, 0, 0), b"\xff\xd8\xff garbage"))
    with pytest.raises(DecodeError, match="cannot decode image"):
        recordio.unpack_img(recordio.pack(IRHeader(0, 0.0, 0, 0), b"not an image"))
