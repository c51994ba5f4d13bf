"""Where the tests find the *peers*, and what a skip says when one is missing.

A peer is one of the libraries feedline is compared with — TensorFlow, MXNet 1.9.1,
PaddlePaddle, torchvision — installed in a virtual environment of its own, apart from
feedline's (their pins conflict with feedline's and with each other). Tests that check
byte compatibility against a peer run a script with that environment's Python; without it
they skip with a message saying what a peer is and the two commands that create it. The
environments live in ``$FEEDLINE_PEERS/<name>`` (default: ``peers/`` beside the
repository, ``../peers``).
"""

from __future__ import annotations

import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]

#: The folder holding one virtual environment per peer.
PEERS_DIR = pathlib.Path(os.environ.get("FEEDLINE_PEERS") or ROOT.parent / "peers")

#: What each peer's environment needs (as in the benchmarks' harness and DESIGN.md).
INSTALL = {
    "tensorflow": "tensorflow-cpu",
    "mxnet": "mxnet==1.9.1 'numpy<1.24' 'opencv-python-headless<4.9' google-crc32c simplejpeg Pillow",
    "paddle": "paddlepaddle",
    "torchvision": "torch torchvision",
}
_NAMES = {"tensorflow": "TensorFlow", "mxnet": "MXNet 1.9.1", "paddle": "PaddlePaddle",
          "torchvision": "torchvision"}


def skip_message(name: str) -> str:
    """The skip message for a missing peer ``name``.

    >>> print(skip_message("mxnet").split(". ")[0])  # doctest: +ELLIPSIS
    needs the MXNet 1.9.1 peer environment, not found at .../mxnet/bin/python
    """
    env = PEERS_DIR / name
    return (f"needs the {_NAMES[name]} peer environment, not found at {env / 'bin' / 'python'}. "
            f"A peer is a library feedline is compared with (here, byte for byte), installed "
            f"in a virtual environment of its own, apart from feedline's; create it with "
            f"`python3 -m venv {env} && {env}/bin/pip install {INSTALL[name]}` "
            f"(or point FEEDLINE_PEERS at the folder holding it)")


def peer_python(name: str) -> pathlib.Path:
    """The Python of peer ``name``'s environment; skips the calling test (saying what a
    peer is and how to create it) when the environment is missing."""
    python = PEERS_DIR / name / "bin" / "python"
    if not python.exists():
        pytest.skip(skip_message(name))
    return python
