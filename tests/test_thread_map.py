"""map(..., backend="thread"): results, order, resume, errors, cleanup, parallelism."""

from __future__ import annotations

import gc
import threading
import time
import zlib

import pytest

from feedline import Dataset
from feedline.dataset.options import ExecutionOptions
from feedline.exceptions import StateNotSupportedError

from resume_helpers import assert_resumes_as_multiset, assert_resumes_everywhere


def crc(i: int) -> int:
    return zlib.crc32(bytes(i % 50))


def stream(n: int) -> Dataset:
    return Dataset.from_reader(lambda: iter(range(n)), deterministic=True)


@pytest.mark.parametrize("source", ["random-access", "stream"])
def test_ordered_results_equal_the_in_thread_map(source):
    src = Dataset.range(40) if source == "random-access" else stream(40)
    assert src.map(crc, num_workers=3, backend="thread").to_list() == [crc(i) for i in range(40)]


def test_unordered_yields_everything_once():
    def slow_evens(i):
        if i % 2 == 0:
            time.sleep(0.002)
        return i

    out = Dataset.range(60).map(slow_evens, num_workers=3, backend="thread", ordered=False).to_list()
    assert sorted(out) == list(range(60))


@pytest.mark.parametrize("source", ["random-access", "stream"])
def test_ordered_resumes_at_every_step(source):
    src = Dataset.range(23) if source == "random-access" else stream(23)
    assert_resumes_everywhere(src.map(crc, num_workers=2, backend="thread", execution=ExecutionOptions(buffer_size=5)).batch(3))


@pytest.mark.parametrize("source", ["random-access", "stream"])
def test_unordered_resumes_without_losing_or_repeating(source):
    def jitter(i):
        time.sleep(0.0005 * (i % 3))
        return i

    src = Dataset.range(25) if source == "random-access" else stream(25)
    assert_resumes_as_multiset(src.map(jitter, num_workers=3, backend="thread", ordered=False))


def test_stream_input_without_state_says_so():
    it = Dataset.from_reader(lambda: iter(range(5))).map(crc, num_workers=2, backend="thread").iterator()
    next(it)
    with pytest.raises(StateNotSupportedError, match="cannot report its position"):
        it.get_state()
    it.close()


def test_an_error_in_a_thread_reaches_the_consumer_with_traceback(leak_check):
    def bad(i):
        if i == 4:
            raise ArithmeticError("item 4 broke")
        return i

    it = Dataset.range(10).map(bad, num_workers=2, backend="thread").iterator()
    got = []
    with pytest.raises(ArithmeticError, match="item 4 broke") as info:
        for x in it:
            got.append(x)
    assert got == [0, 1, 2, 3]
    assert any("thread of stage 'map(bad)" in n for n in info.value.__notes__)
    assert "bad" in "".join(__import__("traceback").format_tb(info.value.__traceback__))
    it.close()
    leak_check.assert_clean()


def test_threads_stop_on_close_break_and_garbage_collection(leak_check):
    ds = Dataset.range(10_000).map(crc, num_workers=2, backend="thread")
    it = ds.iterator()
    next(it)
    it.close()
    leak_check.assert_clean()
    for _ in ds:
        break
    gc.collect()
    leak_check.assert_clean()
    assert len(ds.to_list()) == 10_000
    leak_check.assert_clean()


def test_calls_overlap_in_threads():
    """Two calls that each wait for the other can only finish if they run at once."""
    barrier = threading.Barrier(2, timeout=10)

    def meet(i):
        barrier.wait()
        return i

    assert Dataset.range(4).map(meet, num_workers=2, backend="thread").to_list() == [0, 1, 2, 3]


def test_bad_backend_is_rejected():
    with pytest.raises(ValueError, match="`backend` must be one of 'process', 'thread', 'ray', got 'gpu'"):
        Dataset.range(3).map(crc, num_workers=2, backend="gpu")
