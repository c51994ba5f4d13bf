"""The whole-chunk CSV path gives exactly the per-record reference path's output:
values, dtypes, errors (class, message, line, offset), skipped counts, keys and resume
states, on generated files with quoting, damage and every ``on_error``."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from csv_engines import outcome, use_engine
from feedline.csv import read_csv
from feedline.formats.csv import CSVReader

DEFAULTS = [[0], [0.0], [np.int64(0)], [""], [np.float64(1.5)]]
REQUIRED = [int, float, np.int64, str, np.float64]

ODD = st.sampled_from(["", "NA", "1_0", " 7", "+3", "1e3", "x", "\x00", "nan", "-0", "0x10",
                      '"q"', '"a,b"', 'a"b', '"open', "é", "inf"])
COLUMN = [  # values each column holds, near the edges of its type
    st.one_of(st.integers(-2**31 - 2, -2**31 + 2), st.integers(-50, 50),
              st.integers(2**31 - 2, 2**31 + 2)).map(str),
    st.floats(allow_nan=True, allow_infinity=True, width=32).map(repr),
    st.one_of(st.integers(-2**63 - 2, -2**63 + 2), st.integers(-50, 50),
              st.integers(2**63 - 2, 2**63 + 2)).map(str),
    st.text(st.characters(blacklist_characters=',"\n\r', blacklist_categories=("Cs",)),
            max_size=4),
    st.floats(allow_nan=False, allow_infinity=True).map(repr),
]
CLEAN = st.tuples(*COLUMN).map(",".join)
DAMAGED = st.lists(st.one_of(ODD, *COLUMN), min_size=3, max_size=7).map(",".join)
LINES = st.lists(st.one_of(CLEAN, CLEAN, CLEAN, DAMAGED), min_size=0, max_size=40)


def _outcome(path, defaults, *, fast, on_error, batch_size, select=None, na=""):
    return outcome(path, defaults, engine="numpy" if fast else "reference", on_error=on_error,
                   batch_size=batch_size, select_cols=select, na_value=na)


@pytest.fixture(autouse=True)
def _restore_engine():
    yield
    use_engine("arrow")


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(lines=LINES, on_error=st.sampled_from(["raise", "skip", "warn"]),
       batch_size=st.sampled_from([None, 1, 3, 64]), required=st.booleans(),
       select=st.sampled_from([None, [0, 1, 2, 3, 4]]), na=st.sampled_from(["", "NA"]))
def test_fast_path_equals_the_reference(tmp_path_factory, lines, on_error, batch_size,
                                        required, select, na):
    path = os.path.join(tmp_path_factory.mktemp("csv"), "t.csv")
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write("".join(line + "\n" for line in lines))
    defaults = REQUIRED if required else DEFAULTS
    args = {"on_error": on_error, "batch_size": batch_size, "select": select, "na": na}
    assert _outcome(path, defaults, fast=True, **args) == \
        _outcome(path, defaults, fast=False, **args)


def test_the_fast_path_is_taken_and_resumes_exactly(tmp_path):
    path = tmp_path / "big.csv"
    rows = [f"{i},{i / 4},{-i},s{i % 7},{i * 0.5}" for i in range(3000)]
    path.write_text("\n".join(rows) + "\n")
    calls = []
    real = CSVReader._decode_records

    def spy(self, recs, where):
        calls.append(len(recs))
        return real(self, recs, where)

    CSVReader._decode_records = spy
    use_engine("numpy")
    try:
        batches = list(read_csv(path, DEFAULTS, batch_size=500))
    finally:
        CSVReader._decode_records = real
    assert calls == []                              # no record went the per-record way
    assert sum(len(b[0]) for b in batches) == 3000
    assert batches[0][0].dtype == np.int32 and batches[0][4].dtype == np.float64
    assert batches[-1][3][-1] == b"s" + str(2999 % 7).encode()
    r = read_csv(path, DEFAULTS)
    for _ in range(1234):
        next(r)
    state = r.get_state()
    rest = list(r)
    again = read_csv(path, DEFAULTS)
    again.set_state(state)
    assert list(again) == rest and rest[0][0] == 1234


def test_peek_lines_and_skip_lines_bounds(tmp_path):
    from feedline.text import TextLineReader

    path = tmp_path / "p.txt"
    path.write_bytes(b"a\nb\nc\n")
    r = TextLineReader(path)
    lines, starts, first = r.peek_lines(2)
    assert (lines, starts.tolist(), first) == ([b"a", b"b"], [0, 2, 4], 1)
    with pytest.raises(ValueError, match=r"skip_lines\(4\): only 3 lines are in the block"):
        r.skip_lines(4)
    r.skip_lines(2)
    assert next(r) == b"c" and r.peek_lines(5)[0] == []

