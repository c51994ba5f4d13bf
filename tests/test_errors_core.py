"""Error messages of the engine's less travelled paths."""

from __future__ import annotations

import gzip

import pytest

from feedline import Dataset, tfrecord
from feedline.dataset.permutation import IndexPermutation
from feedline.exceptions import StateError
from feedline.io.records import indexed_records, record_reader


def test_iterator_takes_a_state_or_an_epoch_not_both():
    state = Dataset.range(3).iterator().get_state()
    with pytest.raises(ValueError, match="pass either `state` or `epoch`"):
        Dataset.range(3).iterator(state, epoch=1)
    with pytest.raises(ValueError, match="`epoch` must be a non-negative int, got -1"):
        Dataset.range(3).iterator(epoch=-1)


def test_random_access_indexing_errors():
    ds = Dataset.range(3)
    with pytest.raises(TypeError, match="dataset indices must be ints, got 'a'"):
        ds["a"]
    with pytest.raises(IndexError, match="index -4 out of range for a dataset of 3 items"):
        ds[-4]
    with pytest.raises(IndexError, match="index 5 out of range for a permutation of 5"):
        IndexPermutation(5, seed=1)[5]


def test_source_argument_errors():
    with pytest.raises(TypeError, match="from_arrays: argument 1 must have a length, got int"):
        Dataset.from_arrays([1, 2], 3)
    with pytest.raises(TypeError, match="a str/bytes is not a dataset of items"):
        Dataset.from_iterable("abc")
    with pytest.raises(TypeError, match="from_random_access needs __len__ and __getitem__, got int"):
        Dataset.from_random_access(5)
    with pytest.raises(TypeError, match="concat: argument 1 must be a Dataset, got list"):
        Dataset.range(2).concat([1])


def test_states_that_do_not_fit_the_pipeline():
    with pytest.raises(StateError, match="concat state index 7 out of range"):
        Dataset.range(2).concat(Dataset.range(2)).iterator(
            {"type": "pipeline", "version": 1, "epoch": 0,
             "stages": {"type": "concat", "index": 7, "child": None}})
    zipped = Dataset.range(2).zip(Dataset.range(2)).iterator().get_state()
    with pytest.raises(StateError, match="zip state has 2 children, this zip has 3"):
        Dataset.range(2).zip(Dataset.range(2), Dataset.range(2)).iterator(zipped)
    sharded = Dataset.range(10).shard(0, 2).iterator().get_state()
    with pytest.raises(StateError, match="shard state is for 10 items, this dataset has 12"):
        Dataset.range(12).shard(0, 2).iterator(sharded)
    with pytest.raises(StateError, match="state version 9 is not supported"):
        Dataset.range(2).iterator({"type": "pipeline", "version": 9, "epoch": 0, "stages": {}})


def test_record_file_errors_name_the_file(tmp_path):
    gz = tmp_path / "a.tfrecord.gz"
    tfrecord.write(str(gz), [b"x"], compression="GZIP")
    with pytest.raises(ValueError, match=r"a.tfrecord.gz: index mode needs uncompressed TFRecord "
                                         r"or RecordIO, got GZIP-compressed tfrecord"):
        indexed_records([str(gz)])
    text = tmp_path / "notes.txt"
    text.write_bytes(gzip.compress(b"not records"))
    with pytest.raises(ValueError, match="notes.txt: cannot read records of format 'idx'"):
        record_reader(str(text), format="idx")
    with pytest.raises(ValueError, match="`paths` must name at least one file, got none"):
        indexed_records([])
