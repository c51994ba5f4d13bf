"""feedline.io.input_split: MXNet's byte-range InputSplit, reproduced record for record."""

from __future__ import annotations

import json
import pathlib
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from feedline import recordio
from feedline.exceptions import CorruptRecordError, StateError
from feedline.io import InputSplit

M = recordio.MAGIC.to_bytes(4, "little")
SETTINGS = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


FIXTURES = pathlib.Path(__file__).resolve().parent / "data"


def _load_cases():
    expected = json.loads((FIXTURES / "mxnet" / "expected.json").read_text())
    cases = []
    for key, parts in expected["input_split"]["parts"].items():
        names, n = key.split(" nsplit=")
        for r, labels in enumerate(parts):
            cases.append((names, int(n), r, labels))
    return cases


@pytest.mark.parametrize(("names", "num_parts", "part_index", "labels"), _load_cases())
def test_mxnet_part_assignment_is_reproduced(fixtures_dir, names, num_parts, part_index, labels):
    d = fixtures_dir / "mxnet"
    paths = [d / name for name in names.split(";")]
    split = InputSplit(paths, part_index, num_parts)
    got = [int(recordio.unpack(rec)[0].label) for rec in split]
    assert got == labels


def test_semicolon_string_like_mxnet(fixtures_dir):
    d = fixtures_dir / "mxnet"
    joined = ";".join(str(d / n) for n in ("part-a.rec", "part-b.rec", "part-c.rec"))
    split = InputSplit(joined, 1, 2)
    assert len(split.files) == 3
    assert [int(recordio.unpack(r)[0].label) for r in split][:2] == [19, 20]


def test_file_sizes_and_part_boundaries(fixtures_dir):
    d = fixtures_dir / "mxnet"
    sizes = {p.name: p.stat().st_size for p in d.glob("part-*.rec")}
    expected = json.loads((d / "expected.json").read_text())["input_split"]["files"]
    assert sizes == expected
    split = InputSplit(d / "part-b.rec", 0, 4)
    # step = ceil(26352 / 4) = 6588, a multiple of 4; part 0 ends at the first record
    # start at or after 6588
    assert split.begin == 0 and split.end >= 6588 and split.end % 4 == 0
    assert InputSplit(d / "part-b.rec", 1, 4).begin == split.end


# ----------------------------------------------------------------- invariants


def _write_files(tmp_path, payloads, cuts):
    """Write ``payloads`` over several .rec files, a new file after each index in ``cuts``."""
    paths, current, name = [], [], 0
    for i, p in enumerate(payloads):
        current.append(p)
        if i in cuts:
            path = tmp_path / f"f{name}.rec"
            with recordio.RecordIOWriter(path) as w:
                for q in current:
                    w.write(q)
            paths.append(path)
            current, name = [], name + 1
    path = tmp_path / f"f{name}.rec"
    with recordio.RecordIOWriter(path) as w:
        for q in current:
            w.write(q)
    paths.append(path)
    return paths


record = st.tuples(st.integers(0, 300), st.booleans()).map(
    lambda t: (b"%d:" % t[0]) + b"r" * t[0] + (M + b"tail" if t[1] else b"")
)


@SETTINGS
@given(
    st.lists(record, max_size=30).map(lambda rs: [b"%d|" % i + r for i, r in enumerate(rs)]),
    st.sets(st.integers(0, 30), max_size=4),
    st.integers(1, 9),
)
def test_recordio_parts_are_disjoint_and_cover_every_record_once(tmp_path, payloads, cuts, n):
    for old in tmp_path.glob("*.rec"):
        old.unlink()
    paths = _write_files(tmp_path, payloads, cuts)
    parts = [InputSplit(paths, r, n) for r in range(n)]
    assert [rec for part in parts for rec in part] == payloads
    for a, b in zip(parts, parts[1:]):
        assert a.end == b.begin  # contiguous, hence disjoint
    assert parts[0].begin == 0 and parts[-1].end == parts[-1].total_size


