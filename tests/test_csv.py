"""CSV: tf.io.decode_csv fixtures, quoting, typing, errors, the file reader."""

from __future__ import annotations

import base64
import gzip
import json
import re
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from feedline import csv as fcsv
from feedline import text
from feedline.exceptions import DecodeError, FeedlineError, MissingFeatureError, StateError

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
DEFAULTS = [0, 0.5, "none", np.int32]  # the fixture's record_defaults


@pytest.fixture(scope="module")
def tf_dir(fixtures_dir):
    return fixtures_dir / "tensorflow"


@pytest.fixture(scope="module")
def expected(tf_dir):
    return json.loads((tf_dir / "expected.json").read_text())


def test_table_matches_tensorflow(tf_dir, expected):
    exp = expected["table.csv"]
    assert exp["record_defaults"] == ["int32 0", "float32 0.5", "string 'none'", "int32 required"]
    cols = fcsv.decode_csv(list(text.read_lines(tf_dir / "table.csv")), DEFAULTS)
    assert [c.dtype for c in cols] == [np.int32, np.float32, object, np.int32]
    assert cols[0].tolist() == exp["columns"][0]
    assert np.array_equal(cols[1], np.array(exp["columns"][1], dtype=np.float32))
    assert [base64.b64encode(v).decode() for v in cols[2]] == exp["columns"][2]
    assert cols[3].tolist() == exp["columns"][3]
    assert b"quoted, with comma 0" in cols[2].tolist()  # a quoted delimiter stays in the field
    batches = list(fcsv.read_csv(tf_dir / "table.csv", DEFAULTS, batch_size=8))
    assert [len(b[0]) for b in batches] == [8, 8, 8, 6]
    assert np.concatenate([b[0] for b in batches]).tolist() == exp["columns"][0]


def test_missing_required_matches_tensorflow(tf_dir, expected):
    tf_text = expected["table_missing_required.csv"]["tensorflow_error"]
    assert "Field 3 is required but missing in record 1!" in tf_text
    lines = list(text.read_lines(tf_dir / "table_missing_required.csv"))
    with pytest.raises(
        MissingFeatureError, match=r"^record 1: field 3 \(int32\) is required but missing$"
    ):
        fcsv.decode_csv(lines, DEFAULTS)
    path = tf_dir / "table_missing_required.csv"
    with pytest.raises(
        MissingFeatureError,
        match=rf"^{re.escape(str(path))}: line 2 at byte 10: field 3 \(int32\) is required but missing$",
    ) as info:
        list(fcsv.read_csv(path, DEFAULTS))
    assert (info.value.path, info.value.line, info.value.offset) == (str(path), 2, 10)


def test_record_default_types():
    cols = fcsv.decode_csv(
        ["1,2,3,4,5,6,x"],
        [0, np.int64(0), 0.0, np.float64(0), [np.int32(7)], [2**40], b"b"],
    )
    assert [c.dtype for c in cols] == [
        np.int32,
        np.int64,
        np.float32,
        np.float64,
        np.int32,
        np.int64,
        object,
    ]
    assert [c.tolist() for c in cols] == [[1], [2], [3.0], [4.0], [5], [6], [b"x"]]
    required = fcsv.decode_csv(["1,2,3,4,5"], [int, float, str, np.array([], np.int64), []])
    assert [c.dtype for c in required] == [np.int32, np.float32, object, np.int64, np.float32]
    with pytest.raises(
        TypeError, match=r"`record_defaults\[0\]` must be an int, float or string default, got bool"
    ):
        fcsv.decode_csv(["1"], [True])
    with pytest.raises(
        ValueError, match=r"`record_defaults\[0\]` must hold one default value, got 2"
    ):
        fcsv.decode_csv(["1"], [[1, 2]])
    with pytest.raises(
        TypeError,
        match=r"`record_defaults\[0\]` must be a default value, a dtype or an empty list, got dict",
    ):
        fcsv.decode_csv(["1"], [{}])
    with pytest.raises(ValueError, match="`record_defaults` must name at least one column"):
        fcsv.decode_csv(["1"], [])


def test_empty_fields_and_na_value():
    cols = fcsv.decode_csv(["NA,,x", "3,NA,"], [-1, 9.5, "d"], na_value="NA")
    assert cols[0].tolist() == [-1, 3] and cols[1].tolist() == [9.5, 9.5]
    assert cols[2].tolist() == [b"x", b"d"]
    assert fcsv.decode_csv([""], ["e"])[0].tolist() == [b"e"]
    assert fcsv.decode_csv(['""'], ["e"])[0].tolist() == [b"e"]  # an empty quoted field too


