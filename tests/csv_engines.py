"""What a CSV reader yields under one engine, in a form compared bit for bit: used by
tests/test_csv_fast.py and tests/test_csv_arrow.py to hold the whole-chunk numpy path
and the pyarrow path equal to the per-record reference path."""

from __future__ import annotations

import struct
import warnings

import numpy as np

from feedline.csv import read_csv
from feedline.formats.csv import CSVReader

ENGINES = {"reference": (False, False), "numpy": (True, False), "arrow": (True, True)}


def use_engine(engine: str) -> None:
    """Select the engine of every CSVReader made from now on."""
    CSVReader._whole_chunks, CSVReader._arrow = ENGINES[engine]


def exact(value):
    """``value`` with each float as its bits (NaN sign and payload, -0.0 included)."""
    if isinstance(value, float):
        return ("float", struct.pack("<d", value))
    if isinstance(value, (list, tuple)):
        return type(value)(exact(v) for v in value)
    return value


def column(c: np.ndarray):
    if c.dtype == object:
        return ("object", [type(v).__name__ for v in c.tolist()], c.tolist())
    return (c.dtype.str, c.tobytes(), c.flags.writeable)


def outcome(path, defaults, *, engine, resume_at=None, **options):
    """Every item, state and skip count the reader yields (batches as exact columns), and
    how it stops (the error's class, message and state); with ``resume_at=k``, then the
    outcome of a fresh reader started at the state after item ``k``."""
    use_engine(engine)
    out, states = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = read_csv(path, defaults, with_key=True, **options)
        try:
            while True:
                try:
                    item = next(r)
                except StopIteration:
                    break
                keys, value = item
                value = [column(c) for c in value] if options.get("batch_size") else exact(value)
                state = r.get_state()
                states.append(state)
                out.append((keys, value, state, r.skipped))
        except Exception as exc:  # the error itself is part of the outcome
            out.append((type(exc).__name__, str(exc), r.get_state(), r.skipped))
        finally:
            r.close()
    if resume_at is not None and states:
        state = states[min(resume_at, len(states) - 1)]
        defaults_again = defaults
        out.append(("resumed from", state))
        rest = outcome_from(path, defaults_again, state, **options)
        out.extend(rest)
    return out


def outcome_from(path, defaults, state, **options):
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = read_csv(path, defaults, with_key=True, **options)
        r.set_state(state)
        try:
            for keys, value in r:
                value = [column(c) for c in value] if options.get("batch_size") else exact(value)
                out.append((keys, value, r.get_state(), r.skipped))
        except Exception as exc:
            out.append((type(exc).__name__, str(exc), r.get_state(), r.skipped))
        finally:
            r.close()
    return out
