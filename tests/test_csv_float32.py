"""float32 CSV columns are each decimal rounded once, to the nearest float32 (ties to
even), as ``tf.io.decode_csv`` parses them, in every engine (the per-record reference,
numpy columns, pyarrow blocks) and mode (``decode_csv``, ``read_csv`` batches and
rows): not rounded to float64 and then cast, which breaks ties the decimal does not
have. The expected values come from exact rational arithmetic, independent of the
code under test."""

from __future__ import annotations

import json
import random
import subprocess
import tempfile
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from csv_engines import ENGINES, use_engine
from feedline.csv import decode_csv, read_csv
from feedline.formats import csv_arrow
from feedline.formats.csv import CSVReader, _columns

ONE_UP = float(np.nextafter(np.float32(1), np.float32(2)))  # 1 + 2**-23
FLT_MAX = float(np.finfo(np.float32).max)
TINY = 2.0**-149  # the smallest float32 subnormal

KNOWN = [  # (text, its float32)
    ("1.00000005960464477550", ONE_UP),  # just above the midpoint 1 + 2**-24
    ("1.00000005960464477539", 1.0),  # just below it
    ("1.000000059604644775390625", 1.0),  # on it exactly: ties to even
    ("1.000000059604644775390625000000001", ONE_UP),
    ("-1.00000005960464477550", -ONE_UP),
    ("-1.000000059604644775390624999", -1.0),
    ("1.0000001788139343261718749", ONE_UP),  # below 1 + 3 * 2**-24: the cast rounds up
    ("1.000000178813934326171875", 1 + 2.0**-22),  # on it: to even
    ("7.006492321624085354618648e-46", TINY),  # just above 2**-150, between 0 and TINY
    ("-7.006492321624085354618648E-46", -TINY),
    ("7.0064923216240853546186479e-46", 0.0),
    ("3.094823955192601520891907538e+30", 3.094823804076874e30),  # large exponents:
    ("3.094823652961146617234613863e+30", 3.094823804076874e30),  # the cast errs both ways
    ("9.183479550875904915152207e-41", 9.183409485952689e-41),  # subnormal, the cast errs up
    ("3.40282356779733661637539395e38", FLT_MAX),  # just below where float32 overflows
    ("3.40282356779733661637539396e38", float("inf")),  # just above it
    ("-3.40282356779733661637539396e38", float("-inf")),
    ("1e39", float("inf")),
    ("0.5", 0.5),
    ("0.1", float(np.float32(0.1))),
    ("-inf", float("-inf")),
]
SYNTAX = [  # blanks, signs, exponent forms the reference also accepts
    (" 1.00000005960464477550", ONE_UP),
    ("+1.00000005960464477550\t", ONE_UP),
    ("100000005.960464477550e-8", ONE_UP),
    ("0.0000000000100000005960464477550E+11", ONE_UP),
]


def nearest_float32(text: str) -> float:
    """The float32 nearest to the decimal ``text`` (ties to even; past the largest
    float32 by half an ulp or more: inf), by exact rational arithmetic."""
    exact = Decimal(text.strip())
    if not exact.is_finite():
        return float(text)
    x = Fraction(exact)
    if x == 0:
        return -0.0 if text.strip().startswith("-") else 0.0
    with np.errstate(over="ignore"):
        guess = np.float32(float(x))
        candidates = [guess, np.nextafter(guess, np.float32(-np.inf)),
                      np.nextafter(guess, np.float32(np.inf))]

    def value(c: np.float32) -> Fraction:
        return Fraction(float(c)) if np.isfinite(c) else Fraction(2**128) * int(np.sign(c))

    best = min(candidates, key=lambda c: (abs(value(c) - x), int(c.view(np.uint32)) & 1))
    return float(best)


def midpoint_text(bits: int, negative: bool, digits: int, nudge: int, style: int) -> str:
    """A decimal within a few units of its ``digits``-th significant digit of the
    midpoint above the float32 with these ``bits`` (``2**128`` above the largest):
    its float64 value is that midpoint, exactly."""
    a = np.array([bits], dtype=np.uint32).view(np.float32)[0]
    with np.errstate(over="ignore"):
        b = np.nextafter(a, np.float32(np.inf))
    upper = Fraction(2**128) if np.isinf(b) else Fraction(float(b))
    mid = Decimal(float((Fraction(float(a)) + upper) / 2))  # exact: a float64
    with localcontext() as ctx:
        ctx.prec = 200
        rounded = Decimal(format(mid, f".{digits - 1}e"))
        x = rounded + nudge * Decimal(1).scaleb(rounded.adjusted() - digits + 1)
    sign = "-" if negative else ("+" if style == 3 else "")
    if style == 1 and -6 <= x.adjusted() <= 20:
        body = format(x, "f")
    else:
        body = format(x, f".{digits - 1}{'E' if style == 2 else 'e'}")
    text = sign + body
    assert abs(float(text)) == float(mid)  # the hard case: float64 lands on the midpoint
    return f" {text}\t" if style == 4 else text


def bits_of(values) -> list[int]:
    return np.asarray(values, dtype=np.float32).view(np.uint32).tolist()


