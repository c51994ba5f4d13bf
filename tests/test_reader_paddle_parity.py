"""Programs written for paddle.reader give PaddlePaddle's own recorded output with feedline.

``tests/peer_outputs/paddle_reader_outputs.json`` was produced by running
``tests/peer_outputs/make_paddle_reader_outputs.py`` under PaddlePaddle (see that file);
here the very same program functions run with ``feedline.reader`` and ``feedline.batch``.
Deterministic decorators must give the same items in the same order; ``shuffle`` and
unordered ``xmap_readers`` the same multiset.
"""

from __future__ import annotations

import pytest

import feedline
import feedline.reader

from tests.peer_outputs.paddle_reader_programs import PROGRAMS, load_expected, run_program

EXPECTED = load_expected()


def test_every_program_has_a_recorded_paddle_output():
    assert set(EXPECTED) == set(PROGRAMS)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_same_output_as_paddle(name):
    assert run_program(name, feedline.reader, feedline.batch) == EXPECTED[name]["output"]
