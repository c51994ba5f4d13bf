"""Which records a reader reads: file lists and globs (:mod:`.files`), indexed multi-file
sources (:mod:`.records`), splits by index (:mod:`.split`) and by byte range, MXNet's
InputSplit (:mod:`.input_split`).

Names load lazily, so importing a submodule (``feedline.io.files``) does not import the
others.

>>> from feedline.io import InputSplit
>>> InputSplit.__name__
'InputSplit'
"""

from __future__ import annotations

from feedline._internal.lazy import attach_stub

# the lazy names are declared once, in __init__.pyi (what type checkers read)
__getattr__, __dir__, _lazy = attach_stub(globals())

__all__ = list(_lazy)
