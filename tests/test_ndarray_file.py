"""MXNet NDArray list files: what MXNet 1.9.1 wrote reads back as it does, and is rewritten
byte for byte."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from feedline import ndarray_file
from feedline.exceptions import CorruptRecordError

PEER = pathlib.Path(__file__).resolve().parent / "peer_outputs" / "mxnet_ndarray"
EXPECTED = json.loads((PEER / "expected.json").read_text())


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_reads_what_mxnet_wrote_and_writes_the_same_bytes(name):
    want = EXPECTED[name]
    loaded = ndarray_file.load(PEER / name)
    assert isinstance(loaded, dict) == want["named"]
    items = list(loaded.items()) if want["named"] else list(enumerate(loaded))
    assert len(items) == len(want["arrays"])
    for (key, array), spec in zip(items, want["arrays"]):
        if want["named"]:
            assert key == spec["name"]
        assert array.dtype == np.dtype(spec["dtype"].rstrip("_"))
        assert list(array.shape) == spec["shape"]
        np.testing.assert_array_equal(array.astype(np.float64).ravel(), spec["values"])
    assert ndarray_file.dumps(loaded) == (PEER / name).read_bytes()


def test_save_is_atomic_and_round_trips(tmp_path):
    path = tmp_path / "x.bin"
    data = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.array([True, False])}
    ndarray_file.save(path, data)
    back = ndarray_file.load(path)
    assert list(back) == ["a", "b"] and back["a"].flags.writeable
    np.testing.assert_array_equal(back["a"], data["a"])
    assert [p.name for p in tmp_path.iterdir()] == ["x.bin"]
    assert ndarray_file.load(tmp_path / "x.bin")["b"].dtype == np.bool_
    ndarray_file.save(path, [np.float64(2.5)])  # a 0-d value is stored as shape (1,), as MXNet 1.x does
    np.testing.assert_array_equal(ndarray_file.load(path)[0], [2.5])


def test_bad_input_is_refused_with_path_and_offset(tmp_path):
    blob = (PEER / "mean_img.bin").read_bytes()
    cut = tmp_path / "cut.bin"
    cut.write_bytes(blob[:100])
    with pytest.raises(CorruptRecordError,
                       match=r"cut.bin: at byte 72: the file ends inside array 0's 240 data bytes"):
        ndarray_file.load(cut)
    other = tmp_path / "other.bin"
    other.write_bytes(b"\x00" * 24)
    with pytest.raises(CorruptRecordError, match=r"other.bin: at byte 0: not an MXNet NDArray list"):
        ndarray_file.load(other)
    sparse = bytearray(blob)
    sparse[28:32] = (1).to_bytes(4, "little")
    with pytest.raises(CorruptRecordError, match=r"at byte 24: array 0: sparse NDArrays"):
        ndarray_file.loads(bytes(sparse))
    with pytest.raises(CorruptRecordError, match=r"at byte 336: 1 unexpected bytes after the names"):
        ndarray_file.loads(blob + b"\x00")
    old_layout = bytearray(blob)
    old_layout[24:28] = (0xF993FAC8).to_bytes(4, "little")
    with pytest.raises(CorruptRecordError, match=r"at byte 24: array 0: unsupported NDArray layout "
                                                 r"\(magic 0xf993fac8; only the MXNet >= 1.0"):
        ndarray_file.loads(bytes(old_layout))
    bad_type = bytearray(blob)
    bad_type[68:72] = (12).to_bytes(4, "little")
    with pytest.raises(CorruptRecordError, match=r"at byte 24: array 0: unsupported type flag 12"):
        ndarray_file.loads(bytes(bad_type))
    bad_dim = bytearray(blob)
    bad_dim[36:44] = (-3).to_bytes(8, "little", signed=True)
    with pytest.raises(CorruptRecordError, match=r"at byte 24: array 0: negative dimension"):
        ndarray_file.loads(bytes(bad_dim))
    names = ndarray_file.dumps({"a": np.zeros(1, np.uint8), "b": np.zeros(1, np.uint8)})
    one_name = names[: names.index(b"\x01\x00\x00\x00\x00\x00\x00\x00a") - 8] + (1).to_bytes(8, "little")
    one_name += (1).to_bytes(8, "little") + b"a"
    with pytest.raises(CorruptRecordError, match=r"1 names for 2 arrays"):
        ndarray_file.loads(one_name)
    with pytest.raises(TypeError, match="MXNet NDArray files cannot hold dtype complex64"):
        ndarray_file.dumps({"z": np.zeros(2, np.complex64)})
    with pytest.raises(TypeError, match="`data` must be a dict name -> array or a list"):
        ndarray_file.dumps("abc")


@settings(max_examples=60, deadline=None)
@given(arrays=st.lists(hnp.arrays(
    st.sampled_from([np.float32, np.float64, np.float16, np.uint8, np.int32, np.int8, np.int64,
                     np.bool_]),
    hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=4)), max_size=4))
def test_hypothesis_round_trip_and_truncation(arrays):
    blob = ndarray_file.dumps(arrays)
    back = ndarray_file.loads(blob)
    assert len(back) == len(arrays)
    for a, b in zip(arrays, back):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)
    for cut in range(len(blob)):
        with pytest.raises(CorruptRecordError):
            ndarray_file.loads(blob[:cut])