def test_quoting():
    cols = fcsv.decode_csv(['"a ""b"", c",x', '"",", "'], ["", ""])
    assert cols[0].tolist() == [b'a "b", c', b""]
    assert cols[1].tolist() == [b"x", b", "]
    assert fcsv.decode_csv(['a"b,c'], ["", ""], use_quote_delim=False)[0].tolist() == [b'a"b']
    assert fcsv.decode_csv(["a;b"], ["", ""], field_delim=";")[1].tolist() == [b"b"]
    assert fcsv.decode_csv(['"x",'], ["", "d"])[1].tolist() == [b"d"]


@pytest.mark.parametrize(
    "record, message",
    [
        ('a"b,c', r"^record 0: field 0: a quote inside an unquoted field$"),
        ('"ab,c', r"^record 0: field 0: a quoted field has no closing quote$"),
        ('"a"b,c', r"^record 0: field 0: a closing quote must be followed by the delimiter"),
        ("1,2,3", r"^record 0: expected 2 fields, found 3$"),
        ("x,2", r"^record 0: field 0 is not a valid int32: b'x'$"),
        ("1_000,2", r"^record 0: field 0 is not a valid int32: b'1_000'$"),
        ("3000000000,2", r"^record 0: field 0 is not a valid int32: b'3000000000'$"),
        ("1,2.5.1", r"^record 0: field 1 is not a valid float32: b'2.5.1'$"),
    ],
)
def test_decode_errors(record, message):
    with pytest.raises(DecodeError, match=message):
        fcsv.decode_csv([record], [0, 0.0])


def test_decode_errors_name_the_record():
    with pytest.raises(DecodeError, match=r"^record 2: field 1 is not a valid float32"):
        fcsv.decode_csv(["1,2", "3,4", "5,z"], [0, 0.0])


def test_select_cols():
    cols = fcsv.decode_csv(["a,1,b,2.5,extra"], [0, 0.0], select_cols=[1, 3])
    assert cols[0].tolist() == [1] and cols[1].tolist() == [2.5]
    with pytest.raises(
        DecodeError, match=r"record 0: expected at least 4 fields for select_cols, found 2"
    ):
        fcsv.decode_csv(["a,1"], [0, 0.0], select_cols=[1, 3])
    with pytest.raises(
        ValueError, match=r"`select_cols` names 1 columns but `record_defaults` has 2"
    ):
        fcsv.decode_csv(["a"], [0, 0.0], select_cols=[1])
    with pytest.raises(
        ValueError, match=r"`select_cols` must be strictly increasing, got \[3, 1\]"
    ):
        fcsv.decode_csv(["a"], [0, 0.0], select_cols=[3, 1])


def test_option_validation():
    with pytest.raises(
        ValueError, match="`field_delim` must be one character other than a quote, got b',,'"
    ):
        fcsv.decode_csv(["1"], [0], field_delim=",,")
    with pytest.raises(
        TypeError, match="a CSV record must be str or bytes, got int \\(record 1\\)"
    ):
        fcsv.decode_csv(["1", 2], [0])
    assert [c.tolist() for c in fcsv.decode_csv([], [0, ""])] == [[], []]
    assert fcsv.decode_csv(np.array([b"4"]), [0])[0].tolist() == [4]


def test_float_spellings():
    cols = fcsv.decode_csv(["nan", "inf", "-inf", " 1e3 ", "-0.0"], [0.0])
    v = cols[0]
    assert np.isnan(v[0]) and v[1] == np.inf and v[2] == -np.inf and v[3] == 1000.0
    assert np.signbit(v[4])


# --------------------------------------------------------------------------- file reader


def test_read_csv_rows_header_multiline_and_gzip(tmp_path):
    content = 'id,text,score\n1,"two\nlines",0.5\n2,,\r\n3,"x ""q""",1.5\n'
    path = tmp_path / "t.csv"
    path.write_text(content)
    reader = fcsv.read_csv(path, [0, "-", 0.0], header=True)
    rows = list(reader)
    assert reader.column_names == ["id", "text", "score"]
    assert rows == [(1, b"two\nlines", 0.5), (2, b"-", 0.0), (3, b'x "q"', 1.5)]
    gz = tmp_path / "t.csv.gz"
    gz.write_bytes(gzip.compress(content.encode()))
    assert list(fcsv.read_csv(gz, [0, "-", 0.0], header=True)) == rows


