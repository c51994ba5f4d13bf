"""The pyarrow CSV engine (feedline.formats.csv_arrow) gives exactly the per-record
reference path's output, bit for bit: values and dtypes, keys, errors (class, message
with path, line and byte offset), skipped counts, states after every item and the
outcome of resuming from one of them, on generated files with every column type,
quoting, ``na_value``, defaults, ``select_cols``, headers, skipped header lines, ``\\r\\n``, a last line
without newline, gzip, small and large blocks, and damage under each ``on_error``."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from csv_engines import outcome, use_engine
from feedline.csv import read_csv
from feedline.formats import csv_arrow
from feedline.formats.csv import CSVReader

pytest.importorskip("pyarrow", reason="the pyarrow engine needs `pip install pyarrow` "
                                      "(it is in feedline's [test] extra)")

DEFAULTS = [[0], [0.0], [np.int64(-1)], ["?"], [np.float64(1.5)]]
REQUIRED = [int, float, np.int64, str, np.float64]

ODD = st.sampled_from([
    "", "NA", "nan", "1_0", " 7", "7 ", "\t7", "+3", "-0", "007", "1e3", ".5", "5.", "x",
    "\x00", "0x10", "0X1f", "nan(1)", "NaN()", "inf", "-Infinity", "2147483648",
    "-2147483649", "9223372036854775808", '"q"', '"a,b"', '""', 'a"b', '"open', "é", "\xff",
    "1\r2", "\r", " ", "1e400", "1.00000005960464477539062500001", "3.4028236e38", "1,2",
])
COLUMN = [  # values each column holds, near the edges of its type
    st.one_of(st.integers(-2**31 - 1, -2**31 + 1), st.integers(-50, 50),
              st.integers(2**31 - 1, 2**31)).map(str),
    st.floats(allow_nan=True, allow_infinity=True, width=32).map(repr),
    st.one_of(st.integers(-2**63 - 1, -2**63 + 1), st.integers(-50, 50),
              st.integers(2**63 - 1, 2**63)).map(str),
    st.text(st.characters(blacklist_characters=',;|\t"\n\r', blacklist_categories=("Cs",)),
            max_size=4),
    st.floats().map(repr),
]
ROW = st.tuples(*COLUMN).map(list)
GOOD = st.tuples(st.integers(-2**31, 2**31 - 1).map(str), COLUMN[1],
                 st.integers(-2**63, 2**63 - 1).map(str),
                 st.text(st.characters(blacklist_characters=',;|\t"\n\r',
                                       blacklist_categories=("Cs",)), min_size=1, max_size=4),
                 COLUMN[4]).map(list)
DAMAGED = st.lists(st.one_of(ODD, *COLUMN), min_size=0, max_size=7)


LINE = st.one_of(
    GOOD, GOOD, GOOD, GOOD, GOOD, ROW,
    st.tuples(ROW, ODD, st.integers(0, 4)).map(lambda t: t[0][:t[2]] + [t[1]] + t[0][t[2] + 1:]),
    st.tuples(ROW, st.just("extra")).map(lambda t: t[0] + [t[1]]),  # 6 fields
    DAMAGED,
)

MOSTLY_GOOD = st.one_of(*[GOOD] * 15, LINE)  # long runs of clean lines, then damage


def _write(path, lines, delim, crlf, last_newline, header, compress):
    end = "\r\n" if crlf else "\n"
    text = ["a,b,c,d,e".replace(",", delim)] if header else []
    text += [delim.join(fields) for fields in lines]
    data = end.join(text) + (end if last_newline and text else "")
    raw = data.encode("utf-8", "surrogateescape").replace("\xff".encode(), b"\xff")
    if compress:
        raw = gzip.compress(raw)
    with open(path, "wb") as f:
        f.write(raw)


@pytest.fixture(autouse=True)
def _restore():
    block, least = CSVReader._arrow_block, CSVReader._arrow_min_block
    yield
    CSVReader._arrow_block, CSVReader._arrow_min_block = block, least
    use_engine("arrow")


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(lines=st.one_of(st.lists(LINE, max_size=40), st.lists(MOSTLY_GOOD, min_size=20, max_size=120)), on_error=st.sampled_from(["raise", "skip", "warn"]),
       batch_size=st.sampled_from([None, 1, 7, 64, 1000]), required=st.booleans(),
       select=st.sampled_from([None, None, [0, 1, 2, 3, 4], [1, 3], [0, 4]]),
       na=st.sampled_from(["", "NA", "nan"]), delim=st.sampled_from([",", ";", "\t"]),
       quote=st.booleans(), crlf=st.booleans(), last_newline=st.booleans(),
       header=st.booleans(), skip=st.sampled_from([0, 0, 2]), compress=st.sampled_from([False, False, False, True]),
       block=st.sampled_from([1, 40, 300, 1 << 22]), least=st.sampled_from([1, 64, 1 << 16]),
       resume_at=st.integers(0, 40))
def test_arrow_engine_equals_the_reference(tmp_path_factory, lines, on_error, batch_size,
                                           required, select, na, delim, quote, crlf,
                                           last_newline, header, skip, compress, block, least,
                                           resume_at):
    path = os.path.join(tmp_path_factory.mktemp("csv"), "t.csv" + (".gz" if compress else ""))
    _write(path, lines, delim, crlf, last_newline, header, compress)
    defaults = REQUIRED if required else DEFAULTS
    if select is not None:
        defaults = [defaults[i] for i in select]
    CSVReader._arrow_block, CSVReader._arrow_min_block = block, least
    options = {"on_error": on_error, "batch_size": batch_size, "select_cols": select,
               "na_value": na, "field_delim": delim, "use_quote_delim": quote,
               "header": header, "skip_header_lines": skip, "resume_at": resume_at}
    assert outcome(path, defaults, engine="arrow", **options) == \
        outcome(path, defaults, engine="reference", **options)


def _spy_decode(monkeypatch):
    """Record what each ArrowDecoder.decode call answered (True: decoded)."""
    answers: list[bool] = []
    real = csv_arrow.ArrowDecoder.decode

    def spy(self, raw, lines):
        got = real(self, raw, lines)
        answers.append(got is not None)
        return got

    monkeypatch.setattr(csv_arrow.ArrowDecoder, "decode", spy)
    return answers


def test_a_clean_file_is_decoded_by_pyarrow_alone_and_resumes_mid_block(tmp_path, monkeypatch):
    path = tmp_path / "big.csv"
    rows = [f"{i},{i / 4},{-i},s{i % 7},{i * 0.5}" for i in range(5000)]
    path.write_text("\n".join(rows) + "\n")
    answers = _spy_decode(monkeypatch)
    monkeypatch.setattr(CSVReader, "_decode_records", None)  # the reference must not run
    batches = list(read_csv(path, DEFAULTS, batch_size=512))
    assert answers == [True]
    assert [len(b[0]) for b in batches] == [512] * 9 + [392]
    assert [b.dtype for b in batches[0]] == [np.int32, np.float32, np.int64, object, np.float64]
    assert batches[-1][0][-1] == 4999 and batches[-1][3][-1] == b"s" + str(4999 % 7).encode()
    assert all(b[0].flags.writeable for b in batches)
    r = read_csv(path, DEFAULTS)
    for _ in range(1234):
        next(r)
    state = r.get_state()
    assert state["offset"] == sum(len(row) + 1 for row in rows[:1234])
    again = read_csv(path, DEFAULTS)
    again.set_state(state)
    assert next(again) == (1234, 308.5, -1234, b"s2", 617.0)


@pytest.mark.parametrize("token, column, decoded", [
    ("7", 0, True),
    ("0x10", 0, False),        # pyarrow reads hexadecimal ints, the reference does not
    ("0x10", 3, False),        # the check looks at the bytes, whatever the column
    ("+3", 0, False),          # pyarrow refuses a leading +, the reference reads it
    (" 7", 0, True),           # both read blanks around a number
    ("nan(1)", 4, False),      # pyarrow reads C's nan(chars)
    ("nAn", 4, True),
    ("1e400", 4, True),
    ("1\r2", 3, False),        # pyarrow ends a line at a lone \r
    ('"q"', 3, False),         # quoted fields go the reference way
    ("", 0, True),             # missing: the default
    ("2147483648", 0, False),  # out of int32: the reference says so
    ("1_0", 0, False),
])
def test_each_rule_decodes_or_declines_and_equals_the_reference(tmp_path, monkeypatch, token,
                                                                column, decoded):
    row = ["1", "2.5", "3", "s", "4.5"]
    row[column] = token
    path = tmp_path / "t.csv"
    path.write_bytes(("1,0.5,2,a,0.25\n" + ",".join(row) + "\n").encode())
    answers = _spy_decode(monkeypatch)
    options = {"batch_size": 4, "on_error": "skip"}
    got = outcome(path, DEFAULTS, engine="arrow", **options)
    assert answers == [decoded]
    assert got == outcome(path, DEFAULTS, engine="reference", **options)


def test_an_empty_line_is_a_missing_field_in_one_column_and_an_error_in_more(tmp_path):
    path = tmp_path / "t.csv"
    path.write_bytes(b"1\n\n3\n")
    for defaults in ([[9]], [[9], [0]]):
        for engine in ("arrow", "reference"):
            use_engine(engine)
            r = read_csv(path, defaults, batch_size=8, on_error="skip")
            got = [[c.tolist() for c in b] for b in r]
            if len(defaults) == 1:
                assert got == [[[1, 9, 3]]]
            else:
                assert got == [] and r.skipped == 3


def test_float32_is_rounded_once_from_the_decimal_as_tensorflow_does(tmp_path):
    # a decimal just above the midpoint of two float32s: float64 rounds it onto the
    # midpoint, where a cast would round to even (1.0); tf.io.decode_csv's direct
    # float32 parse gives the float32 above it, and so does every engine (the pyarrow
    # one declines the block; tests/test_csv_float32.py has the rest)
    path = tmp_path / "t.csv"
    path.write_text("1.00000005960464477539062500001\n")
    for engine in ("arrow", "reference"):
        use_engine(engine)
        (col,) = next(iter(read_csv(path, [float], batch_size=2)))
        assert col.dtype == np.float32
        assert col[0] == np.nextafter(np.float32(1), np.float32(2))


def test_without_pyarrow_the_numpy_path_runs(tmp_path, monkeypatch):
    monkeypatch.setitem(csv_arrow._ARROW, "pa", None)
    path = tmp_path / "t.csv"
    path.write_text("1,a\n2,b\n")
    r = read_csv(path, [[0], [""]], batch_size=8)
    assert [c.tolist() for c in next(r)] == [[1, 2], [b"a", b"b"]]
    assert r._engine is False


def test_import_feedline_does_not_import_pyarrow():
    code = "import sys, feedline, feedline.csv; print('pyarrow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


def test_damage_costs_only_its_part_of_a_block(tmp_path, monkeypatch):
    path = tmp_path / "t.csv"
    rows = [f"{i},{i / 8},{i},s{i % 5},{i / 2}" for i in range(4000)]
    rows[2500] = "2500,oops,2500,s0,1250.0"
    path.write_text("\n".join(rows) + "\n")
    monkeypatch.setattr(CSVReader, "_arrow_block", 64 << 10)
    monkeypatch.setattr(CSVReader, "_arrow_min_block", 2 << 10)
    answers = _spy_decode(monkeypatch)
    options = {"batch_size": 100, "on_error": "skip"}
    got = outcome(path, DEFAULTS, engine="arrow", **options)
    decoded = answers.count(True)
    assert answers.count(False) == 3 and decoded >= 3  # 64 KiB, 8 KiB, 1 KiB declined
    assert got == outcome(path, DEFAULTS, engine="reference", **options)
    assert got[-1][3] == 1 and sum(len(item[0]) for item in got) == 3999


@pytest.mark.parametrize("on_error", ["raise", "skip"])
def test_a_truncated_gzip_file_ends_as_the_reference_ends(tmp_path, on_error):
    path = tmp_path / "t.csv.gz"
    data = gzip.compress("".join(f"{i},{i}.5,{i},s,{i}\n" for i in range(20000)).encode())
    path.write_bytes(data[: len(data) * 2 // 3])
    options = {"batch_size": 1000, "on_error": on_error}
    assert outcome(path, DEFAULTS, engine="arrow", **options) == \
        outcome(path, DEFAULTS, engine="reference", **options)
