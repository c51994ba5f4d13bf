"""Hardening 3 (issue 28), Parquet and Arrow IPC: a damaged file never kills the process
(every fragment is validated before conversion), pyarrow's and the conversion's own
exceptions become feedline errors naming file, record and offset under every
``on_error``, and a Parquet row group far larger than the file is read in bounded
slices."""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow", reason="needs pyarrow: pip install 'feedline[parquet]'")
pq = pytest.importorskip("pyarrow.parquet", reason="needs pyarrow: pip install 'feedline[parquet]'")

from feedline.exceptions import CorruptRecordError, DataError  # noqa: E402
from feedline.formats.parquet import TableFiles, read_batches, read_fragments, read_rows  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from _hardening_util import run_limited  # noqa: E402


def _table(n: int = 300) -> pa.Table:
    return pa.table({"x": np.arange(n), "s": [f"str{i:03d}" for i in range(n)],
                     "l": [[i, i + 1] for i in range(n)]})


def _write_ipc(path: str, table: pa.Table, stream: bool, chunk: int = 100) -> None:
    with pa.OSFile(path, "wb") as f:
        w = (pa.ipc.new_stream if stream else pa.ipc.new_file)(f, table.schema)
        for b in table.to_batches(max_chunksize=chunk):
            w.write_batch(b)
        w.close()


def _break_utf8(path: str, needle: bytes = b"str150") -> int:
    """Overwrite the first byte of ``needle`` with 0xff (invalid UTF-8); return where."""
    data = bytearray(open(path, "rb").read())
    at = data.index(needle)
    data[at] = 0xFF
    open(path, "wb").write(data)
    return at


# ------------------------------------------------------------------ mutation fuzz

FUZZ = r"""
import json, os, random, sys
import numpy as np, pyarrow as pa, pyarrow.parquet as pq
from feedline.exceptions import FeedlineError
from feedline.formats.parquet import read_batches, read_fragments, read_rows

d = sys.argv[1]
t = pa.table({"x": np.arange(300), "s": [f"str{i}" for i in range(300)],
              "l": [[i, i + 1] for i in range(300)], "d": pa.array(["a", "b", "c"] * 100).dictionary_encode()})
base = {}
for kind in ("file", "stream", "parquet"):
    p = os.path.join(d, "base-" + kind)
    if kind == "parquet":
        pq.write_table(t, p, row_group_size=100)
    else:
        with pa.OSFile(p, "wb") as f:
            w = (pa.ipc.new_file if kind == "file" else pa.ipc.new_stream)(f, t.schema)
            for b in t.to_batches(max_chunksize=100):
                w.write_batch(b)
            w.close()
    base[kind] = open(p, "rb").read()
rng = random.Random(int(sys.argv[2]))
for i in range(int(sys.argv[3])):
    kind = ("file", "stream", "parquet")[i % 3]
    data = bytearray(base[kind])
    for _ in range(rng.randint(1, 3)):
        pos = rng.randrange(len(data))
        if rng.random() < 0.7:
            data[pos] ^= 1 << rng.randrange(8)
        else:  # a length or offset word set to something large
            data[pos:pos + 4] = rng.choice([0x7FFFFFFF, 0xFFFFFFFF, 1 << 20, 0x80000000]).to_bytes(4, "little")
    p = os.path.join(d, f"m{i:04d}-{kind}.arrow")
    open(p, "wb").write(bytes(data[:len(base[kind])]))
    print("START", p, flush=True)
    for on_error in ("raise", "skip"):
        try:
            for _ in read_fragments(p, on_error=on_error):
                pass
            for _ in read_rows(p, on_error=on_error):
                pass
            for _ in read_batches(p, batch_size=7, on_error=on_error):
                pass
        except FeedlineError:
            pass
        except BaseException as exc:
            print("ESCAPE", p, type(exc).__name__, str(exc)[:120], flush=True)
    os.unlink(p)
print("END", flush=True)
"""