def test_read_csv_errors_and_skip(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("1,a\n2,b\nzz,c\n4,d\n")
    with pytest.raises(
        DecodeError, match=r"bad.csv: line 3 at byte 8: field 0 is not a valid int32: b'zz'$"
    ):
        list(fcsv.read_csv(path, [0, ""]))
    reader = fcsv.read_csv(path, [0, ""], on_error="skip")
    assert [r[0] for r in reader] == [1, 2, 4] and reader.skipped == 1
    with pytest.warns(RuntimeWarning, match="skipping damaged data: .*line 3"):
        assert len(list(fcsv.read_csv(path, [0, ""], on_error="warn", batch_size=2))) == 2
    unclosed = tmp_path / "open.csv"
    unclosed.write_text('1,"never closed\n2,x\n')
    with pytest.raises(
        DecodeError,
        match=r"open.csv: line 1 at byte 0: a quoted field is not closed before the end of the file",
    ):
        list(fcsv.read_csv(unclosed, [0, ""]))
    with pytest.raises(ValueError, match="`batch_size` must be a positive int, got 0"):
        fcsv.read_csv(path, [0, ""], batch_size=0)
    with pytest.raises(
        ValueError, match="`on_error` must be one of 'raise', 'skip', 'warn', got 'x'"
    ):
        fcsv.read_csv(path, [0, ""], on_error="x")


@pytest.mark.parametrize("batch_size", [None, 2])
def test_read_csv_resume_at_every_step(tmp_path, batch_size):
    path = tmp_path / "r.csv"
    path.write_text(
        "h\n"
        + "".join(f'{i},"v\n{i}"\n' if i % 3 == 0 else f"{i},v{i}\n" for i in range(9))
        + "x,bad\n9,v9\n"
    )

    def make():
        return fcsv.read_csv(path, [0, ""], header=True, batch_size=batch_size, on_error="skip")

    def norm(item):
        return [c.tolist() for c in item] if batch_size else item

    full = [norm(x) for x in make()]
    it = make()
    states = [json.loads(json.dumps(it.get_state()))]
    for _ in full:
        next(it)
        states.append(json.loads(json.dumps(it.get_state())))
    for k, state in enumerate(states):
        fresh = make()
        fresh.set_state(state)
        assert [norm(x) for x in fresh] == full[k:], k
        assert fresh.skipped == 1
    with pytest.raises(StateError):
        make().set_state({"type": "text", "offset": 0, "line": 0})


# --------------------------------------------------------------------------- hypothesis

cell = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=8)


@FAST
@given(rows=st.lists(st.lists(cell, min_size=3, max_size=3), min_size=1, max_size=10))
def test_hypothesis_quoted_round_trip(rows):
    def quote(v):
        return '"' + v.replace('"', '""') + '"'

    records = [",".join(quote(v) for v in row) for row in rows]
    cols = fcsv.decode_csv(records, ["", "", ""])
    want = [[v.encode() for v in col] for col in zip(*rows)]
    got = [c.tolist() for c in cols]
    # empty fields take the default (also ""), so they compare equal
    assert got == want


@FAST
@given(
    ints=st.lists(st.integers(-(2**31), 2**31 - 1), min_size=1, max_size=20),
    floats=st.lists(st.floats(width=32, allow_nan=False), min_size=1, max_size=20),
)
def test_hypothesis_numbers_round_trip(ints, floats):
    assert fcsv.decode_csv([str(i) for i in ints], [0])[0].tolist() == ints
    got = fcsv.decode_csv([repr(f) for f in floats], [0.0])[0]
    assert got.tolist() == np.array(floats, dtype=np.float32).tolist()


@FAST
@given(records=st.lists(st.binary(max_size=30), max_size=5))
def test_hypothesis_random_records_raise_feedline_errors(records):
    for defaults in ([0, ""], [0.0], ["", np.int64, 1.0]):
        try:
            cols = fcsv.decode_csv(records, defaults)
        except FeedlineError:
            continue
        assert all(len(c) == len(records) for c in cols)


# --------------------------------------------------------------------------- damaged files


def test_skip_unclosed_quote_keeps_the_lines_after_it(tmp_path):
    path = tmp_path / "open.csv"
    path.write_text('1,a\n2,"open\n3,c\n4,d\n')
    reader = fcsv.read_csv(path, [0, ""], on_error="skip")
    assert list(reader) == [(1, b"a"), (3, b"c"), (4, b"d")] and reader.skipped == 1
    # a stray quote closed by another bad line: both bad lines go, the good one between stays
    path.write_text('1,a\n2,"x\n3,c\n4,y"z\n5,e\n')
    for batch_size in (None, 2):
        reader = fcsv.read_csv(path, [0, ""], on_error="skip", batch_size=batch_size)
        got = list(reader)
        if batch_size:
            got = [r for cols in got for r in zip(cols[0].tolist(), cols[1].tolist())]
        assert got == [(1, b"a"), (3, b"c"), (5, b"e")] and reader.skipped == 2
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert len(list(fcsv.read_csv(path, [0, ""], on_error="warn"))) == 3
    messages = [str(w.message) for w in caught]
    assert len(messages) == 2 and messages[0].endswith(
        "open.csv: line 2 at byte 4: field 1: a closing quote must be followed by the "
        "delimiter or the end of the record")
    assert messages[1].endswith(
        "open.csv: line 4 at byte 13: a quoted field is not closed before the end of the file")
    # a real multi-line quoted field is still one record
    path.write_text('1,"two\nlines"\n2,"open\n3,c\n')
    assert list(fcsv.read_csv(path, [0, ""], on_error="skip")) == [(1, b"two\nlines"), (3, b"c")]


