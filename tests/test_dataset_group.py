"""RandomAccessDataset.group (random-access batching) and round_up (MXNet's round_batch),
and the indexed-files source they read in ImageRecordIter."""

from __future__ import annotations

import pickle

import pytest

from feedline import Dataset, recordio
from feedline.io.records import IndexedRecordFiles, indexed_records

from resume_helpers import assert_resumes_everywhere


def test_group_is_random_access_with_a_short_last_group():
    g = Dataset.range(7).group(3)
    assert len(g) == 3 and g[1] == [3, 4, 5] and g[-1] == [6]
    assert g.to_list() == [[0, 1, 2], [3, 4, 5], [6]]
    assert Dataset.range(6).group(3).to_list() == [[0, 1, 2], [3, 4, 5]]
    assert Dataset.range(0).group(3).to_list() == []
    with pytest.raises(ValueError, match=r"`size` must be a positive int, got 0"):
        Dataset.range(3).group(0)
    with pytest.raises(TypeError, match=r"group needs a random-access dataset"):
        from feedline.dataset.group import GroupDataset

        GroupDataset(Dataset.range(3).filter(bool), 2)


def test_round_up_repeats_the_first_items_of_each_epoch():
    r = Dataset.range(5).round_up(3)
    assert len(r) == 6 and r.pad_of_last == 1 and r.to_list() == [0, 1, 2, 3, 4, 0]
    exact = Dataset.range(6).round_up(3)
    assert exact.pad_of_last == 0 and exact.to_list() == list(range(6))
    assert Dataset.range(0).round_up(4).to_list() == []
    with pytest.raises(ValueError, match=r"`multiple` must be a positive int, got -1"):
        Dataset.range(3).round_up(-1)
    # over a global shuffle, epoch e repeats the first items of epoch e's own order
    shuffled = Dataset.range(10).global_shuffle(seed=3)
    rounded = shuffled.round_up(4)
    for epoch in range(3):
        order = [shuffled[epoch * 10 + k] for k in range(10)]
        got = [rounded._getitem(epoch * 12 + k) for k in range(12)]
        assert got == order + order[:2]
    groups = rounded.group(4)
    first, second = groups.to_list(), groups.to_list()  # two iterations = two epochs
    assert all(len(b) == 4 for b in first + second) and first != second
    assert sorted(sum(first, [])[:10]) == list(range(10))


def test_group_and_round_up_resume_everywhere_and_map_over_workers():
    ds = Dataset.range(11).global_shuffle(seed=1).round_up(4).group(4).map(sum)
    full = assert_resumes_everywhere(ds)
    assert len(full) == 3
    def build():
        return Dataset.range(11).global_shuffle(seed=1).round_up(4).group(4)

    threaded = build().map(sum, num_workers=2)
    assert threaded.to_list() == build().map(sum).to_list()
    threaded.close()


@pytest.fixture
def recs(tmp_path):
    paths = []
    for f in range(2):
        path = str(tmp_path / f"{f}.rec")
        with recordio.RecordIOWriter(path) as w:
            for i in range(3):
                w.write(b"%d-%d" % (f, i))
        paths.append(path)
    return paths


def test_indexed_files_with_explicit_index_or_a_scan(recs, tmp_path):
    with pytest.raises(FileNotFoundError, match=r"0\.rec has no index .*0\.idx; build it with"):
        indexed_records(recs)
    scanned = IndexedRecordFiles(recs, ["recordio"] * 2, scan=True)
    assert scanned.to_list() == [b"0-0", b"0-1", b"0-2", b"1-0", b"1-1", b"1-2"]
    assert scanned.starts == [0, 3] and scanned.locate(4) == (recs[1], 1)
    assert not (tmp_path / "0.idx").exists()  # a scan writes nothing beside the file
    clone = pickle.loads(pickle.dumps(scanned))  # scanned offsets travel to workers
    assert clone[5] == b"1-2"
    elsewhere = str(tmp_path / "elsewhere.idx")
    recordio.build_index(recs[1], elsewhere)
    mixed = IndexedRecordFiles(recs, ["recordio"] * 2, index_paths=[None, elsewhere], scan=True)
    assert mixed[3] == b"1-0"
    with pytest.raises(FileNotFoundError, match=r"index '.*nope\.idx' for '.*1\.rec' does not exist"):
        IndexedRecordFiles(recs, ["recordio"] * 2, index_paths=[None, str(tmp_path / "nope.idx")],
                           scan=True)
    with pytest.raises(ValueError, match=r"`index_paths` names 1 index\(es\) for 2 file\(s\)"):
        IndexedRecordFiles(recs, ["recordio"] * 2, index_paths=[None])
    scanned.close()
    assert scanned[0] == b"0-0"  # files reopen after close()