@pytest.mark.timeout(300)
def test_mutated_arrow_and_parquet_files_never_crash_or_escape(tmp_path):
    """A seeded, bounded mutation fuzz (bit flips and large length words) of Arrow IPC
    file and stream and Parquet files, read in a child process: it must neither die
    (SIGSEGV/SIGBUS/abort) nor let a non-feedline exception out, under raise and skip."""
    proc = run_limited(f"import sys; sys.argv[1:] = [{str(tmp_path)!r}, '28', '240']\nlimit()\n"
                       + FUZZ, timeout=280, extra_mib=2048)
    lines = proc.stdout.splitlines()
    started = [line.split()[1] for line in lines if line.startswith("START")]
    escapes = [line for line in lines if line.startswith("ESCAPE")]
    assert proc.returncode == 0 and lines[-1:] == ["END"], (
        f"the reader process died (rc={proc.returncode}) on {started[-1:]}: "
        f"{proc.stderr[-2000:]}")
    assert not escapes, escapes
    assert len(started) == 240


# ------------------------------------------------------------------ named errors


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "file"])
def test_invalid_utf8_in_an_arrow_batch_is_named_under_every_policy(tmp_path, stream):
    path = str(tmp_path / "t.arrow")
    _write_ipc(path, _table(), stream)
    _break_utf8(path)
    where = r"t\.arrow: record 1 at byte \d+: "
    for on_error in ("raise", "skip", "warn"):
        with pytest.raises(CorruptRecordError, match=where + "record batch 1 does not decode"):
            read_rows(path, on_error=on_error).to_list()
        with pytest.raises(CorruptRecordError, match=where):
            read_batches(path, batch_size=50, on_error=on_error).to_list()
    with pytest.raises(CorruptRecordError, match=where + r".*ArrowInvalid: .*UTF8"):
        read_fragments(path).to_list()
    ds = read_fragments(path, on_error="skip")
    frags = ds.to_list()
    assert [len(f["x"]) for f in frags] == [100, 0, 100]  # the damaged batch left out...
    assert ds.skipped == [(path, 1)]  # ...and counted


def test_invalid_utf8_in_a_parquet_row_group_is_named(tmp_path):
    path = str(tmp_path / "t.parquet")
    pq.write_table(_table(), path, row_group_size=100, compression="none", use_dictionary=False)
    _break_utf8(path)
    with pytest.raises(CorruptRecordError, match=r"t\.parquet: record 1: row group 1 does not decode"):
        read_rows(path).to_list()
    ds = read_fragments(path, on_error="skip")
    assert [len(f["x"]) for f in ds] == [100, 0, 100] and ds.skipped == [(path, 1)]


def test_an_escaping_exception_keeps_its_cause_and_stays_a_value_error(tmp_path):
    path = str(tmp_path / "t.arrow")
    _write_ipc(path, _table(), stream=True)
    _break_utf8(path)
    with pytest.raises(ValueError) as info:  # DataError subclasses ValueError
        read_rows(path)[150]
    assert isinstance(info.value, DataError) and info.value.path == path
    assert info.value.index == 1 and isinstance(info.value.offset, int)
    assert isinstance(info.value.__cause__, pa.ArrowException)


def test_a_file_that_is_gone_is_not_called_corrupt(tmp_path):
    path = str(tmp_path / "t.arrow")
    _write_ipc(path, _table(), stream=False)
    files = TableFiles([path])
    files.close()
    os.unlink(path)
    with pytest.raises(FileNotFoundError):
        files.read_fragment(0)


# ------------------------------------------------------------------ row-group budget


