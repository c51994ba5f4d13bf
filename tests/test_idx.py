"""feedline.idx: MNIST IDX files, every element type, gzipped or not, damage named."""

from __future__ import annotations

import gzip

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from feedline.exceptions import CorruptRecordError
from feedline.idx import IDX_TYPES, decode_idx, encode_idx, read_idx, write_idx

SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def test_mnist_labels_and_images_layout(tmp_path):
    # the first bytes of the real train-labels-idx1-ubyte / train-images-idx3-ubyte
    labels = bytes.fromhex("00000801 0000000a") + bytes([5, 0, 4, 1, 9, 2, 1, 3, 1, 4])
    assert decode_idx(labels).tolist() == [5, 0, 4, 1, 9, 2, 1, 3, 1, 4]
    images = np.arange(2 * 28 * 28, dtype=np.uint8).reshape(2, 28, 28)
    data = encode_idx(images)
    assert data[:16] == bytes.fromhex("00000803 00000002 0000001c 0000001c")
    path = tmp_path / "train-images-idx3-ubyte.gz"
    path.write_bytes(gzip.compress(data))
    np.testing.assert_array_equal(read_idx(path), images)


@pytest.mark.parametrize(
    ("code", "dtype"),
    [(0x08, "u1"), (0x09, "i1"), (0x0B, "i2"), (0x0C, "i4"), (0x0D, "f4"), (0x0E, "f8")],
)
def test_every_type_code_is_big_endian(code, dtype):
    arr = np.array([[1, -2 if dtype[0] != "u" else 2, 3]], dtype=dtype)
    data = encode_idx(arr)
    assert data[:4] == bytes([0, 0, code, 2])
    assert data[12:] == arr.astype(np.dtype(dtype).newbyteorder(">")).tobytes()
    out = decode_idx(data)
    assert out.dtype == np.dtype(dtype) and out.dtype.isnative
    np.testing.assert_array_equal(out, arr)
    assert IDX_TYPES[code] == np.dtype(dtype).newbyteorder(">")


arrays = st.sampled_from(["u1", "i1", "i2", "i4", "f4", "f8", ">i4", "<f8"]).flatmap(
    lambda dt: hnp.arrays(dt, hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=5))
)


@SETTINGS
@given(arrays, st.booleans())
def test_round_trip(tmp_path, arr, compress):
    path = tmp_path / ("a.idx.gz" if compress else "a.idx")
    write_idx(path, arr)
    assert (path.read_bytes()[:2] == b"\x1f\x8b") == compress
    out = read_idx(path)
    assert out.shape == arr.shape and out.dtype == arr.dtype.newbyteorder("=")
    np.testing.assert_array_equal(out, arr)  # NaNs compare equal here
    write_idx(tmp_path / "b.idx", arr, compress=compress)
    assert (tmp_path / "b.idx").read_bytes() == path.read_bytes()  # deterministic gzip


def test_damage_is_named(tmp_path):
    path = tmp_path / "bad-idx1-ubyte"
    good = encode_idx(np.arange(6, dtype=">i2").reshape(2, 3))
    cases = [
        (b"\x00\x00", r"at byte 0: truncated header: 2 of 4 magic bytes"),
        (b"\x01" + good[1:], r"at byte 0: bad magic 01000b02: an IDX file starts with two zero bytes"),
        (good[:2] + b"\x0a" + good[3:], r"at byte 2: unknown IDX type code 0x0A"),
        (good[:9], r"at byte 9: truncated header: 2 dimensions need 12 bytes, the file has 9"),
        (good[:-3], r"at byte 21: truncated data: shape \(2, 3\) of int16 needs 12 bytes, the file has 9"),
        (good + b"!", r"at byte 24: unexpected bytes after the 12 bytes of data for shape \(2, 3\)"),
    ]
    for data, message in cases:
        path.write_bytes(data)
        with pytest.raises(CorruptRecordError, match=r"bad-idx1-ubyte: " + message):
            read_idx(path)
        gz = tmp_path / "bad.gz"
        gz.write_bytes(gzip.compress(data))
        with pytest.raises(CorruptRecordError, match=r"bad\.gz: " + message):
            read_idx(gz)
    gz.write_bytes(gzip.compress(good)[:-6])
    with pytest.raises(CorruptRecordError, match=r"bad\.gz: damaged gzip stream"):
        read_idx(gz)


def test_huge_declared_shape_does_not_allocate(tmp_path):
    path = tmp_path / "huge.gz"
    path.write_bytes(gzip.compress(bytes([0, 0, 0x0E, 3]) + b"\xff\xff\xff\xff" * 3 + b"12345678"))
    with pytest.raises(CorruptRecordError, match="truncated data: shape .* needs .* bytes, the file has 8"):
        read_idx(path)


def test_write_rejects_types_without_a_code(tmp_path):
    with pytest.raises(TypeError, match="`array` dtype int64 has no IDX type code"):
        write_idx(tmp_path / "x", np.zeros(3, dtype=np.int64))
    with pytest.raises(TypeError, match="`array` dtype uint16 has no IDX type code"):
        encode_idx(np.zeros(3, dtype=np.uint16))
    with pytest.raises(TypeError, match="`array` dtype bool has no IDX type code"):
        encode_idx(np.zeros(3, dtype=bool))


@SETTINGS
@given(st.binary(max_size=64))
def test_random_bytes_give_an_error_or_an_exact_array(data):
    try:
        arr = decode_idx(data, path="fuzz")
    except CorruptRecordError as exc:
        assert str(exc).startswith("fuzz: ")
        return
    # only a well-formed file decodes, and then it re-encodes to the same bytes
    assert encode_idx(arr) == data


@SETTINGS
@given(st.binary(min_size=1, max_size=40))
def test_random_headers_with_valid_magic(body):
    data = b"\x00\x00" + body
    try:
        arr = decode_idx(data)
    except CorruptRecordError:
        return
    assert encode_idx(arr) == data
