"""Parquet: read what pyarrow writes, pyarrow reads what feedline writes, resume, splits,
damage."""

from __future__ import annotations

import json
import os
import sys
import warnings

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from feedline import Dataset, split  # noqa: E402
from feedline.exceptions import CorruptRecordError, MissingFeatureError  # noqa: E402
from feedline.parquet import (  # noqa: E402
    ParquetWriter,
    TableFiles,
    read_batches,
    read_fragments,
    read_rows,
    rebatch,
    write_parquet,
)

from resume_helpers import assert_resumes_everywhere  # noqa: E402


def mixed_table(n: int = 23) -> pa.Table:
    rng = np.random.default_rng(0)
    return pa.table({
        "id": pa.array(np.arange(n, dtype=np.int64)),
        "score": pa.array(rng.random(n).astype(np.float32)),
        "flag": pa.array([i % 3 == 0 for i in range(n)]),
        "name": pa.array([f"row-{i}" for i in range(n)]),
        "blob": pa.array([bytes([i % 256]) * (i % 4) for i in range(n)], pa.binary()),
        "tokens": pa.array([list(range(i % 5)) for i in range(n)], pa.list_(pa.int32())),
        "emb": pa.array([[float(i), i + 0.5, -i] for i in range(n)], pa.list_(pa.float32(), 3)),
        "maybe": pa.array([None if i % 4 == 0 else i for i in range(n)], pa.int64()),
    })


@pytest.fixture
def mixed(tmp_path):
    table = mixed_table()
    path = tmp_path / "mixed.parquet"
    pq.write_table(table, path, row_group_size=5)
    return str(path), table


def make_ids(tmp_path, n: int, row_group_size: int, name: str = "ids.parquet") -> str:
    path = tmp_path / name
    pq.write_table(pa.table({"id": np.arange(n, dtype=np.int64),
                             "sq": np.arange(n, dtype=np.int64) ** 2}), path,
                   row_group_size=row_group_size)
    return str(path)


# ---------------------------------------------------------------------- reading
def test_rows_equal_what_pyarrow_reads(mixed):
    path, table = mixed
    ds = read_rows(path)
    assert len(ds) == table.num_rows
    assert ds.files.fragment_rows == [5, 5, 5, 5, 3]
    assert ds.to_list() == pq.read_table(path).to_pylist()
    assert ds[7] == table.slice(7, 1).to_pylist()[0]
    assert ds[-1]["id"] == table.num_rows - 1


def test_batches_are_numpy_columns_without_per_row_objects(mixed):
    path, table = mixed
    batches = read_batches(path, batch_size=7).to_list()
    assert [len(b["id"]) for b in batches] == [7, 7, 7, 2]
    whole = {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}
    assert whole["id"].dtype == np.int64 and whole["id"].tolist() == list(range(23))
    assert whole["score"].dtype == np.float32
    np.testing.assert_array_equal(whole["score"], table.column("score").to_numpy())
    assert whole["flag"].dtype == np.bool_
    assert whole["name"].dtype == object and whole["name"][4] == "row-4"
    assert whole["blob"][6] == b"\x06\x06"
    assert whole["emb"].shape == (23, 3) and whole["emb"].dtype == np.float32
    np.testing.assert_array_equal(whole["emb"][2], [2.0, 2.5, -2.0])
    assert whole["tokens"].dtype == object and whole["tokens"][3].tolist() == [0, 1, 2]
    assert np.isnan(whole["maybe"][0]) and whole["maybe"][1] == 1.0
    # a batch inside one row group is a view of the decoded column: no copy
    inside = read_batches(path, batch_size=5)[1]["id"]
    assert inside.base is not None and not inside.flags.writeable


def test_drop_remainder_and_lengths(tmp_path):
    path = make_ids(tmp_path, 10, 4)
    assert len(read_batches(path, batch_size=3)) == 4
    ds = read_batches(path, batch_size=3, drop_remainder=True)
    assert len(ds) == 3
    assert [b["id"].tolist() for b in ds] == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]


