"""interleave: cycle/block order, parallel reads, state; files(): globbing and epochs."""

from __future__ import annotations

import os

import pytest

from feedline import Dataset, files

from resume_helpers import assert_resumes_everywhere


def blocks(base):
    return Dataset.range(base, base + 3)


def uneven(base):
    return Dataset.range(base, base + base // 10)


def test_cycle_and_block_order():
    ds = Dataset.from_iterable([0, 10, 20]).interleave(blocks, cycle_length=2, block_length=2)
    assert ds.to_list() == [0, 1, 10, 11, 2, 12, 20, 21, 22]  # tf.data's order
    ds = Dataset.from_iterable([0, 10, 20]).interleave(blocks, cycle_length=3)
    assert ds.to_list() == [0, 10, 20, 1, 11, 21, 2, 12, 22]
    ds = Dataset.from_iterable([0, 10]).interleave(blocks, cycle_length=1)
    assert ds.to_list() == [0, 1, 2, 10, 11, 12]


def test_input_ending_mid_cycle_follows_tf_data():
    sizes = {0: 1, 10: 3, 20: 2}
    ds = Dataset.from_iterable([0, 10, 20]).interleave(
        lambda b: Dataset.range(b, b + sizes[b]), cycle_length=2)
    assert ds.to_list() == [0, 10, 11, 20, 12, 21]


def test_parallel_reads_keep_the_order(leak_check):
    src = Dataset.from_iterable([10, 20, 30, 40, 50])
    plain = src.interleave(uneven, cycle_length=3, block_length=2).to_list()
    par = src.interleave(uneven, cycle_length=3, block_length=2, num_parallel_reads=2).to_list()
    assert par == plain and sorted(plain) == sorted(
        x for b in (10, 20, 30, 40, 50) for x in range(b, b + b // 10))
    leak_check.assert_clean()


@pytest.mark.parametrize("parallel", [None, 2])
def test_interleave_resumes_everywhere(parallel):
    ds = Dataset.from_iterable([10, 20, 0, 30, 40]).interleave(
        uneven, cycle_length=2, block_length=3, num_parallel_reads=parallel)
    assert_resumes_everywhere(ds)


def test_full_pipeline_resumes_everywhere():
    ds = (Dataset.range(6).global_shuffle(seed=4).map(lambda i: 10 * (i + 1))
          .interleave(uneven, cycle_length=3, block_length=2)
          .shuffle(5, seed=2).map(lambda x: x * 2).batch(4))
    assert_resumes_everywhere(ds)


def test_fn_must_return_a_dataset():
    with pytest.raises(TypeError, match="fn must return a Dataset, got list"):
        Dataset.range(2).interleave(lambda x: [x], cycle_length=2).to_list()
    with pytest.raises(ValueError, match="`cycle_length` must be a positive int, got 0"):
        Dataset.range(2).interleave(blocks, cycle_length=0)


def make_tree(tmp_path):
    for name in ("b.rec", "a.rec", "c.txt"):
        (tmp_path / name).write_bytes(b"x")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "d.rec").write_bytes(b"x")
    return tmp_path


def test_files_globs_sorted_and_directories(tmp_path):
    make_tree(tmp_path)
    names = [os.path.relpath(p, tmp_path) for p in files(str(tmp_path / "*.rec"))]
    assert names == ["a.rec", "b.rec"]
    names = [os.path.relpath(p, tmp_path) for p in files(str(tmp_path))]
    assert names == ["a.rec", "b.rec", "c.txt", os.path.join("sub", "d.rec")]
    assert len(files([str(tmp_path / "a.rec"), "file://" + str(tmp_path / "b.rec")]).to_list()) == 2


def test_files_shuffle_each_epoch_and_num_epochs(tmp_path):
    for i in range(12):
        (tmp_path / f"f{i:02d}").write_bytes(b"")
    ds = files(str(tmp_path / "f*"), shuffle=True, seed=1, num_epochs=3)
    out = ds.to_list()
    assert len(out) == 36
    epochs = [out[i * 12:(i + 1) * 12] for i in range(3)]
    assert all(sorted(e) == sorted(epochs[0]) for e in epochs)
    assert epochs[0] != epochs[1]
    assert files(str(tmp_path / "f*"), shuffle=True, seed=1, num_epochs=3).to_list() == out


def test_files_missing_pattern_names_it(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"no file matches '.*nothing-\*\.rec'"):
        files(str(tmp_path / "nothing-*.rec"))
    with pytest.raises(FileNotFoundError, match="no file matches"):
        files([str(tmp_path / "missing.rec")])


def test_files_memory_filesystem():
    import fsspec

    fs = fsspec.filesystem("memory")
    for name in ("x/2.rec", "x/1.rec"):
        with fs.open(name, "wb") as f:
            f.write(b"abc")
    assert files("memory://x/*.rec").to_list() == ["memory://x/1.rec", "memory://x/2.rec"]
