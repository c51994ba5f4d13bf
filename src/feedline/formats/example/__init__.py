"""The implementation of :mod:`feedline.example`, whose page documents it: import the
public names from ``feedline.example``."""

from feedline.formats.example import codec as _codec
from feedline.formats.example.codec import *  # noqa: F403 - the public names, listed once in codec.__all__

__all__ = list(_codec.__all__)
