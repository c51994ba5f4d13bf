"""Length bucketing: batching rules, determinism, exact resume."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from feedline.dataset import Dataset, DatasetIterator
from feedline.dataset.bucket import (
    SNAPSHOT_EVERY,
    BucketConfig,
    BucketIterator,
    bucket_by_length,
)
from feedline.dataset.iterator import check_state
from feedline.exceptions import StateError, StateNotSupportedError

from resume_helpers import assert_resumes_everywhere


class ListIterator(DatasetIterator):
    """A resumable source over a list; counts get_state calls."""

    def __init__(self, items):
        self.items = list(items)
        self.i = 0
        self.states_taken = 0

    def __next__(self):
        if self.i >= len(self.items):
            raise StopIteration
        self.i += 1
        return self.items[self.i - 1]

    def get_state(self):
        self.states_taken += 1
        return {"type": "list", "i": self.i}

    def set_state(self, state):
        self.i = check_state(state, "list", ("i",))["i"]


class OneShot(ListIterator):
    def get_state(self):
        raise StateNotSupportedError("a one-shot iterator cannot report its position")


def words(*lengths):
    """Items that are strings of the given lengths, tagged with their index."""
    return [f"{i}:" + "x" * n for i, n in enumerate(lengths)]


def length(item):
    return len(item.split(":")[1])


def run(items, **options):
    cfg = BucketConfig(length_fn=length, **options)
    return list(BucketIterator(ListIterator(items), cfg))


# ---------------------------------------------------------------- batching rules
def test_boundaries_split_lengths_like_tf():
    # buckets: [0, 3), [3, 5), [5, inf)
    items = words(1, 3, 5, 2, 4, 9, 0, 3)
    out = run(items, bucket_boundaries=[3, 5], bucket_batch_sizes=2)
    assert out == [
        ["0:x", "3:xx"],             # bucket 0 fills first
        ["1:xxx", "4:xxxx"],         # bucket 1
        ["2:xxxxx", "5:xxxxxxxxx"],  # bucket 2
        ["6:"],                      # the end of input flushes the partial batches
        ["7:xxx"],                   # in bucket order
    ]


def test_per_bucket_batch_sizes():
    items = words(1, 1, 1, 6, 6, 1)
    out = run(items, bucket_boundaries=[5], bucket_batch_sizes=[3, 2])
    assert out == [["0:x", "1:x", "2:x"], ["3:xxxxxx", "4:xxxxxx"], ["5:x"]]


def test_drop_remainder_drops_the_partial_batches():
    items = words(1, 1, 1, 6, 6, 1)
    out = run(items, bucket_boundaries=[5], bucket_batch_sizes=[3, 2], drop_remainder=True)
    assert out == [["0:x", "1:x", "2:x"], ["3:xxxxxx", "4:xxxxxx"]]


def test_max_tokens_counts_padding():
    # one bucket, budget 8 tokens: [2,2,2] costs 6, adding a 3 would cost 12
    items = words(2, 2, 2, 3, 1, 4, 8, 9, 2)
    out = run(items, bucket_boundaries=[], max_tokens=8)
    assert out == [
        ["0:xx", "1:xx", "2:xx"],
        ["3:xxx", "4:x"],        # + a 4 would cost 12 > 8
        ["5:xxxx"],              # + an 8 would cost 16
        ["6:xxxxxxxx"],          # exactly the budget: out at once
        ["7:xxxxxxxxx"],         # longer than the budget: alone
        ["8:xx"],
    ]


def test_max_tokens_and_sizes_together_and_zero_lengths():
    out = run(words(0, 0, 0, 0, 0), bucket_boundaries=[], max_tokens=3, bucket_batch_sizes=10)
    assert out == [["0:", "1:", "2:"], ["3:", "4:"]]  # length 0 counts as 1 token
    out = run(words(1, 1, 1, 1, 1), bucket_boundaries=[], max_tokens=100, bucket_batch_sizes=2)
    assert [len(b) for b in out] == [2, 2, 1]


items_st = st.lists(st.integers(0, 30), max_size=120)
config_st = st.fixed_dictionaries(
    {
        "bucket_boundaries": st.lists(st.integers(1, 30), max_size=4, unique=True).map(sorted),
        "sizes": st.one_of(st.none(), st.integers(1, 6)),
        "max_tokens": st.one_of(st.none(), st.integers(1, 40)),
        "drop_remainder": st.booleans(),
    }
).filter(lambda c: c["sizes"] is not None or c["max_tokens"] is not None)


@settings(max_examples=60, deadline=None)
@given(items_st, config_st)
def test_invariants(lengths, conf):
    items = words(*lengths)
    cfg = BucketConfig(length_fn=length, bucket_boundaries=conf["bucket_boundaries"],
                       bucket_batch_sizes=conf["sizes"], max_tokens=conf["max_tokens"],
                       drop_remainder=conf["drop_remainder"])
    out = list(BucketIterator(ListIterator(items), cfg))
    flat = [x for b in out for x in b]
    assert len(flat) == len(set(flat))
    if not conf["drop_remainder"]:
        assert sorted(flat) == sorted(items)  # every item exactly once
    for batch in out:
        assert batch
        assert len({cfg.bucket_of(length(x)) for x in batch}) == 1  # one bucket per batch
        idx = [int(x.split(":")[0]) for x in batch]
        assert idx == sorted(idx)  # arrival order inside a batch
        if conf["sizes"] is not None:
            assert len(batch) <= conf["sizes"]
        if conf["max_tokens"] is not None and len(batch) > 1:
            assert len(batch) * max(max(length(x) for x in batch), 1) <= conf["max_tokens"]
    # no randomness: a second run gives the same batches
    assert list(BucketIterator(ListIterator(items), cfg)) == out


# ---------------------------------------------------------------- resume
def resume_everywhere(items, cfg):
    full = list(BucketIterator(ListIterator(items), cfg))
    probe = BucketIterator(ListIterator(items), cfg)
    for k in range(len(full) + 1):
        state = json.loads(json.dumps(probe.get_state()))
        fresh = BucketIterator(ListIterator(items), cfg)
        fresh.set_state(state)
        assert list(fresh) == full[k:], f"resume after {k} batches differs"
        if k < len(full):
            assert next(probe) == full[k]
    return full


@settings(max_examples=25, deadline=None)
@given(items_st, config_st)
def test_restore_at_every_step_gives_the_same_remaining_batches(lengths, conf):
    cfg = BucketConfig(length_fn=length, bucket_boundaries=conf["bucket_boundaries"],
                       bucket_batch_sizes=conf["sizes"], max_tokens=conf["max_tokens"],
                       drop_remainder=conf["drop_remainder"])
    resume_everywhere(words(*lengths), cfg)


def test_resume_with_a_rare_bucket_waiting_across_many_snapshots():
    # item 0 (long) waits in its bucket while 300 short items pass: the state must go
    # back to the snapshot before item 0 and keep the state small
    lengths = [50] + [1] * 300 + [50]
    cfg = BucketConfig(length_fn=length, bucket_boundaries=[10], bucket_batch_sizes=[4, 2])
    items = words(*lengths)
    full = resume_everywhere(items, cfg)
    assert full[-1] == [items[0], items[-1]]
    it = BucketIterator(ListIterator(items), cfg)
    for _ in range(40):
        next(it)
    state = it.get_state()
    assert state["start"] == 0 and state["read"] == 161
    assert len(json.dumps(state)) < 300
    # the parent's state is taken once per SNAPSHOT_EVERY items, not per item
    assert it._parent.states_taken <= 161 // SNAPSHOT_EVERY + 2


def test_resume_through_the_dataset_engine():
    ds = Dataset.range(200).map(lambda i: "x" * (i * 7 % 23))
    bucketed = bucket_by_length(ds, length_fn=len, bucket_boundaries=[5, 10, 15],
                                bucket_batch_sizes=[8, 6, 4, 3])
    full = assert_resumes_everywhere(bucketed)
    assert sorted(x for b in full for x in b) == sorted(ds.to_list())


def test_deterministic_for_a_seed_after_shuffle():
    def pipeline(seed):
        ds = Dataset.range(300).shuffle(50, seed=seed).map(lambda i: [i] * (i % 17))
        return bucket_by_length(ds, length_fn=len, bucket_boundaries=[4, 9],
                                max_tokens=40, drop_remainder=True)

    assert pipeline(7).to_list() == pipeline(7).to_list()
    assert pipeline(7).to_list() != pipeline(8).to_list()
    assert_resumes_everywhere(pipeline(7), max_steps=25)


def test_dataset_name_and_type_check():
    ds = bucket_by_length(Dataset.range(3), length_fn=lambda x: x, bucket_boundaries=[2],
                          bucket_batch_sizes=2, max_tokens=9)
    assert ds.name == "bucket_by_length([2], sizes=[2, 2], max_tokens=9)"
    assert ds.to_list() == [[0, 1], [2]]
    with pytest.raises(TypeError, match="`dataset` must be a feedline Dataset, got list"):
        bucket_by_length([1, 2], length_fn=len, bucket_boundaries=[], bucket_batch_sizes=1)


# ---------------------------------------------------------------- errors
def test_parent_that_cannot_resume_says_so():
    it = BucketIterator(OneShot(words(1, 2, 3)),
                        BucketConfig(length_fn=length, bucket_boundaries=[], bucket_batch_sizes=2))
    assert next(it) == ["0:x", "1:xx"]
    with pytest.raises(StateNotSupportedError, match="bucket_by_length cannot report its position"):
        it.get_state()


def test_bad_states_are_rejected():
    cfg = BucketConfig(length_fn=length, bucket_boundaries=[3], bucket_batch_sizes=2)
    it = BucketIterator(ListIterator(words(1, 5, 1)), cfg)
    next(it)
    state = it.get_state()
    other = BucketIterator(ListIterator(words(1, 5, 1)),
                           BucketConfig(length_fn=length, bucket_boundaries=[3, 4],
                                        bucket_batch_sizes=2))
    with pytest.raises(StateError, match="bucket state has 2 buckets, this stage has 3"):
        other.set_state(state)
    with pytest.raises(StateError, match="state was made by stage 'list', not by 'bucket'"):
        other.set_state({"type": "list", "i": 0})
    short = BucketIterator(ListIterator(words(1)), cfg)
    with pytest.raises(StateError, match="its input ended at item 1, expected 3"):
        short.set_state(state)


def test_length_fn_must_return_a_non_negative_int():
    for bad in (-1, 2.5, "3", None):
        cfg = BucketConfig(length_fn=lambda _x, b=bad: b, bucket_boundaries=[],
                           bucket_batch_sizes=1)
        with pytest.raises(ValueError, match=rf"`length_fn` must return a non-negative int, got "
                                             rf"{bad!r} for item 0".replace("(", r"\(")):
            next(BucketIterator(ListIterator([1]), cfg))


@pytest.mark.parametrize(
    ("options", "exc", "match"),
    [
        ({"bucket_boundaries": [3, 2], "bucket_batch_sizes": 2}, ValueError,
         r"`bucket_boundaries` must be strictly increasing positive ints, got \[3, 2\]"),
        ({"bucket_boundaries": [0], "bucket_batch_sizes": 2}, ValueError,
         r"`bucket_boundaries` must be strictly increasing positive ints, got \[0\]"),
        ({"bucket_boundaries": 5, "bucket_batch_sizes": 2}, TypeError,
         r"`bucket_boundaries` must be a list of ints, got 5"),
        ({"bucket_boundaries": [3], "bucket_batch_sizes": [2]}, ValueError,
         r"`bucket_batch_sizes` must have len\(bucket_boundaries\) \+ 1 = 2 entries, got 1"),
        ({"bucket_boundaries": [3], "bucket_batch_sizes": [2, 0]}, ValueError,
         r"`bucket_batch_sizes` must be a positive int, got 0"),
        ({"bucket_boundaries": [3], "bucket_batch_sizes": 0}, ValueError,
         r"`bucket_batch_sizes` must be a positive int, got 0"),
        ({"bucket_boundaries": [3], "max_tokens": 0}, ValueError,
         r"`max_tokens` must be a positive int, got 0"),
        ({"bucket_boundaries": [3]}, ValueError, r"give `bucket_batch_sizes`, `max_tokens` or both"),
    ],
)
def test_bad_options(options, exc, match):
    with pytest.raises(exc, match=match):
        bucket_by_length(Dataset.range(3), length_fn=len, **options)
    with pytest.raises(TypeError, match="`length_fn` must be callable"):
        BucketConfig(length_fn=3, bucket_boundaries=[], bucket_batch_sizes=1)