def expected_bits(texts: list[str]) -> list[int]:
    return bits_of([nearest_float32(t) for t in texts])


def read_all_ways(texts: list[str], directory: str) -> dict[str, list[int]]:
    """The float32 bits of ``texts`` (one field per record) as decode_csv and read_csv
    under each engine, in batches and row by row, decode them."""
    path = f"{directory}/f.csv"
    with open(path, "w") as f:
        f.write("".join(t + "\n" for t in texts))
    got = {"decode_csv": bits_of(decode_csv(texts, [[0.0]])[0])}
    saved = CSVReader._whole_chunks, CSVReader._arrow
    try:
        for engine in ENGINES:
            use_engine(engine)
            batches = list(read_csv(path, [float], batch_size=5))
            got[f"{engine} batches"] = bits_of(np.concatenate([b[0] for b in batches]))
            got[f"{engine} rows"] = bits_of([row[0] for row in read_csv(path, [float])])
    finally:
        CSVReader._whole_chunks, CSVReader._arrow = saved
    return got


@pytest.mark.parametrize("text, value", KNOWN + SYNTAX)
def test_reference_rounding_of_the_known_cases(text, value):
    assert bits_of([nearest_float32(text)]) == bits_of([value])


def test_known_cases_equal_in_every_engine_and_mode(tmp_path):
    texts = [t for t, _ in KNOWN + SYNTAX]
    want = bits_of([v for _, v in KNOWN + SYNTAX])
    for way, got in read_all_ways(texts, str(tmp_path)).items():
        assert got == want, way


def test_a_default_on_a_midpoint_is_cast_as_tensorflow_casts_it():
    default = 1 + 2.0**-24  # a Python float, on a midpoint: rounded once, to even
    assert decode_csv(["", "NA", "2.5"], [[default]], na_value="NA")[0].tolist() == \
        [1.0, 1.0, 2.5]


def test_arrow_declines_a_block_with_a_tie_only_where_the_text_is_there():
    if not csv_arrow.available():
        pytest.skip("the pyarrow engine needs `pip install pyarrow` (feedline's [test] extra)")
    decoder = csv_arrow.ArrowDecoder.create(_columns([[0], [1 + 2.0**-24]]), b",", True, b"",
                                            None)
    assert decoder is not None
    got = decoder.decode(b"1,0.5\n2,\n3,1.1\n", 3)  # no tie in the text: pyarrow decodes it
    assert got is not None and got[1].tolist() == [0.5, 1.0, float(np.float32(1.1))]
    assert decoder.decode(b"1,0.5\n2,1.00000005960464477550\n", 2) is None
    assert decoder.decode(b"1,0.5\n2,1.000000059604644775\n", 2) is None
    assert decoder.decode(b"1,3.40282356779733661637539395e38\n", 1) is None  # overflow's


MIDPOINT = st.builds(
    midpoint_text,
    bits=st.one_of(st.integers(0, 0x7F7FFFFF), st.integers(0, 0xFF),
                   st.integers(0x7F7FFF00, 0x7F7FFFFF), st.integers(0x3F800000, 0x3F8000FF)),
    negative=st.booleans(), digits=st.integers(20, 30), nudge=st.integers(-3, 3),
    style=st.integers(0, 4),
)


@settings(max_examples=60, deadline=None)
@given(texts=st.lists(st.one_of(MIDPOINT, MIDPOINT,
                                st.floats(width=32, allow_nan=False).map(repr)),
                      min_size=1, max_size=12))
def test_decimals_near_float32_midpoints_round_once_in_every_engine(texts):
    want = expected_bits(texts)
    with tempfile.TemporaryDirectory() as directory:
        for way, got in read_all_ways(texts, directory).items():
            assert got == want, way


_TF_SCRIPT = """
import json, sys
import numpy as np
import tensorflow as tf
texts = json.loads(sys.stdin.read())
values = tf.io.decode_csv(texts, [[0.0]])[0].numpy()
print(json.dumps(values.astype(np.float32).view(np.uint32).tolist()))
"""


def test_tensorflow_decode_csv_gives_the_same_float32():
    from peer_envs import peer_python

    python = peer_python("tensorflow")
    rng = random.Random(30)
    texts = [t for t, _ in KNOWN + SYNTAX] + [
        midpoint_text(rng.choice([rng.randrange(0x7F800000), rng.randrange(256),
                                  rng.randrange(0x7F7FFF00, 0x7F800000)]),
                      rng.random() < 0.5, rng.randint(20, 30), rng.randint(-3, 3),
                      rng.randrange(4))
        for _ in range(300)
    ]
    proc = subprocess.run([str(python), "-c", _TF_SCRIPT], input=json.dumps(texts),
                          capture_output=True, text=True, timeout=300,
                          env={"TF_CPP_MIN_LOG_LEVEL": "3", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    tf_bits = json.loads(proc.stdout.strip().splitlines()[-1])
    ours = bits_of(decode_csv(texts, [[0.0]])[0])
    assert ours == tf_bits
    assert ours == expected_bits(texts)