def test_a_large_row_group_is_read_in_bounded_slices_exactly(tmp_path):
    path = str(tmp_path / "big.parquet")
    n = 10_000
    pq.write_table(pa.table({"x": np.arange(n), "s": [str(i) for i in range(n)]}), path,
                   row_group_size=n)
    files = TableFiles([path], max_fragment_rows=3000)
    assert files.fragment_rows == [3000, 3000, 3000, 1000]
    assert files.fragment_local == [0, 0, 0, 0] and files.fragment_row == [0, 3000, 6000, 9000]
    ds = read_batches(files, batch_size=999)
    got = np.concatenate([b["x"] for b in ds])
    np.testing.assert_array_equal(got, np.arange(n))
    rows = read_rows(files, cache_fragments=1)
    assert [rows[i]["x"] for i in (9999, 0, 6001, 2999, 3000)] == [9999, 0, 6001, 2999, 3000]
    assert [len(f["x"]) for f in read_fragments(files)] == [3000, 3000, 3000, 1000]
    with pytest.raises(ValueError, match="`max_fragment_rows` must be a positive int, got 0"):
        TableFiles([path], max_fragment_rows=0)


def test_one_row_of_a_huge_row_group_costs_a_slice_not_the_group(tmp_path):
    """A tiny file whose one row group holds 8M rows (64 MB decoded): reading one row
    decodes one slice of at most 1,048,576 rows, not the whole group."""
    path = str(tmp_path / "nulls.parquet")
    pq.write_table(pa.table({"x": pa.nulls(8_000_000, pa.int64())}), path,
                   row_group_size=8_000_000)
    assert os.path.getsize(path) < 200_000
    code = f"""
import json, pyarrow as pa
from feedline.formats.parquet import read_rows
row = read_rows({path!r})[0]
print(json.dumps({{"row": row, "peak": pa.default_memory_pool().max_memory()}}))
"""
    proc = run_limited(code, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.splitlines()[-1])
    assert out["row"] == {"x": None}
    assert out["peak"] < 32 << 20, out  # the whole group would be over 64 MB


# ------------------------------------------------------------------ saved dataset folders


@pytest.mark.parametrize("state, problem", [
    (b"\xff\xfe{", r"state\.json: at byte 0: not a JSON file"),
    (b"{\"_data_files\": [", r"state\.json: at byte 0: not a JSON file"),
    (b"{\"_data_files\": 3}", r"state\.json: `_data_files` is not a list"),
    (b"{\"_data_files\": [7]}", r"state\.json: record 0: `_data_files\[0\]` is not a file name"),
    (b"{\"_data_files\": [{\"filename\": \"../../x.arrow\"}]}", r"is not a file name inside"),
])
def test_a_damaged_saved_dataset_folder_is_a_named_error(tmp_path, state, problem):
    from feedline.formats.parquet import load_from_disk

    _write_ipc(str(tmp_path / "data-00000-of-00001.arrow"), _table(10), stream=True)
    (tmp_path / "state.json").write_bytes(state)
    with pytest.raises(CorruptRecordError, match=problem):
        load_from_disk(str(tmp_path))
    (tmp_path / "state.json").unlink()
    (tmp_path / "dataset_dict.json").write_bytes(b"{\"splits\": [\"../..\"]}")
    with pytest.raises(CorruptRecordError, match=r"dataset_dict\.json: `splits` is not a list"):
        load_from_disk(str(tmp_path))


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "file"])
def test_a_column_name_that_is_not_utf8_is_named_at_opening(tmp_path, stream):
    bad, good = str(tmp_path / "bad.arrow"), str(tmp_path / "good.arrow")
    table = pa.table({"colname_x": np.arange(10)})
    _write_ipc(bad, table, stream)
    _write_ipc(good, table, stream)
    data = open(bad, "rb").read().replace(b"colname_x", b"colname\xff\xfe")
    open(bad, "wb").write(data)
    with pytest.raises(CorruptRecordError, match=r"bad\.arrow: unreadable schema: UnicodeDecodeError"):
        read_rows(bad)
    files = TableFiles([bad, good], on_error="skip")  # left out and listed
    assert files.paths == [good] and files.skipped[0][0] == bad
    assert read_rows(files).to_list()[:2] == [{"colname_x": 0}, {"colname_x": 1}]
