"""The shared option checks: every message names the option and the value it got."""

from __future__ import annotations

import argparse

import numpy as np
import pytest

from feedline._internal.validate import (
    check_bool,
    check_float,
    non_negative_float,
    non_negative_int_arg,
    optional_positive_number,
    positive_int_arg,
    record_index,
)


@pytest.mark.parametrize("value, error, message", [
    (-1, ValueError, "`pad` must be a non-negative number, got -1"),
    (float("nan"), ValueError, "`pad` must be a non-negative number, got nan"),
    ("2", TypeError, "`pad` must be a non-negative number, got '2'"),
    (True, TypeError, "`pad` must be a non-negative number, got True"),
])
def test_non_negative_float_refuses(value, error, message):
    with pytest.raises(error, match=message):
        non_negative_float("pad", value)


def test_non_negative_float_accepts_ints_and_floats():
    assert non_negative_float("pad", 0) == 0.0
    assert non_negative_float("pad", 2.5) == 2.5


@pytest.mark.parametrize("fn, text, message", [
    (positive_int_arg, "0", "must be a positive int, got 0"),
    (positive_int_arg, "x", "must be a positive int, got 'x'"),
    (non_negative_int_arg, "-3", "must be a non-negative int, got -3"),
    (non_negative_int_arg, "1.5", "must be a non-negative int, got '1.5'"),
])
def test_command_line_int_types_refuse(fn, text, message):
    with pytest.raises(argparse.ArgumentTypeError, match=message):
        fn(text)


def test_command_line_int_types_in_a_parser(capsys):
    parser = argparse.ArgumentParser(prog="feedline x")
    parser.add_argument("--n", type=positive_int_arg)
    assert parser.parse_args(["--n", "4"]).n == 4
    with pytest.raises(SystemExit):
        parser.parse_args(["--n", "0"])
    assert "argument --n: must be a positive int, got 0" in capsys.readouterr().err


@pytest.mark.parametrize("value", [0, -1.0, float("inf"), float("nan"), True, "1"])
def test_optional_positive_number_refuses(value):
    with pytest.raises(ValueError, match=r"`timeout` must be a positive number of seconds or None"):
        optional_positive_number("timeout", value)


def test_optional_positive_number_accepts_none_and_numbers():
    assert optional_positive_number("timeout", None) is None
    assert optional_positive_number("timeout", 3) == 3.0


def test_record_index_counts_from_the_end_and_names_the_range():
    assert record_index("index", np.int64(2), 5) == 2
    assert record_index("index", -5, 5) == 0
    with pytest.raises(IndexError, match="image 7 out of range for 5 records"):
        record_index("index", 7, 5, what="image")
    with pytest.raises(TypeError, match="`index` must be an int, got 1.0"):
        record_index("index", 1.0, 5)
    with pytest.raises(TypeError, match="`index` must be an int, got True"):
        record_index("index", True, 5)


def test_check_bool_and_check_float_messages():
    assert check_bool("pad", False) is False
    with pytest.raises(TypeError, match="`pad` must be a bool, got 'yes'"):
        check_bool("pad", "yes")
    with pytest.raises(ValueError, match=r"`momentum` must be a number in \[0, 1\), got 1.0"):
        check_float("momentum", 1.0, high=1.0)
    with pytest.raises(TypeError, match="`rate` must be a number >= 0, got None"):
        check_float("rate", None)
