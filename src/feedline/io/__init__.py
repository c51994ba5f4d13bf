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

from feedline._internal.lazy import lazy_exports

# public name -> submodule that defines it
_EXPORTS = {
    "InputSplit": "feedline.io.input_split",
    "InputSplitIterator": "feedline.io.input_split",
}

__all__ = list(_EXPORTS)


__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)
