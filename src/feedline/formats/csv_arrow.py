"""The pyarrow engine of :mod:`feedline.csv`: whole blocks of CSV lines parsed by
``pyarrow.csv`` (threaded, C++), used only where its output provably equals the
reference decoder's (:func:`feedline.formats.csv._decode`).

A block is handed to pyarrow only when a cheap check of its raw bytes rules out every
input on which the two could differ; pyarrow is then set up (no quoting, no escapes,
``""`` and ``na_value`` as the only nulls) so that each value it accepts is the value
the reference gives. Anything else (a check that fails, any pyarrow error, a missing
value in a column without a default, a skipped line) makes :meth:`ArrowDecoder.decode`
answer ``None``, and the caller decodes that block the reference way, so values,
errors, line numbers, byte offsets and ``skipped`` counts are the reference's.

The rules, each checked by ``tests/test_csv_arrow.py``:

- lines: pyarrow also ends a line at a lone ``\\r``; the reference strips only a
  ``\\r`` before ``\\n``. A block with any other ``\\r`` is declined. pyarrow skips
  empty lines (the reference reads one as a record with one empty field): its row count
  must equal the block's line count.
- quotes: with ``use_quote_delim`` a block holding a ``"`` is declined (tf's quoting
  rules: a quote inside an unquoted field is an error, ``""`` escapes); without it
  pyarrow reads quotes as plain bytes, as the reference does.
- field counts: pyarrow refuses rows whose field count differs from the first row's;
  with ``select_cols`` a row must have at least ``select_cols[-1] + 1`` fields
  (``include_columns`` fails otherwise).
- missing values: a field equal to ``""`` or ``na_value`` is null in pyarrow (strings
  too) and takes the column's default; a null in a column without a default declines.
- ints: pyarrow accepts what Python's ``int()`` accepts on these fields (optional
  ``-``, digits, blanks around) except that it also reads hexadecimal ``0x..``: a block
  holding ``0x``/``0X`` is declined when an int column is read. Its range check is the
  column's (``int32``/``int64``); it refuses ``+1``, ``1_0`` and NUL, which then go
  the reference way.
- floats: parsed as float64 (correctly rounded, as Python's ``float()`` and numpy's
  string conversion are); for ``float32`` columns the cast to float32 is the
  reference's value except where the float64 value lies exactly on a midpoint between
  two float32 values (:func:`feedline._internal.float32_text.midpoints`; the reference
  then settles the tie from the field's text), so a block holding such a value (not
  one filled in for a missing field) is declined. pyarrow also reads C's
  ``nan(chars)``, so a block where ``nan(`` appears (any case) is declined when a
  float column is read.
- strings: read as ``binary``: the field's bytes exactly, whatever their encoding.

pyarrow is imported on first use, never by ``import feedline``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from feedline._internal.float32_text import midpoints

__all__ = ["ArrowDecoder", "available"]

_ARROW: dict[str, Any] = {}  # "pa", "csv": the modules, once imported


def _searchable(raw: Any) -> tuple[Any, int]:
    """``(buf, n)``: an object with ``bytes``' ``find``/``count`` whose first ``n`` bytes
    are ``raw`` (a ``bytes``, or a view from the start of a ``bytearray``/``bytes``)."""
    if isinstance(raw, memoryview):
        base = raw.obj
        if (isinstance(base, (bytes, bytearray)) and len(base)
                and np.frombuffer(raw, np.uint8).ctypes.data
                == np.frombuffer(base, np.uint8).ctypes.data):
            return base, len(raw)
        return bytes(raw), len(raw)
    return raw, len(raw)


def available() -> bool:
    """Whether pyarrow (with its CSV reader) can be imported.

    >>> available() in (True, False)
    True
    """
    if "pa" not in _ARROW:
        try:
            import pyarrow as pa
            from pyarrow import csv as pacsv
        except ImportError:
            _ARROW["pa"] = _ARROW["csv"] = None
        else:
            _ARROW["pa"], _ARROW["csv"] = pa, pacsv
    return _ARROW["pa"] is not None


class ArrowDecoder:
    """Decodes whole blocks of CSV lines with pyarrow, for one column layout.

    Build it with :meth:`create`, which answers ``None`` where pyarrow is missing or an
    option has no exact pyarrow equivalent (a delimiter or ``na_value`` that is not
    ASCII); the constructor expects pyarrow imported (:func:`available`).

    Args:
        cols: the reader's columns: objects with ``dtype`` (one of ``"int32"``,
            ``"int64"``, ``"float32"``, ``"float64"``, ``"string"``) and ``default``
            (``None`` when the column is required).
        delim: the field delimiter, one ASCII byte.
        quote: the reader's ``use_quote_delim``: when true, a block holding a ``"`` is
            declined (pyarrow itself never reads quotes).
        na: the reader's ``na_value`` as ASCII bytes; a field equal to it or empty takes
            the column default.
        select: the file columns ``cols`` come from; ``None``: all, in order (a record
            must then have exactly one field per column).
        threads: true (the default) lets pyarrow parse a block with several threads.

    >>> from collections import namedtuple
    >>> Col = namedtuple("Col", "dtype default")
    >>> decoder = ArrowDecoder.create([Col("int32", 0), Col("string", b"")], b",", True, b"", None)
    >>> decoder is None or [c.tolist() for c in decoder.decode(b"1,a\\n,b\\n", 2)] == [[1, 0], [b"a", b"b"]]
    True
    >>> decoder is None or decoder.decode(b'1,"a"\\n', 1) is None     # a quote: the reference's
    True
    """

    def __init__(self, cols: Sequence[Any], delim: bytes, quote: bool, na: bytes,
                 select: Sequence[int] | None, threads: bool = True) -> None:
        pa, pacsv = _ARROW["pa"], _ARROW["csv"]
        numbers = list(select) if select is not None else list(range(len(cols)))
        self._names = [f"f{n}" for n in numbers]
        arrow_type = {"int32": pa.int32(), "int64": pa.int64(), "float32": pa.float64(),
                      "float64": pa.float64(), "string": pa.binary()}
        self._cols = list(cols)
        self._fills = [None if c.default is None else pa.scalar(c.default, arrow_type[c.dtype])
                       for c in cols]
        self._ints = any(c.dtype in ("int32", "int64") for c in cols)
        self._floats = any(c.dtype in ("float32", "float64") for c in cols)
        self._quote = quote
        self._width = len(cols) if select is None else None
        self._read = pacsv.ReadOptions(use_threads=threads, autogenerate_column_names=True)
        self._parse = pacsv.ParseOptions(delimiter=delim.decode("ascii"), quote_char=False,
                                          double_quote=False, escape_char=False,
                                          newlines_in_values=False, ignore_empty_lines=True)
        nulls = [""] if not na else ["", na.decode("ascii")]
        self._convert = pacsv.ConvertOptions(
            column_types={name: arrow_type[c.dtype] for name, c in zip(self._names, cols)},
            include_columns=self._names if select is not None else [], null_values=nulls, strings_can_be_null=True,
            quoted_strings_can_be_null=False, check_utf8=False)

    @classmethod
    def create(cls, cols: Sequence[Any], delim: bytes, quote: bool, na: bytes,
               select: Sequence[int] | None) -> ArrowDecoder | None:
        """A decoder, or ``None`` where this engine cannot run (see the class).

        Args:
            cols: the reader's columns, as the class takes them.
            delim: the field delimiter; not ASCII: ``None``.
            quote: the reader's ``use_quote_delim``.
            na: the reader's ``na_value`` as bytes; not ASCII: ``None``.
            select: the file columns ``cols`` come from, or ``None`` for all.
        """
        if not available() or not delim.isascii() or not na.isascii():
            return None
        return cls(cols, delim, quote, na, select)

    def _declines(self, raw: Any) -> bool:
        """Whether ``raw`` holds bytes on which pyarrow and the reference may differ."""
        buf, n = _searchable(raw)
        if self._quote and buf.find(b'"', 0, n) >= 0:
            return True
        if buf.find(b"\r", 0, n) >= 0 and buf.count(b"\r", 0, n) != buf.count(b"\r\n", 0, n):
            return True
        if self._ints and any(buf.find(x, 0, n) >= 0 and buf.find(b"0" + x, 0, n) >= 0
                              for x in (b"x", b"X")):
            return True
        if self._floats and buf.find(b"(", 0, n) >= 0:  # nan( in any case
            data = np.frombuffer(raw, dtype=np.uint8)
            p = np.flatnonzero(data == 40)
            p = p[p >= 3]
            low = [data[p - k] | 32 for k in (3, 2, 1)]
            if ((low[0] == 110) & (low[1] == 97) & (low[2] == 110)).any():
                return True
        return False

    def decode(self, raw: Any, lines: int) -> list[np.ndarray] | None:
        """The columns of the ``lines`` whole lines ``raw``, exactly as the reference
        decodes them, or ``None`` where the reference must decode them (see the module
        docstring).

        Args:
            raw: the block's bytes (``bytes``, or a ``memoryview`` from the start of a
                ``bytes``/``bytearray``): whole lines with their line endings.
            lines: how many lines ``raw`` holds; pyarrow must find exactly as many rows
                (else ``None``: an empty line was skipped).
        """
        if self._declines(raw):
            return None
        pa, pacsv = _ARROW["pa"], _ARROW["csv"]
        try:
            table = pacsv.read_csv(pa.py_buffer(raw), read_options=self._read,
                                   parse_options=self._parse, convert_options=self._convert)
        except (pa.ArrowException, ValueError, TypeError):
            return None  # a bad field, a wrong field count, a missing column...
        if table.num_rows != lines or (self._width is not None
                                        and table.num_columns != self._width):
            # a skipped empty line; a record whose field count is not the column count
            return None
        out = []
        for col, fill, name in zip(self._cols, self._fills, self._names):
            column = parsed = table.column(name)
            if column.null_count:
                if fill is None:
                    return None
                column = column.fill_null(fill)
            values = column.to_numpy()
            if col.dtype == "float32":
                ties = midpoints(values)  # the reference rounds these from their text
                if ties.size and (not parsed.null_count
                                  or not np.asarray(parsed.is_null())[ties].all()):
                    return None
                with np.errstate(over="ignore"):
                    values = values.astype(np.float32)
            elif not values.flags.writeable:  # pyarrow's own buffer: give a numpy one
                values = values.copy()
            out.append(values)
        return out
