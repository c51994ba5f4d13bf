"""Arrow IPC files (file and stream format) and folders saved by Hugging Face
``datasets`` read with the same rows, fields and values."""

from __future__ import annotations

import os

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")

from feedline import split  # noqa: E402
from feedline.exceptions import CorruptRecordError  # noqa: E402
from feedline.parquet import (  # noqa: E402
    load_from_disk,
    read_batches,
    read_fragments,
    read_rows,
    rebatch,
)

from resume_helpers import assert_resumes_everywhere  # noqa: E402


def as_lists(batch: dict) -> dict:
    """Object columns (str, arrays) compared by value in the resume checks."""
    return {k: [np.asarray(x).tolist() for x in v] if v.dtype == object else v
            for k, v in batch.items()}


def table(start: int, n: int) -> pa.Table:
    ids = np.arange(start, start + n)
    return pa.table({"id": ids, "text": [f"t{i}" for i in ids],
                     "vec": pa.array([[float(i), float(-i)] for i in ids], pa.list_(pa.float64(), 2))})


def write_ipc(path, batches, *, stream: bool) -> str:
    schema = batches[0].schema
    with pa.OSFile(str(path), "wb") as sink:
        opener = pa.ipc.new_stream if stream else pa.ipc.new_file
        with opener(sink, schema) as writer:
            for b in batches:
                writer.write_table(b)
    return str(path)


@pytest.mark.parametrize("stream", [False, True], ids=["file", "stream"])
def test_ipc_record_batches_are_fragments(tmp_path, stream):
    parts = [table(0, 4), table(4, 3), table(7, 5)]
    path = write_ipc(tmp_path / "t.arrow", parts, stream=stream)
    expected = pa.concat_tables(parts).to_pylist()
    ds = read_rows(path)
    assert ds.files.fragment_rows == [4, 3, 5]
    assert ds.to_list() == expected
    frags = read_fragments(path, columns=["vec", "id"])
    assert frags[1]["id"].tolist() == [4, 5, 6] and frags[1]["vec"].shape == (3, 2)
    batches = read_batches(path, batch_size=5).to_list()
    assert [b["id"].tolist() for b in batches] == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9], [10, 11]]
    assert batches[1]["text"].tolist() == ["t5", "t6", "t7", "t8", "t9"]
    assert_resumes_everywhere(read_batches(path, batch_size=5).global_shuffle(seed=1).map(as_lists))


@pytest.mark.parametrize("stream", [False, True], ids=["file", "stream"])
def test_min_fragment_rows_joins_record_batches(tmp_path, stream):
    parts = [table(0, 4), table(4, 3), table(7, 5), table(12, 2)]
    path = write_ipc(tmp_path / "t.arrow", parts, stream=stream)
    frags = read_fragments(path, min_fragment_rows=6)
    assert frags.files.fragment_rows == [7, 7]
    assert frags.files.fragment_span == [2, 2]
    assert frags[1]["id"].tolist() == list(range(7, 14)) and frags[1]["vec"].shape == (7, 2)
    assert read_fragments(path, min_fragment_rows=100).files.fragment_rows == [14]
    joined = read_batches(path, batch_size=4, min_fragment_rows=6)
    assert [b["text"].tolist() for b in joined] == \
        [[f"t{i}" for i in range(j, min(j + 4, 14))] for j in range(0, 14, 4)]
    assert_resumes_everywhere(joined.map(as_lists))
    with pytest.raises(ValueError, match="`min_fragment_rows` must be a positive int, got 0"):
        read_rows(path, min_fragment_rows=0)


def test_feather_v2_file(tmp_path):
    feather = pytest.importorskip("pyarrow.feather")
    path = str(tmp_path / "t.feather")
    feather.write_feather(table(0, 9), path, chunksize=4)  # lz4-compressed by default
    assert read_rows(path, format="arrow").to_list() == table(0, 9).to_pylist()
    assert read_rows(path).files.fragment_rows == [4, 4, 1]


def test_format_option_refuses_the_other_format(tmp_path):
    path = write_ipc(tmp_path / "t.arrow", [table(0, 2)], stream=False)
    with pytest.raises(CorruptRecordError, match=r"t\.arrow: not a parquet file"):
        read_rows(path, format="parquet")


def test_truncated_stream_is_a_named_error(tmp_path):
    path = write_ipc(tmp_path / "t.arrow", [table(0, 50), table(50, 50)], stream=True)
    data = open(path, "rb").read()
    open(path, "wb").write(data[: len(data) - 300])
    with pytest.raises(CorruptRecordError, match=r"t\.arrow: damaged or truncated Arrow IPC stream"):
        read_rows(path)


# ---------------------------------------------------------------------- Hugging Face
datasets = pytest.importorskip("datasets")


