"""feedline.fixed: FixedLengthRecordDataset semantics, random access, CIFAR readers."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from feedline import fixed
from feedline.exceptions import CorruptRecordError, StateError

SETTINGS = settings(
    max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def test_cifar10_fixture_matches_tensorflow(fixtures_dir):
    tf = fixtures_dir / "tensorflow"
    exp = json.loads((tf / "expected.json").read_text())["cifar10_batch.bin"]
    records = list(fixed.read_cifar10(tf / "cifar10_batch.bin"))
    assert [label for label, _ in records] == exp["labels"]
    assert all(img.shape == (32, 32, 3) and img.dtype == np.uint8 for _, img in records)
    assert [int(img.sum()) for _, img in records] == exp["pixel_sums_hwc"]
    assert records[0][1][0].tobytes() == base64.b64decode(exp["first_image_hwc_row0_base64"])
    raw = fixed.FixedLengthRecords(tf / "cifar10_batch.bin", exp["record_bytes"])
    assert len(raw) == 25 and raw[3][0] == exp["labels"][3]


def test_cifar100_two_labels(tmp_path):
    path = tmp_path / "train.bin"
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (3, 32, 32, 3), dtype=np.uint8)
    labels = [(1, 11), (2, 22), (19, 99)]
    with open(path, "wb") as f:
        for (coarse, fine), img in zip(labels, images):
            f.write(bytes([coarse, fine]) + img.transpose(2, 0, 1).tobytes())
    out = list(fixed.read_cifar100(path))
    assert [lab for lab, _ in out] == labels
    for (_, got), want in zip(out, images):
        np.testing.assert_array_equal(got, want)


def test_header_footer_and_several_files(tmp_path):
    a, b = tmp_path / "a.bin", tmp_path / "b.bin"
    a.write_bytes(b"HH" + b"0123456789AB" + b"F")
    b.write_bytes(b"hh" + b"" + b"f")  # a file with no records
    c = tmp_path / "c.bin"
    c.write_bytes(b"HHxyzF")
    records = list(fixed.read_fixed([a, b, c], 3, header_bytes=2, footer_bytes=1))
    assert records == [b"012", b"345", b"678", b"9AB", b"xyz"]
    ra = fixed.FixedLengthRecords([a, b, c], 3, header_bytes=2, footer_bytes=1)
    assert len(ra) == 5 and [ra[i] for i in range(5)] == records and ra[-1] == b"xyz"
    with pytest.raises(IndexError, match="record 5 out of range for 5 records"):
        ra[5]
    assert list(ra) == records


def test_partial_record_is_an_error_naming_path_and_offset(tmp_path):
    good = tmp_path / "good.bin"
    good.write_bytes(b"Haabb")
    bad = tmp_path / "bad.bin"
    bad.write_bytes(b"H" + b"ccddeeX")
    it = fixed.read_fixed([good, bad], 2, header_bytes=1)
    assert [next(it), next(it)] == [b"aa", b"bb"]  # the error comes when the file is reached
    with pytest.raises(
        CorruptRecordError,
        match=r"bad\.bin: record 5 at byte 7: partial record of 1 bytes: excluding the header "
        r"\(1 bytes\) and footer \(0 bytes\) the file has 7 bytes, not a multiple of record_bytes \(2\)",
    ) as info:
        next(it)
    assert info.value.offset == 7 and info.value.index == 5
    skip = fixed.read_fixed([good, bad], 2, header_bytes=1, on_error="skip")
    assert list(skip) == [b"aa", b"bb", b"cc", b"dd", b"ee"] and skip.skipped == 1
    with pytest.warns(RuntimeWarning, match="skipping damaged data: .*partial record"):
        assert len(list(fixed.read_fixed(bad, 2, header_bytes=1, on_error="warn"))) == 3
    with pytest.raises(CorruptRecordError, match=r"bad\.bin: record 5 at byte 7: partial record"):
        fixed.FixedLengthRecords([good, bad], 2, header_bytes=1)[0]
    assert len(fixed.FixedLengthRecords([good, bad], 2, header_bytes=1, on_error="skip")) == 5


def test_file_shorter_than_header_and_footer(tmp_path):
    path = tmp_path / "short.bin"
    path.write_bytes(b"abc")
    with pytest.raises(
        CorruptRecordError,
        match=r"short\.bin: record 0 at byte 2: file of 3 bytes is shorter than header_bytes \(2\) \+ footer_bytes \(2\)",
    ):
        list(fixed.read_fixed(path, 4, header_bytes=2, footer_bytes=2))


def test_state_restores_at_every_step_across_files(tmp_path):
    paths = []
    records = []
    for k, n in enumerate([3, 0, 4, 1]):
        body = [bytes([k, i]) * 3 for i in range(n)]
        records += body
        path = tmp_path / f"f{k}.bin"
        path.write_bytes(b"#" + b"".join(body))
        paths.append(path)
    it = fixed.read_fixed(paths, 6, header_bytes=1)
    for step in range(len(records) + 1):
        state = it.get_state()
        assert json.loads(json.dumps(state)) == state
        fresh = fixed.read_fixed(paths, 6, header_bytes=1)
        fresh.set_state(state)
        assert list(fresh) == records[step:]
        if step < len(records):
            assert next(it) == records[step]
    with pytest.raises(StateError, match="state offset 4 is not at a record boundary"):
        fixed.read_fixed(paths, 6, header_bytes=1).set_state({**state, "file": 0, "offset": 4})
    it.close()


def test_argument_validation(tmp_path):
    path = tmp_path / "x.bin"
    path.write_bytes(b"")
    with pytest.raises(ValueError, match="`record_bytes` must be a positive int, got 0"):
        fixed.read_fixed(path, 0)
    with pytest.raises(ValueError, match="`header_bytes` must be a non-negative int, got -1"):
        fixed.read_fixed(path, 1, header_bytes=-1)
    with pytest.raises(ValueError, match="`on_error` must be one of 'raise', 'skip', 'warn', got 'x'"):
        fixed.FixedLengthRecords(path, 1, on_error="x")
    with pytest.raises(TypeError, match="`paths` must be a path or a list of paths"):
        fixed.read_fixed(3, 1)
    assert list(fixed.read_fixed(path, 1)) == []


def test_cifar_state_and_large_files(tmp_path):
    path = tmp_path / "data_batch_1.bin"
    n = 400  # > 1 MiB, several read chunks
    rng = np.random.default_rng(1)
    data = rng.integers(0, 256, (n, 3073), dtype=np.uint8)
    path.write_bytes(data.tobytes())
    it = fixed.read_cifar10(path)
    first = [next(it) for _ in range(350)]
    state = it.get_state()
    rest = fixed.read_cifar10(path)
    rest.set_state(state)
    tail = list(rest)
    assert len(first) + len(tail) == n
    assert [lab for lab, _ in first + tail] == data[:, 0].tolist()
    np.testing.assert_array_equal(tail[-1][1], data[-1, 1:].reshape(3, 32, 32).transpose(1, 2, 0))


@SETTINGS
@given(st.binary(max_size=100), st.integers(1, 9), st.integers(0, 3), st.integers(0, 3))
def test_any_bytes_give_records_or_a_named_error(tmp_path, data, rb, header, footer):
    path = tmp_path / "fuzz.bin"
    path.write_bytes(data)
    body = len(data) - header - footer
    if body >= 0 and body % rb == 0:
        got = list(fixed.read_fixed(path, rb, header_bytes=header, footer_bytes=footer))
        assert b"".join(got) == data[header : len(data) - footer]
        assert all(len(r) == rb for r in got)
    else:
        with pytest.raises(CorruptRecordError, match="fuzz.bin"):
            list(fixed.read_fixed(path, rb, header_bytes=header, footer_bytes=footer))