def _text_records(files: list[bytes]) -> list[bytes]:
    return [line for data in files for line in re.findall(rb"[^\r\n]+", data)]


text_file = st.lists(
    st.tuples(st.binary(min_size=0, max_size=12).map(lambda b: b.replace(b"\n", b"x").replace(b"\r", b"y")),
              st.sampled_from([b"\n", b"\r\n", b"\n\n", b"\r", b""])),
    max_size=12,
).map(lambda parts: b"".join(a + b for a, b in parts))


@SETTINGS
@given(st.lists(text_file, min_size=1, max_size=4), st.integers(1, 9))
def test_text_parts_are_disjoint_and_cover_every_line_once(tmp_path, files, n):
    paths = []
    for i, data in enumerate(files):
        path = tmp_path / f"t{i}.txt"
        path.write_bytes(data)
        paths.append(path)
    got = [line for r in range(n) for line in InputSplit(paths, r, n, format="text")]
    assert got == _text_records(files)


def test_text_split_follows_mxnet_line_rules(tmp_path):
    a = tmp_path / "a.txt"
    a.write_bytes(b"alpha\nbeta\r\n\ngamma\ndelta")  # 24 bytes, no final newline
    b = tmp_path / "b.txt"
    b.write_bytes(b"epsilon\n")
    # total 32, 2 parts: step 16; nominal 16 lies inside "\ngamma": part 1 starts after
    # the next newline run, at "delta"
    p0, p1 = InputSplit([a, b], 0, 2, format="text"), InputSplit([a, b], 1, 2, format="text")
    assert list(p0) == [b"alpha", b"beta", b"gamma"]
    assert list(p1) == [b"delta", b"epsilon"]  # a file end ends a line, as MXNet's inserted newline
    assert (p0.begin, p0.end, p1.begin, p1.end) == (0, 19, 19, 32)


# ----------------------------------------------------------------- state and errors


@pytest.mark.parametrize("fmt", ["recordio", "text"])
def test_state_restores_at_every_step(tmp_path, fmt):
    if fmt == "recordio":
        payloads = [b"rec%03d" % i + (M if i % 4 == 0 else b"") for i in range(40)]
        paths = _write_files(tmp_path, payloads, {9, 25})
    else:
        payloads = [b"line%03d" % i for i in range(40)]
        paths = []
        for k, chunk in enumerate((payloads[:13], payloads[13:30], payloads[30:])):
            path = tmp_path / f"t{k}.txt"
            path.write_bytes(b"\r\n".join(chunk) + b"\n")
            paths.append(path)
    split = InputSplit(paths, 1, 3, format=fmt)
    expected = list(split)
    assert 5 < len(expected) < 30
    it = split.iterator()
    for step in range(len(expected) + 1):
        state = it.get_state()
        assert json.loads(json.dumps(state)) == state
        assert list(split.iterator(state)) == expected[step:]
        if step < len(expected):
            assert next(it) == expected[step]
    with pytest.raises(StateError, match="state is for part 0 of 3, this iterator reads part 1 of 3"):
        split.iterator({**state, "part": [0, 3]})
    with pytest.raises(StateError, match="lies outside this part's bytes"):
        split.iterator({**state, "offset": split.end + 4})


def test_argument_errors(tmp_path):
    path = tmp_path / "x.rec"
    with recordio.RecordIOWriter(path) as w:
        w.write(b"abc")
    with pytest.raises(ValueError, match="`num_parts` must be a positive int, got 0"):
        InputSplit(path, 0, 0)
    with pytest.raises(ValueError, match=r"`part_index` must be smaller than `num_parts` \(2\), got 2"):
        InputSplit(path, 2, 2)
    with pytest.raises(ValueError, match="`format` must be one of 'recordio', 'text', got 'csv'"):
        InputSplit(path, format="csv")
    with pytest.raises(ValueError, match="`paths` must name at least one file"):
        InputSplit([])
    bad = tmp_path / "odd.rec"
    bad.write_bytes(b"12345")
    with pytest.raises(CorruptRecordError, match=r"odd\.rec: at byte 4: file size 5 is not a multiple of 4"):
        InputSplit(bad)