@pytest.fixture
def hf_dataset():
    data = {
        "idx": list(range(30)),
        "sentence": [f"sentence number {i}" for i in range(30)],
        "label": [i % 3 for i in range(30)],
        "scores": [[i * 0.5, i * 0.25] for i in range(30)],
    }
    features = datasets.Features({
        "idx": datasets.Value("int32"),
        "sentence": datasets.Value("string"),
        "label": datasets.ClassLabel(names=["a", "b", "c"]),
        "scores": datasets.Sequence(datasets.Value("float32")),
    })
    return datasets.Dataset.from_dict(data, features=features)


def test_save_to_disk_folder_reads_the_same_rows(tmp_path, hf_dataset):
    folder = tmp_path / "saved"
    hf_dataset.save_to_disk(str(folder), num_shards=3)
    ds = load_from_disk(folder)
    assert len(ds) == 30 and len(ds.files.paths) == 3
    assert ds.to_list() == datasets.load_from_disk(str(folder)).to_list()
    assert ds[4] == {"idx": 4, "sentence": "sentence number 4", "label": 1, "scores": [2.0, 1.0]}


def test_save_to_disk_batches_match_datasets_numpy_iteration(tmp_path, hf_dataset):
    folder = tmp_path / "saved"
    hf_dataset.save_to_disk(str(folder))
    ours = load_from_disk(folder, batch_size=8, columns=["idx", "label"]).to_list()
    joined = load_from_disk(folder, batch_size=8, columns=["idx", "label"], min_fragment_rows=64)
    assert len(joined.files.fragment_rows) == 1
    assert [b["idx"].tolist() for b in joined] == [b["idx"].tolist() for b in ours]
    theirs = list(datasets.load_from_disk(str(folder)).with_format("numpy")
                  .select_columns(["idx", "label"]).iter(batch_size=8))
    assert len(ours) == len(theirs) == 4
    for a, b in zip(ours, theirs):
        assert list(a) == ["idx", "label"]
        assert a["idx"].dtype == np.int32
        np.testing.assert_array_equal(a["idx"], b["idx"])
        np.testing.assert_array_equal(a["label"], b["label"])


def test_dataset_dict_folder_and_splits(tmp_path, hf_dataset):
    folder = tmp_path / "dd"
    datasets.DatasetDict({"train": hf_dataset.select(range(20)),
                          "test": hf_dataset.select(range(20, 30))}).save_to_disk(str(folder))
    both = load_from_disk(folder)
    assert list(both) == ["train", "test"]
    assert [r["idx"] for r in both["test"]] == list(range(20, 30))
    train = load_from_disk(folder, split="train", batch_size=20)
    assert train[0]["idx"].tolist() == list(range(20))
    with pytest.raises(KeyError, match=r"has no split 'valid'; its splits are \['train', 'test'\]"):
        load_from_disk(folder, split="valid")
    with pytest.raises(ValueError, match="`split` is for DatasetDict folders"):
        load_from_disk(folder / "train", split="train")


def test_saved_dataset_splits_exactly_once_and_resumes(tmp_path, hf_dataset):
    folder = tmp_path / "saved"
    hf_dataset.save_to_disk(str(folder), num_shards=2)
    ds = load_from_disk(folder, columns=["idx"])
    parts = [split(ds, r, 2, worker=w, num_workers=2, policy="none")
             for r in range(2) for w in range(2)]
    assert sorted(row["idx"] for p in parts for row in p) == list(range(30))
    assert_resumes_everywhere(parts[3])
    files = load_from_disk(folder).files
    assert_resumes_everywhere(rebatch(read_fragments(files), 7).map(as_lists))


def test_saved_folder_on_an_fsspec_url(tmp_path, hf_dataset):
    fsspec = pytest.importorskip("fsspec")
    folder = tmp_path / "saved"
    hf_dataset.save_to_disk(str(folder))
    mem = fsspec.filesystem("memory")
    try:
        for name in os.listdir(folder):
            mem.pipe(f"/feedline-hf-test/saved/{name}", (folder / name).read_bytes())
        ds = load_from_disk("memory://feedline-hf-test/saved", batch_size=16)
        assert [b["idx"].tolist() for b in ds] == [list(range(16)), list(range(16, 30))]
    finally:
        mem.rm("/feedline-hf-test", recursive=True)


def test_not_a_saved_dataset(tmp_path):
    with pytest.raises(FileNotFoundError, match="is not a saved Hugging Face dataset"):
        load_from_disk(tmp_path)
    os.makedirs(tmp_path / "x")
    with pytest.raises(ValueError, match="`batch_size` must be a positive int, got 0"):
        load_from_disk(tmp_path / "x", batch_size=0)