@pytest.mark.parametrize("batch_size", [None, 3])
def test_raise_mode_yields_the_good_rows_before_the_bad_one(tmp_path, batch_size):
    path = tmp_path / "bad.csv"
    path.write_text("1,a\n2,b\n3,c\n4,d\nzz,e\n6,f\n")
    reader = fcsv.read_csv(path, [0, ""], batch_size=batch_size)
    got = []
    with pytest.raises(DecodeError, match=r"bad.csv: line 5 at byte 16: field 0 is not a valid"):
        for item in reader:
            got.extend(item[0].tolist() if batch_size else [item[0]])
    assert got == [1, 2, 3, 4]
    state = reader.get_state()  # points at the bad record: resuming raises it again
    fresh = fcsv.read_csv(path, [0, ""], batch_size=batch_size)
    fresh.set_state(state)
    with pytest.raises(DecodeError, match="line 5"):
        next(fresh)
    path.write_text('1,a\n2,b\n3,"never closed\n4,d\n')
    reader = fcsv.read_csv(path, [0, ""])
    assert [next(reader), next(reader)] == [(1, b"a"), (2, b"b")]
    with pytest.raises(DecodeError, match="line 3 at byte 8: a quoted field is not closed"):
        next(reader)


def test_skip_half_bad_lines_keeps_every_good_row(tmp_path):
    bad = ['x"y', '"open', "1,2,3", "zz,q", '"a"b,c', "7"]
    lines, good = [], []
    for i in range(3000):
        if i % 2:
            lines.append(bad[i % len(bad)])
        else:
            lines.append(f"{i},v{i}")
            good.append((i, f"v{i}".encode()))
    path = tmp_path / "half.csv"
    path.write_text("\n".join(lines) + "\n")
    reader = fcsv.read_csv(path, [0, ""], on_error="skip")
    assert list(reader) == good and reader.skipped == 1500


def test_skip_resume_at_every_step_with_stray_quotes(tmp_path):
    path = tmp_path / "r.csv"
    path.write_text('0,a\n1,"x\n2,b\n3,y"z\n4,c\nq,d\n5,"ok\nstill"\n6,"open\n7,e\n')

    def make():
        return fcsv.read_csv(path, [0, ""], on_error="skip")

    full = list(make())
    assert [r[0] for r in full] == [0, 2, 4, 5, 7]
    it = make()
    states = [json.loads(json.dumps(it.get_state()))]
    for _ in full:
        next(it)
        states.append(json.loads(json.dumps(it.get_state())))
    for k, state in enumerate(states):
        fresh = make()
        fresh.set_state(state)
        assert list(fresh) == full[k:], k
        assert fresh.skipped == 4


def test_csv_keys_and_skip_header_lines(tmp_path):
    path = tmp_path / "k.csv"
    path.write_text('# exported\nid,name\n1,"two\nlines"\nzz,b\n3,c\n')
    reader = fcsv.read_csv(path, [0, ""], skip_header_lines=1, header=True, with_key=True,
                           on_error="skip")
    assert list(reader) == [(f"{path}:3", (1, b"two\nlines")), (f"{path}:6", (3, b"c"))]
    assert reader.column_names == ["id", "name"] and reader.skipped == 1
    batches = list(fcsv.read_csv(path, [0, ""], skip_header_lines=2, batch_size=5,
                                 with_key=True, on_error="skip"))
    assert [keys for keys, _ in batches] == [[f"{path}:3", f"{path}:6"]]
    assert batches[0][1][0].tolist() == [1, 3]
    with pytest.raises(ValueError, match="`skip_header_lines` must be a non-negative int"):
        fcsv.read_csv(path, [0, ""], skip_header_lines=-2)
    with pytest.raises(TypeError, match="`with_key` must be a bool, got 1"):
        fcsv.read_csv(path, [0, ""], with_key=1)