def test_empty_files_are_left_out_and_damage_is_reported(tmp_path):
    empty = tmp_path / "empty.rec"
    empty.write_bytes(b"")
    path = tmp_path / "y.rec"
    with recordio.RecordIOWriter(path) as w:
        for i in range(4):
            w.write(b"payload%d" % i)
    assert [len(InputSplit([empty, path, empty], r, 2).files) for r in range(2)] == [1, 1]
    assert [rec for r in range(3) for rec in InputSplit([empty, path], r, 3)] == [
        b"payload%d" % i for i in range(4)
    ]
    data = bytearray(path.read_bytes())
    data[16] ^= 0xFF  # the magic word of record 1 (record 0 takes 8 + 8 bytes)
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptRecordError, match=r"y\.rec: record 1 at byte 16: bad magic word"):
        list(InputSplit(path))
    it = InputSplit(path, on_error="skip").iterator()
    assert list(it) == [b"payload0", b"payload2", b"payload3"] and it.skipped == 1
    assert list(InputSplit([empty])) == []


# What MXNet 1.9.1 gives for the text files below: mx.io.LibSVMIter(data_libsvm=";".join(paths),
# data_shape=(1,), batch_size=1, num_parts=n, part_index=r) reads each part through dmlc-core's
# text InputSplit; the parts are contiguous, so [first label, last label] per part pins them.
MXNET_TEXT_PARTS = {
    "1 1": [[23, 53]],
    "1 2": [[23, 38], [39, 53]],
    "1 3": [[23, 33], [34, 44], [45, 53]],
    "1 4": [[23, 30], [31, 38], [39, 46], [47, 53]],
    "1 5": [[23, 28], [29, 35], [36, 41], [42, 48], [49, 53]],
    "1 6": [[23, 28], [29, 33], [34, 38], [39, 44], [45, 49], [50, 53]],
    "3 1": [[0, 70]],
    "3 2": [[0, 35], [36, 70]],
    "3 3": [[0, 23], [24, 47], [48, 70]],
    "3 4": [[0, 18], [19, 35], [36, 52], [53, 70]],
    "3 5": [[0, 14], [15, 28], [29, 42], [43, 57], [58, 70]],
    "3 6": [[0, 12], [13, 23], [24, 35], [36, 47], [48, 59], [60, 70]],
}


def _libsvm_files(directory):
    """Three libsvm-style text files: mixed newline runs, trailing spaces, and a middle
    file without a final newline (labels 0-22, 23-53, 54-70)."""
    seps = ["\n", "\n", "\n\n", "\r\n", "\n\r\n"]
    paths, label = [], 0
    for f, (count, final_newline) in enumerate([(23, True), (31, False), (17, True)]):
        out = []
        for _ in range(count):
            out.append(f"{label} 0:{label * 37 % 97 + 1}" + " " * (label * 13 % 31))
            out.append(seps[label * 7 % 5])
            label += 1
        if not final_newline:
            out.pop()
        path = directory / f"t{f}.txt"
        path.write_bytes("".join(out).encode())
        paths.append(path)
    return paths


@pytest.mark.parametrize("key", sorted(MXNET_TEXT_PARTS))
def test_text_parts_match_mxnet(tmp_path, key):
    files, n = (int(x) for x in key.split())
    paths = _libsvm_files(tmp_path)
    paths = paths[1:2] if files == 1 else paths
    got = []
    for r in range(n):
        labels = [int(line.split()[0]) for line in InputSplit(paths, r, n, format="text")]
        got.append([labels[0], labels[-1]] if labels else [])
        assert labels == list(range(labels[0], labels[-1] + 1))
    assert got == MXNET_TEXT_PARTS[key]