def test_column_selection_keeps_the_given_order(mixed):
    path, _ = mixed
    ds = read_batches(path, batch_size=4, columns=["name", "id"])
    assert ds.column_names == ["name", "id"]
    first = ds[0]
    assert list(first) == ["name", "id"] and first["id"].tolist() == [0, 1, 2, 3]
    assert read_rows(path, columns=["flag"])[3] == {"flag": True}


def test_missing_column_names_column_and_file(mixed):
    path, _ = mixed
    with pytest.raises(MissingFeatureError, match=r"mixed\.parquet: no column 'nope'"):
        read_rows(path, columns=["id", "nope"])


def test_several_files_are_one_table_in_order(tmp_path):
    for i in range(3):
        pq.write_table(pa.table({"v": np.arange(i * 4, i * 4 + 4)}), tmp_path / f"p{i}.parquet",
                       row_group_size=3)
    ds = read_batches(str(tmp_path / "p*.parquet"), batch_size=5)
    assert [b["v"].tolist() for b in ds] == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9], [10, 11]]
    assert read_fragments([tmp_path / "p1.parquet", tmp_path / "p0.parquet"])[0]["v"].tolist() \
        == [4, 5, 6]


def test_a_folder_reads_only_its_table_files(tmp_path):
    (tmp_path / "_SUCCESS").write_bytes(b"")
    for i in range(2):
        pq.write_table(pa.table({"v": [i]}), tmp_path / f"part-{i}.parquet")
    assert [r["v"] for r in read_rows(tmp_path)] == [0, 1]
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("x")
    with pytest.raises(FileNotFoundError, match="file in folder"):
        read_rows(empty)


def test_only_max_open_files_stay_open(tmp_path, monkeypatch):
    monkeypatch.setattr(TableFiles, "max_open_files", 2)
    paths = []
    for i in range(5):
        paths.append(str(tmp_path / f"p{i}.parquet"))
        pq.write_table(pa.table({"v": [2 * i, 2 * i + 1]}), paths[-1])
    ds = read_rows(paths, cache_fragments=1)
    assert sum(h is not None for h in ds.files._handles) == 2
    assert [r["v"] for r in ds] == list(range(10))
    assert [ds[i]["v"] for i in (9, 0, 5, 1)] == [9, 0, 5, 1]
    assert sum(h is not None for h in ds.files._handles) == 2


def test_files_of_different_columns_are_refused(tmp_path):
    pq.write_table(pa.table({"a": [1]}), tmp_path / "a.parquet")
    pq.write_table(pa.table({"b": [1]}), tmp_path / "b.parquet")
    with pytest.raises(ValueError, match=r"b\.parquet: its columns .* differ"):
        read_rows([tmp_path / "a.parquet", tmp_path / "b.parquet"])


def test_options_are_validated():
    with pytest.raises(ValueError, match="`batch_size` must be a positive int, got 0"):
        read_batches("x.parquet", batch_size=0)
    with pytest.raises(ValueError, match="`format` must be one of 'auto', 'parquet', 'arrow'"):
        TableFiles(["x.parquet"], format="csv")
    with pytest.raises(TypeError, match="`columns` must be a list of column names"):
        TableFiles(["x.parquet"], columns="id")
    with pytest.raises(ValueError, match="`row_group_size` must be a positive int, got 0"):
        ParquetWriter("x.parquet", row_group_size=0)


def test_missing_pyarrow_names_the_extra(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(ImportError, match=r"pip install 'feedline\[parquet\]'"):
        TableFiles([str(tmp_path / "a.parquet")])


# ---------------------------------------------------------------------- resume
def test_rows_resume_from_every_step(tmp_path):
    path = make_ids(tmp_path, 11, 4)
    full = assert_resumes_everywhere(read_rows(path))
    assert [r["id"] for r in full] == list(range(11))


def test_batches_resume_from_every_step_also_shuffled(tmp_path):
    path = make_ids(tmp_path, 17, 5)
    assert_resumes_everywhere(read_batches(path, batch_size=3))
    shuffled = read_batches(path, batch_size=3).global_shuffle(seed=4)
    full = assert_resumes_everywhere(shuffled)
    assert len(full) == 6


def test_rebatch_of_split_fragments_resumes_from_every_step(tmp_path):
    path = make_ids(tmp_path, 29, 4)
    ds = rebatch(split(read_fragments(path).global_shuffle(seed=2), 1, 2, policy="none"), 3)
    assert_resumes_everywhere(ds)
    other = rebatch(split(read_fragments(path).global_shuffle(seed=2), 0, 2, policy="none"), 3)
    ids = [i for part in (ds, other) for b in part.iterator(epoch=0) for i in b["id"].tolist()]
    assert sorted(ids) == list(range(29))
    assert_resumes_everywhere(rebatch(read_fragments(path), 5, drop_remainder=True))


def test_rebatch_cuts_across_fragments_exactly(tmp_path):
    path = make_ids(tmp_path, 10, 3)
    out = rebatch(read_fragments(path), 4).to_list()
    assert [b["id"].tolist() for b in out] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert [b["sq"].tolist() for b in rebatch(read_fragments(path), 4, drop_remainder=True)] == \
        [[0, 1, 4, 9], [16, 25, 36, 49]]


def test_rebatch_refuses_what_is_not_column_batches():
    with pytest.raises(TypeError, match="rebatch needs dicts of equal-length arrays, got int"):
        rebatch(Dataset.range(3), 2).to_list()
    bad = Dataset.from_iterable([{"a": np.zeros(2), "b": np.zeros(3)}])
    with pytest.raises(ValueError, match="equal-length arrays, got lengths"):
        rebatch(bad, 2).to_list()
    with pytest.raises(ValueError, match="`batch_size` must be a positive int, got 0"):
        rebatch(Dataset.range(3), 0)


# ---------------------------------------------------------------------- splits
def _parts(ds, policy):
    return [split(ds, r, 2, worker=w, num_workers=2, policy=policy)
            for r in range(2) for w in range(2)]


def test_rows_exactly_once_across_2_ranks_x_2_workers(tmp_path):
    path = make_ids(tmp_path, 103, 10)
    parts = _parts(read_rows(path).global_shuffle(seed=9), "none")
    seen = [r["id"] for p in parts for r in p]
    assert sorted(seen) == list(range(103))
    for p in parts:  # each part resumes exactly
        assert_resumes_everywhere(p, max_steps=4)


def test_batches_equal_counts_across_2_ranks_x_2_workers(tmp_path):
    path = make_ids(tmp_path, 100, 12)
    parts = _parts(read_batches(path, batch_size=5), "drop_remainder")
    counts = [len(p.to_list()) for p in parts]
    assert counts == [5, 5, 5, 5]
    ids = [i for p in parts for b in p for i in b["id"].tolist()]
    assert sorted(ids) == list(range(100))


def test_row_groups_exactly_once_across_2_ranks_x_2_workers(tmp_path):
    path = make_ids(tmp_path, 95, 10)  # 10 row groups, the last one of 5 rows
    parts = [rebatch(p, 8) for p in _parts(read_fragments(path).global_shuffle(seed=3), "none")]
    ids = []
    for p in parts:
        batches = p.to_list()
        assert all(len(b["id"]) == 8 for b in batches[:-1])
        ids.extend(i for b in batches for i in b["id"].tolist())
        assert_resumes_everywhere(p)
    assert sorted(ids) == list(range(95))


def test_worker_processes_read_their_own_fragments(tmp_path):
    path = make_ids(tmp_path, 40, 7)
    ds = read_batches(path, batch_size=6)
    inline = [b["sq"].tolist() for b in ds]
    with ds.map(lambda b: b["sq"].tolist(), num_workers=2).iterator() as it:
        assert list(it) == inline


def test_threads_share_one_reader(tmp_path):
    path = make_ids(tmp_path, 300, 7)
    ds = read_rows(path, cache_fragments=3).global_shuffle(seed=5)
    expected = [r["sq"] for r in ds.iterator(epoch=0)]
    threaded = ds.map(lambda r: r["sq"], num_workers=2, backend="thread")
    with threaded.iterator(epoch=0) as it:
        assert list(it) == expected
    assert sorted(expected) == [i * i for i in range(300)]


# ---------------------------------------------------------------------- damage
def test_truncated_file_is_a_named_error(tmp_path):
    path = make_ids(tmp_path, 50, 10)
    data = open(path, "rb").read()
    with open(path, "wb") as f:
        f.write(data[: len(data) // 2])
    with pytest.raises(CorruptRecordError, match=r"ids\.parquet: damaged or truncated Parquet"):
        read_rows(path)


def test_truncated_file_is_skipped_and_counted_on_request(tmp_path):
    good = make_ids(tmp_path, 6, 4, "a.parquet")
    bad = make_ids(tmp_path, 6, 4, "b.parquet")
    data = open(bad, "rb").read()
    open(bad, "wb").write(data[:-10])
    ds = read_rows([good, bad], on_error="skip")
    assert [r["id"] for r in ds] == list(range(6))
    assert [p for p, _ in ds.files.skipped] == [bad]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        read_rows([good, bad], on_error="warn")
    assert any("skipping damaged data" in str(w.message) and "b.parquet" in str(w.message)
               for w in caught)
    with pytest.raises(CorruptRecordError, match="none of the 1 files could be read"):
        read_rows([bad], on_error="skip")


def test_damaged_row_group_names_file_and_row_group(tmp_path):
    path = tmp_path / "d.parquet"
    pq.write_table(pa.table({"x": np.arange(100)}), path, row_group_size=50, compression="none")
    offset = pq.ParquetFile(path).metadata.row_group(1).column(0).data_page_offset
    data = bytearray(path.read_bytes())
    data[offset:offset + 40] = b"\xff" * 40
    path.write_bytes(bytes(data))
    ds = read_batches(str(path), batch_size=50)
    assert ds[0]["x"].tolist() == list(range(50))
    with pytest.raises(CorruptRecordError, match=r"d\.parquet: record 1: row group 1 does not decode"):
        ds[1]


def test_a_file_removed_after_opening_is_not_called_corrupt(tmp_path):
    path = make_ids(tmp_path, 8, 4)
    ds = read_batches(path, batch_size=4)
    ds.close()  # drops the open file and the decoded fragments
    os.remove(path)
    with pytest.raises(FileNotFoundError):
        ds[1]


def test_damaged_row_group_is_skipped_and_counted_in_the_fragment_path(tmp_path):
    path = tmp_path / "d.parquet"
    pq.write_table(pa.table({"x": np.arange(90, dtype=np.int32)}), path, row_group_size=30,
                   compression="none")
    offset = pq.ParquetFile(path).metadata.row_group(1).column(0).data_page_offset
    data = bytearray(path.read_bytes())
    data[offset:offset + 40] = b"\xff" * 40
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptRecordError, match="row group 1 does not decode"):
        read_fragments(str(path)).to_list()
    frags = read_fragments(str(path), on_error="skip")
    empty = frags[1]
    assert empty["x"].dtype == np.int32 and len(empty["x"]) == 0
    ids = [i for b in rebatch(frags, 25) for i in b["x"].tolist()]
    assert ids == list(range(30)) + list(range(60, 90))
    assert frags.skipped == [(str(path), 1), (str(path), 1)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        read_fragments(str(path), on_error="warn")[1]
    assert any("row group 1 does not decode" in str(w.message) for w in caught)


def test_not_a_table_file(tmp_path):
    path = tmp_path / "x.parquet"
    path.write_bytes(b"hello world, not parquet")
    with pytest.raises(CorruptRecordError, match=r"x\.parquet: not a Parquet or Arrow IPC file"):
        read_rows(str(path))
    with pytest.raises(FileNotFoundError, match="no file matches"):
        read_rows(str(tmp_path / "absent.parquet"))


# ---------------------------------------------------------------------- writing
def test_pyarrow_reads_what_feedline_writes(tmp_path):
    path = tmp_path / "w.parquet"
    rows = [{"id": i, "name": f"n{i}", "vals": [i, i + 1]} for i in range(10)]
    n = write_parquet(Dataset.from_iterable(rows), path, row_group_size=4)
    assert n == 10
    pf = pq.ParquetFile(path)
    assert [pf.metadata.row_group(i).num_rows for i in range(pf.metadata.num_row_groups)] == \
        [4, 4, 2]
    assert pf.read().to_pylist() == rows
    assert read_rows(str(path)).to_list() == rows
    assert os.listdir(tmp_path) == ["w.parquet"]


def test_batches_written_round_trip_with_2d_arrays(tmp_path):
    path = tmp_path / "b.parquet"
    emb = np.arange(30, dtype=np.float32).reshape(10, 3)
    batches = [{"id": np.arange(5), "emb": emb[:5], "s": np.array(list("abcde"), dtype=object)},
               {"id": np.arange(5, 10), "emb": emb[5:], "s": np.array(list("fghij"), dtype=object)}]
    assert write_parquet(batches, path, batched=True, row_group_size=3) == 10
    assert pq.ParquetFile(path).schema_arrow.field("emb").type == pa.list_(pa.float32(), 3)
    back = read_batches(str(path), batch_size=10)[0]
    np.testing.assert_array_equal(back["emb"], emb)
    assert back["id"].tolist() == list(range(10)) and "".join(back["s"]) == "abcdefghij"


def test_writer_schema_is_kept_and_mismatch_named(tmp_path):
    schema = pa.schema([("a", pa.int16()), ("b", pa.string())])
    path = tmp_path / "s.parquet"
    with ParquetWriter(path, schema=schema, row_group_size=2) as w:
        w.write({"a": 1, "b": "x"})
        w.write_batch({"b": np.array(["y"], dtype=object), "a": np.array([2])})
    assert pq.read_schema(path).field("a").type == pa.int16()
    assert pq.read_table(path).to_pylist() == [{"a": 1, "b": "x"}, {"a": 2, "b": "y"}]
    with pytest.raises(ValueError, match=r"data lacks the columns \['b'\]"):
        with ParquetWriter(tmp_path / "t.parquet", schema=schema) as w:
            w.write_batch({"a": np.array([1])})
    assert not (tmp_path / "t.parquet").exists()


def test_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "keep.parquet"
    write_parquet([{"x": 1}], path)

    def boom(i):
        if i == 7:
            raise RuntimeError("source failed")
        return {"x": i}

    with pytest.raises(RuntimeError, match="source failed"):
        write_parquet(Dataset.range(10).map(boom), path, row_group_size=2)
    assert pq.read_table(path).to_pylist() == [{"x": 1}]
    assert os.listdir(tmp_path) == ["keep.parquet"]
    w = ParquetWriter(tmp_path / "gone.parquet")
    w.write({"x": 1})
    w.abort()
    with pytest.raises(ValueError, match="write to a closed ParquetWriter"):
        w.write({"x": 2})
    assert os.listdir(tmp_path) == ["keep.parquet"]


def test_empty_write_with_schema_gives_an_empty_file(tmp_path):
    path = tmp_path / "e.parquet"
    assert write_parquet([], path, schema=pa.schema([("a", pa.int64())])) == 0
    assert pq.read_table(path).num_rows == 0 and pq.read_schema(path).names == ["a"]
    assert read_rows(str(path)).to_list() == []


def test_fsspec_urls_write_and_read(tmp_path):
    pytest.importorskip("fsspec")
    url = "memory://feedline-parquet-test/data.parquet"
    try:
        write_parquet(({"i": i, "t": str(i)} for i in range(9)), url, row_group_size=4)
        ds = read_batches(url, batch_size=4)
        assert [b["i"].tolist() for b in ds] == [[0, 1, 2, 3], [4, 5, 6, 7], [8]]
        assert read_rows(url).files.fragment_rows == [4, 4, 1]
        state = json.loads(json.dumps(ds.iterator().get_state()))
        assert state["stages"]["next"] == 0
    finally:
        import fsspec

        fsspec.filesystem("memory").rm("/feedline-parquet-test", recursive=True)


def test_readme_example(tmp_path, monkeypatch):
    """The snippet given for the README, run as written (with a saved folder made here)."""
    datasets = pytest.importorskip("datasets")
    monkeypatch.chdir(tmp_path)
    datasets.DatasetDict({"train": datasets.Dataset.from_dict({"text": ["a", "b"]}),
                          "validation": datasets.Dataset.from_dict({"text": ["c"]})}
                         ).save_to_disk("sst2")
    rank, world_size, worker, num_workers = 1, 2, 0, 2
    # --- README snippet starts
    from feedline import Dataset, parquet, split

    # write Parquet from a pipeline: atomic (temp name + rename), row groups of 1,000 rows
    parquet.write_parquet(Dataset.range(10_000).map(lambda i: {"id": i, "x": i * 0.5}),
                          "train.parquet", row_group_size=1_000)

    # numpy batches sliced straight out of the row groups; exact resume
    ds = parquet.read_batches("train.parquet", batch_size=256, columns=["x"])
    it = ds.iterator()
    first = next(it)                      # {"x": array([0. , 0.5, ...])}
    state = it.get_state()                # JSON-able
    rest = list(ds.iterator(state))       # the other 39 batches

    # whole row groups per rank and worker, shuffled each epoch, re-cut into batches
    groups = parquet.read_fragments("train.parquet").global_shuffle(seed=0)
    mine = parquet.rebatch(split(groups, rank, world_size, worker=worker,
                                 num_workers=num_workers, policy="none"), 256)

    # a folder written by datasets' save_to_disk (Dataset or DatasetDict)
    sst2 = parquet.load_from_disk("sst2")   # {"train": ..., "validation": ...}
    # --- README snippet ends
    assert first["x"].tolist() == [i * 0.5 for i in range(256)]
    assert len(rest) == 39 and rest[-1]["x"][-1] == 9999 * 0.5
    assert sum(len(b["id"]) for b in mine) == 2_000  # 10 row groups / 4 parts: 3,3,2,2
    assert [r["text"] for r in sst2["train"]] == ["a", "b"] and len(sst2["validation"]) == 1


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=25, deadline=None)
@given(n=st.integers(0, 60), row_group=st.integers(1, 13), batch=st.integers(1, 17),
       parts=st.integers(1, 5), seed=st.integers(0, 3))
def test_batches_and_splits_cover_every_row_once(tmp_path_factory, n, row_group, batch, parts,
                                                 seed):
    path = tmp_path_factory.mktemp("h") / "t.parquet"
    pq.write_table(pa.table({"id": pa.array(np.arange(n, dtype=np.int64))}), path,
                   row_group_size=row_group)
    ds = read_batches(str(path), batch_size=batch)
    got = [b["id"].tolist() for b in ds]
    assert got == [list(range(i, min(i + batch, n))) for i in range(0, n, batch)]
    frags = read_fragments(str(path)).global_shuffle(seed=seed)
    pieces = [rebatch(split(frags, p, parts, policy="none"), batch).iterator(epoch=0)
              for p in range(parts)]
    ids = [i for it in pieces for b in it for i in b["id"].tolist()]
    assert sorted(ids) == list(range(n))
