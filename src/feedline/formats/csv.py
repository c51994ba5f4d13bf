"""The implementation of :mod:`feedline.csv`, whose page documents it: import the
public names from ``feedline.csv``."""

from __future__ import annotations

import numbers
import os
from collections.abc import Sequence
from typing import Any, NamedTuple, cast

import numpy as np

from feedline._internal.float32_text import to_float32
from feedline._internal.on_error import check_on_error, report
from feedline._internal.signature import takes_arguments_of
from feedline._internal.state import state_int
from feedline._internal.validate import check_bool, non_negative_int, optional_positive_int
from feedline.dataset.iterator import DatasetIterator, check_state
from feedline.exceptions import DataError, DecodeError, MissingFeatureError
from feedline.formats import csv_arrow
from feedline.formats.text import TextLineReader

__all__ = ["decode_csv", "split_record", "iter_records", "CSVReader", "read_csv"]

_INT_RANGE = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}
_NUMPY = {
    "int32": np.int32,
    "int64": np.int64,
    "float32": np.float32,
    "float64": np.float64,
    "string": object,
}
_QUOTE = ord('"')


class _Col(NamedTuple):
    dtype: str
    default: Any  # None when the column is required


def _dtype_marker(value: Any) -> str | None:
    """The column dtype named by ``value`` if it is a dtype marker, else ``None``."""
    if value is int:
        return "int32"
    if value is float:
        return "float32"
    if value is str or value is bytes:
        return "string"
    if isinstance(value, type) and issubclass(value, np.generic) or isinstance(value, np.dtype):
        dt = np.dtype(value)
        if dt.kind in "SUO":
            return "string"
        if dt.name in _NUMPY:
            return dt.name
    return None


def _column(i: int, value: Any) -> _Col:
    what = f"`record_defaults[{i}]`"
    marker = _dtype_marker(value)
    if marker is not None:
        return _Col(marker, None)
    if isinstance(value, np.ndarray) and value.size == 0:
        kind = _dtype_marker(value.dtype)
        if kind is None:
            raise TypeError(f"{what} has an unsupported dtype {value.dtype}")
        return _Col(kind, None)
    if isinstance(value, (list, tuple)) and not value:
        return _Col("float32", None)
    if isinstance(value, (list, tuple, np.ndarray)):
        if len(value) != 1:
            raise ValueError(f"{what} must hold one default value, got {len(value)}")
        value = value[0]
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{what} must be an int, float or string default, got bool")
    if isinstance(value, (str, bytes, np.str_, np.bytes_)):
        return _Col("string", value.encode("utf-8") if isinstance(value, str) else bytes(value))
    if isinstance(value, np.generic):
        kind = _dtype_marker(type(value))
        if kind is None or kind == "string":
            raise TypeError(f"{what} has an unsupported dtype {value.dtype}")
        return _Col(kind, value.item())
    if isinstance(value, numbers.Integral):
        lo, hi = _INT_RANGE["int32"]
        iv = cast(int, value)  # the numbers.Integral stubs lack the comparisons
        kind = "int32" if lo <= iv <= hi else "int64"
        if not _INT_RANGE["int64"][0] <= iv <= _INT_RANGE["int64"][1]:
            raise ValueError(f"{what} = {value} does not fit in int64")
        return _Col(kind, int(value))
    if isinstance(value, numbers.Real):
        return _Col("float32", float(value))
    raise TypeError(
        f"{what} must be a default value, a dtype or an empty list, got {type(value).__name__}"
    )


def _columns(record_defaults: Sequence[Any]) -> list[_Col]:
    if isinstance(record_defaults, (str, bytes)) or not isinstance(
        record_defaults, (Sequence, np.ndarray)
    ):
        raise TypeError("`record_defaults` must be a list with one entry per column")
    if not len(record_defaults):
        raise ValueError("`record_defaults` must name at least one column")
    return [_column(i, v) for i, v in enumerate(record_defaults)]


class _Syntax(Exception):
    pass


def _split_quoted(rec: bytes, delim: bytes) -> list[bytes]:
    """Split one record with RFC 4180 quoting."""
    fields: list[bytes] = []
    n = len(rec)
    d = delim[0]
    i = 0
    while True:
        if i < n and rec[i] == _QUOTE:
            parts = []
            j = i + 1
            while True:
                k = rec.find(b'"', j)
                if k < 0:
                    raise _Syntax(f"field {len(fields)}: a quoted field has no closing quote")
                parts.append(rec[j:k])
                if k + 1 < n and rec[k + 1] == _QUOTE:
                    parts.append(b'"')
                    j = k + 2
                    continue
                i = k + 1
                break
            fields.append(b"".join(parts))
            if i == n:
                return fields
            if rec[i] != d:
                raise _Syntax(
                    f"field {len(fields) - 1}: a closing quote must be followed by the "
                    "delimiter or the end of the record"
                )
            i += 1
            continue
        k = rec.find(delim, i)
        field = rec[i:] if k < 0 else rec[i:k]
        if b'"' in field:
            raise _Syntax(f"field {len(fields)}: a quote inside an unquoted field")
        fields.append(field)
        if k < 0:
            return fields
        i = k + 1


def split_record(
    record: str | bytes, *, field_delim: str = ",", use_quote_delim: bool = True
) -> list[bytes]:
    """Split one CSV record into its fields (``bytes``, quotes removed).

    Args:
        record: one record, ``str`` (UTF-8 encoded first) or bytes-like, without its line
            ending; another type raises ``TypeError``, bad quoting
            :class:`~feedline.exceptions.DecodeError`.
        field_delim: the delimiter, one character other than a quote or a newline
            (default ``","``; else ``ValueError``).
        use_quote_delim: true (the default) follows RFC 4180 quoting (see the module
            docstring); false treats quotes as ordinary text.

    >>> split_record('x,"say ""hi"", now",')
    [b'x', b'say "hi", now', b'']
    """
    rec = _as_record(record, 0)
    delim = _options(field_delim, "", None, 0)[0]
    try:
        if use_quote_delim and b'"' in rec:
            return _split_quoted(rec, delim)
        return rec.split(delim)
    except _Syntax as exc:
        raise DecodeError(str(exc)) from None


def _join_quoted(lines: TextLineReader, quote: bool, path: str):
    """Yield ``(record, 1-based line, byte offset)``, joining lines inside quotes."""
    while True:
        offset = lines.tell()
        number = lines.line_number + 1
        try:
            line = next(lines)
        except StopIteration:
            return
        if quote and line.count(b'"') % 2:
            parts = [line]
            quotes = line.count(b'"')
            while quotes % 2:
                try:
                    more = next(lines)
                except StopIteration:
                    raise DecodeError(
                        "a quoted field is not closed before the end of the file",
                        path=path,
                        line=number,
                        offset=offset,
                    ) from None
                parts.append(more)
                quotes += more.count(b'"')
            line = b"\n".join(parts)
        yield line, number, offset


def iter_records(
    path: str | os.PathLike, *, use_quote_delim: bool = True, compression: str | None = "auto"
):
    """Yield the raw records of a CSV file as ``bytes`` (line endings removed; lines
    joined where a quoted field holds a newline), ready for :func:`decode_csv`.

    Args:
        path: a local path or an fsspec URL.
        use_quote_delim: true (the default) joins the lines of a quoted field that holds
            a newline (a quote left open at the end of the file raises
            :class:`~feedline.exceptions.DecodeError`); false yields each line as a record.
        compression: ``"auto"`` (the default), ``None``, ``"GZIP"`` or ``"ZLIB"``.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "a.csv")
    >>> with open(path, "w") as f: f.writelines(['x,y', chr(10), '1,"a', chr(10), 'b"', chr(10), '2,c', chr(10)])
    >>> [r.decode().replace(chr(10), "|") for r in iter_records(path)]   # a quoted newline joins lines
    ['x,y', '1,"a|b"', '2,c']
    """
    reader = TextLineReader(path, compression=compression)
    with reader:
        for record, _, _ in _join_quoted(reader, bool(use_quote_delim), os.fspath(path)):
            yield record


def _parse_number(field: bytes, dtype: str) -> Any:
    """Parse one numeric field as TF does; ``ValueError`` when it is not one."""
    if b"_" in field or b"\x00" in field:
        raise ValueError(field)
    if dtype in _INT_RANGE:
        value = int(field)
        lo, hi = _INT_RANGE[dtype]
        if not lo <= value <= hi:
            raise ValueError(field)
        return value
    return float(field)


def _convert(col: _Col, fields: list[bytes], na: bytes, number: int, locate) -> np.ndarray:
    """Typed numpy column from the field ``bytes`` of column ``number``."""
    n = len(fields)
    arr = np.empty(n, dtype=object)
    arr[:] = fields
    missing = arr == b""
    if na:
        missing |= arr == na
    if col.default is None and missing.any():
        k = int(np.flatnonzero(missing)[0])
        raise MissingFeatureError(
            f"field {number} ({col.dtype}) is required but missing", **locate(k)
        )
    if col.dtype == "string":
        if missing.any():
            arr[missing] = col.default
        return arr
    out = np.empty(n, dtype=_NUMPY[col.dtype])
    present = ~missing
    if missing.any():
        out[missing] = col.default
    good = arr[present].tolist()
    if not good:
        return out
    wide = np.float64 if col.dtype == "float32" else out.dtype  # float32: rounded once below
    joined = b"".join(good)
    try:
        if b"_" in joined or b"\x00" in joined:
            raise ValueError("slow path")
        values = np.array(good, dtype=bytes).astype(wide)
    except (ValueError, OverflowError):
        values = np.empty(len(good), dtype=wide)
        for j, (k, field) in enumerate(zip(np.flatnonzero(present).tolist(), good)):
            try:
                values[j] = _parse_number(field, col.dtype)
            except (ValueError, OverflowError):
                raise DecodeError(
                    f"field {number} is not a valid {col.dtype}: {field[:40]!r}", **locate(k)
                ) from None
    if col.dtype == "float32":
        values = to_float32(values, lambda rows: [good[i] for i in rows])
    out[present] = values
    return out


def _as_record(rec: Any, k: int) -> bytes:
    if isinstance(rec, bytes):
        return rec
    if isinstance(rec, str):
        return rec.encode("utf-8")
    if isinstance(rec, (bytearray, memoryview, np.bytes_)):
        return bytes(rec)
    raise TypeError(f"a CSV record must be str or bytes, got {type(rec).__name__} (record {k})")


def _options(field_delim: Any, na_value: Any, select_cols: Any, ncols: int):
    if isinstance(field_delim, str):
        field_delim = field_delim.encode("utf-8")
    if not isinstance(field_delim, bytes) or len(field_delim) != 1 or field_delim in b'"\n\r':
        raise ValueError(
            f"`field_delim` must be one character other than a quote, got {field_delim!r}"
        )
    if isinstance(na_value, str):
        na_value = na_value.encode("utf-8")
    if not isinstance(na_value, bytes):
        raise TypeError(f"`na_value` must be a str, got {na_value!r}")
    if select_cols is not None:
        cols = list(select_cols)
        if any(isinstance(c, bool) or not isinstance(c, numbers.Integral) or c < 0 for c in cols):
            raise ValueError(f"`select_cols` must be non-negative ints, got {select_cols!r}")
        if any(b <= a for a, b in zip(cols, cols[1:])):
            raise ValueError(f"`select_cols` must be strictly increasing, got {select_cols!r}")
        if len(cols) != ncols:
            raise ValueError(
                f"`select_cols` names {len(cols)} columns but `record_defaults` has {ncols}"
            )
        select_cols = [int(c) for c in cols]
    return field_delim, na_value, select_cols


def _decode(records, cols, delim, quote, na, select, locate) -> list[np.ndarray]:
    rows = []
    split_quoted = _split_quoted
    for k, rec in enumerate(records):
        try:
            rows.append(split_quoted(rec, delim) if quote and b'"' in rec else rec.split(delim))
        except _Syntax as exc:
            raise DecodeError(str(exc), **locate(k)) from None
    if select is None:
        want = len(cols)
        if any(len(r) != want for r in rows):
            k = next(k for k, r in enumerate(rows) if len(r) != want)
            raise DecodeError(f"expected {want} fields, found {len(rows[k])}", **locate(k))
        columns: list[Any] = list(zip(*rows)) if rows else [()] * want
    else:
        need = select[-1] + 1
        if any(len(r) < need for r in rows):
            k = next(k for k, r in enumerate(rows) if len(r) < need)
            raise DecodeError(
                f"expected at least {need} fields for select_cols, found {len(rows[k])}",
                **locate(k),
            )
        columns = [[r[c] for r in rows] for c in select]
    numbers_ = select if select is not None else range(len(cols))
    return [
        _convert(col, list(fields), na, number, locate)
        for col, fields, number in zip(cols, columns, numbers_)
    ]


def decode_csv(
    records: Sequence[Any],
    record_defaults: Sequence[Any],
    *,
    field_delim: str = ",",
    use_quote_delim: bool = True,
    na_value: str = "",
    select_cols: Sequence[int] | None = None,
) -> list[np.ndarray]:
    """Decode CSV ``records`` into one numpy array per column, as ``tf.io.decode_csv``;
    see the module docstring. A float32 field is its decimal rounded once, to the
    nearest float32 (ties to even), as TensorFlow parses it: not rounded to float64
    first, which can land on a tie the decimal does not have (see
    :mod:`feedline._internal.float32_text`).

    Args:
        records: the records, ``str`` or ``bytes``, one record each, no line ending (a
            single ``str``/``bytes`` is one record; a numpy array is flattened).
        record_defaults: one entry per column, giving its type and the value of an empty
            field, or a dtype for a required column (see the module docstring).
        field_delim: the delimiter, one character other than a quote or a newline
            (default ``","``; else ``ValueError``).
        use_quote_delim: true (the default) follows RFC 4180 quoting; false treats
            quotes as ordinary text.
        na_value: a field equal to this (default ``""``: only an empty field) takes the
            column default; a non-str raises ``TypeError``.
        select_cols: the indices of the columns to decode, non-negative and strictly
            increasing, one per entry of ``record_defaults`` (else ``ValueError``);
            ``None`` (the default) decodes every column and requires exactly one field
            per default.

    >>> decode_csv([b"1,a,0.5", b",b,"], [[0], [""], [1.5]])    # empty fields take the defaults
    [array([1, 0], dtype=int32), array([b'a', b'b'], dtype=object), array([0.5, 1.5], dtype=float32)]
    >>> decode_csv(["7;x;9"], [[0], [0]], field_delim=";", select_cols=[0, 2])
    [array([7], dtype=int32), array([9], dtype=int32)]
    >>> decode_csv(["1.00000005960464477550"], [1.5])[0].tolist()   # just above 1 + 2**-24
    [1.0000001192092896]
    """
    cols = _columns(record_defaults)
    delim, na, select = _options(field_delim, na_value, select_cols, len(cols))
    if isinstance(records, (str, bytes)):
        records = [records]
    elif isinstance(records, np.ndarray):
        records = records.ravel().tolist()
    recs = [_as_record(r, k) for k, r in enumerate(records)]
    return _decode(recs, cols, delim, bool(use_quote_delim), na, select, lambda k: {"index": k})


def _fast_column(col: _Col, fields: list[bytes], na: bytes) -> np.ndarray | None:
    """Column ``col`` from its fields by whole-column numpy operations, or ``None``
    where a field needs :func:`_convert`'s checks (a required field missing, an
    underscore or NUL, a value that does not parse or fit): the caller then decodes
    the records the reference way, which gives the same values or the exact error."""
    n = len(fields)
    missing = None
    if b"" in fields or (na and na in fields):
        if col.default is None:
            return None
        missing = np.fromiter((f == b"" or f == na for f in fields), dtype=bool, count=n)
        present = [f for f in fields if f != b"" and f != na]
    else:
        present = fields
    if col.dtype == "string":
        arr = np.empty(n, dtype=object)
        arr[:] = fields
        if missing is not None:
            arr[missing] = col.default
        return arr
    joined = b"".join(present)
    if b"_" in joined or b"\x00" in joined:
        return None
    try:
        if col.dtype in _INT_RANGE:
            values = np.array(list(map(int, present)), dtype=np.int64)
            lo, hi = _INT_RANGE[col.dtype]
            if values.size and (int(values.min()) < lo or int(values.max()) > hi):
                return None
            values = values.astype(_NUMPY[col.dtype])
        else:
            values = np.array(present, dtype=bytes).astype(np.float64)
            if col.dtype == "float32":
                values = to_float32(values, lambda rows: [present[i] for i in rows])
    except (ValueError, OverflowError):
        return None
    if missing is None:
        return values
    out = np.empty(n, dtype=_NUMPY[col.dtype])
    out[missing] = col.default
    out[~missing] = values
    return out


def _fast_decode(lines: list[bytes], cols: list[_Col], delim: bytes, quote: bool, na: bytes,
                 select: list[int] | None) -> list[np.ndarray] | None:
    """Decode one-line records without a quote by splitting them all at once and
    converting whole columns; ``None`` where any record needs the per-record path
    (a quote, a record whose field count differs, any field :func:`_fast_column`
    declines). Gives exactly :func:`_decode`'s columns where it answers."""
    joined = b"\n".join(lines)
    if quote and b'"' in joined:
        return None
    counts = set(map(bytes.count, lines, [delim] * len(lines)))
    if len(counts) != 1:
        return None
    width = counts.pop() + 1
    if (select is None and width != len(cols)) or (select is not None and width <= select[-1]):
        return None
    fields = (joined.replace(delim, b"\n") if width > 1 else joined).split(b"\n")
    numbers_ = select if select is not None else range(len(cols))
    out = []
    for col, number in zip(cols, numbers_):
        column = _fast_column(col, fields[number::width], na)
        if column is None:
            return None
        out.append(column)
    return out


class _After(Sequence[tuple[int, int, int, int]]):
    """The per-record states of a chunk decoded by the fast path, built on demand:
    item ``k`` is ``(offset after, lines read, skipped, first line)`` as in
    :meth:`CSVReader._chunk`."""

    __slots__ = ("_starts", "_first", "_skipped")

    def __init__(self, starts: np.ndarray, first: int, skipped: int) -> None:
        self._starts, self._first, self._skipped = starts, first, skipped

    def __len__(self) -> int:
        return len(self._starts) - 1

    @staticmethod
    def join(parts: list[Sequence[tuple[int, int, int, int]]]
             ) -> Sequence[tuple[int, int, int, int]]:
        """The states of consecutive chunks, one after the other: still lazy where they
        are blocks that follow each other line after line, with no record skipped."""
        if all(isinstance(p, _After) for p in parts):
            blocks = cast(list[_After], parts)
            if all(b._first == a._first + len(a) and b._skipped == a._skipped
                   and b._starts[0] == a._starts[-1] for a, b in zip(blocks, blocks[1:])):
                starts = np.concatenate([blocks[0]._starts] + [b._starts[1:] for b in blocks[1:]])
                return _After(starts, blocks[0]._first, blocks[0]._skipped)
        return [a for p in parts for a in p]

    def __getitem__(self, k: int) -> tuple[int, int, int, int]:  # type: ignore[override]
        if k < 0:
            k += len(self)
        if not 0 <= k < len(self):
            raise IndexError(k)
        return int(self._starts[k + 1]), self._first + k, self._skipped, self._first + k


class CSVReader(DatasetIterator[Any]):
    """Typed records from one CSV file (see :func:`read_csv`).

    Args:
        path: a local path or an fsspec URL (``s3://``, ``gs://``, ``memory://``,
            ``file://``); the file is opened on the first read.
        record_defaults: one entry per column, as :func:`decode_csv` takes them.
        header: true skips the first record (after ``skip_header_lines``) and keeps its
            fields in ``column_names``; false (the default) reads it as data.
        batch_size: ``None`` (the default) yields one tuple of Python values per record;
            a positive int yields a list of numpy columns per batch of that many records.
        field_delim: the delimiter, one character other than a quote (default ``","``).
        use_quote_delim: true (the default) follows RFC 4180 quoting; a quoted field may
            span lines.
        na_value: a field equal to this (default ``""``) takes the column default.
        select_cols: the columns to decode, as for :func:`decode_csv`.
        compression: ``"auto"`` (the default), ``None``, ``"GZIP"`` or ``"ZLIB"``.
        on_error: ``"raise"`` (the default) raises at a bad record, after yielding the
            good ones before it; ``"skip"``/``"warn"`` skip it and count it in
            ``skipped``.
        storage_options: passed to fsspec for a URL.
        skip_header_lines: lines to leave out at the start of the file (before
            ``header``'s record), a non-negative int (default 0).
        with_key: true yields ``(key, row)`` with ``key = "<path>:<line>"``, the line
            where the record starts (with ``batch_size``: ``(keys, columns)``); a
            non-bool raises ``TypeError``.

    Which engine decodes a block (pyarrow, numpy columns or the record-by-record
    reference; all give the same output) is described at :func:`read_csv`.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "a.csv")
    >>> with open(path, "w") as f: f.writelines(line + chr(10) for line in ["n,s", "1,a", "2,b", "3,c"])
    >>> r = CSVReader(path, [[0], [""]], header=True)
    >>> next(r)
    (1, b'a')
    >>> state = r.get_state(); r.close()
    >>> r2 = CSVReader(path, [[0], [""]], header=True); r2.set_state(state)
    >>> list(r2)
    [(2, b'b'), (3, b'c')]
    >>> list(CSVReader(path, [[0], [""]], header=True, batch_size=2))
    [[array([1, 2], dtype=int32), array([b'a', b'b'], dtype=object)], [array([3], dtype=int32), array([b'c'], dtype=object)]]
    """

    #: decode quote-free one-line records a whole chunk at a time (the per-record path
    #: is the reference; the tests compare the two)
    _whole_chunks = True
    #: decode whole blocks with pyarrow where it is installed and provably agrees
    #: (:mod:`feedline.formats.csv_arrow`); off with ``_whole_chunks``: the reference
    _arrow = True
    #: bytes of lines per pyarrow block; a block pyarrow declines is tried again in
    #: eighths down to ``_arrow_min_block`` bytes, so that damage costs only its part
    _arrow_block = 1 << 20
    _arrow_min_block = 1 << 16

    def __init__(
        self,
        path: str | os.PathLike,
        record_defaults: Sequence[Any],
        *,
        header: bool = False,
        batch_size: int | None = None,
        field_delim: str = ",",
        use_quote_delim: bool = True,
        na_value: str = "",
        select_cols: Sequence[int] | None = None,
        compression: str | None = "auto",
        on_error: str = "raise",
        storage_options: dict | None = None,
        skip_header_lines: int = 0,
        with_key: bool = False,
    ) -> None:
        self.path = os.fspath(path)
        check_bool("with_key", with_key)
        self.with_key = with_key
        self._cols = _columns(record_defaults)
        self._delim, self._na, self._select = _options(
            field_delim, na_value, select_cols, len(self._cols)
        )
        self._quote = bool(use_quote_delim)
        self.batch_size = optional_positive_int("batch_size", batch_size)
        self.on_error = check_on_error(on_error)
        check_bool("header", header)
        self._header = header
        self.column_names: list[str] | None = None
        self._lines = TextLineReader(
            self.path, compression=compression, storage_options=storage_options
        )
        self.skip_header_lines = non_negative_int("skip_header_lines", skip_header_lines)
        self._rows: list[tuple] = []
        self._row_states: Sequence[tuple[int, int, int, int]] = []
        self._j = 0
        self._skipped = 0
        self._engine: csv_arrow.ArrowDecoder | None | bool = None  # False: not available
        self._block: list | None = None  # [columns, starts, first line, records served]
        self._declined = -1  # the reference decodes the lines before this offset
        self._window = 0  # records the last _chunk_records read
        self._shrink: list[tuple[int, int]] = []  # (end offset, block size) after declines

    @property
    def skipped(self) -> int:
        """Records skipped because they did not decode (``skip``/``warn``)."""
        return self._skipped

    def _record(self) -> tuple[bytes, int, int, tuple[int, int] | None] | None:
        """Next record with its 1-based line, its byte offset and, for a record joined
        from several lines (a quoted field holding newlines), the position just after
        its first line (``None`` for a one-line record).

        A quote left open at the end of the file raises under ``on_error="raise"``.
        Otherwise a stray quote (one left open at the end of the file, or one whose
        joined record does not split into the expected fields) costs only its own line:
        that line is counted as skipped and reading goes on at the next line, so the
        good lines after it are kept.
        """
        lines = self._lines
        while True:
            offset = lines.tell()
            number = lines.line_number + 1
            line = next(lines, None)
            if line is None:
                return None
            if not (self._quote and line.count(b'"') % 2):
                return line, number, offset, None
            resume = (lines.tell(), lines.line_number)
            parts = [line]
            quotes = line.count(b'"')
            while quotes % 2:
                more = next(lines, None)
                if more is None:
                    break
                parts.append(more)
                quotes += more.count(b'"')
            if not quotes % 2:
                record = b"\n".join(parts)
                if self.on_error == "raise":
                    return record, number, offset, resume
                problem = self._syntax_problem(record)
                if problem is None:
                    return record, number, offset, resume
                err = DecodeError(problem, path=self.path, line=number, offset=offset)
            else:
                err = DecodeError(
                    "a quoted field is not closed before the end of the file",
                    path=self.path, line=number, offset=offset,
                )
            report(err, self.on_error, stacklevel=4)
            self._skipped += 1
            self._rewind(resume)

    def _syntax_problem(self, record: bytes) -> str | None:
        """Why a record joined from several lines cannot be split into the expected
        number of fields (``None`` if it can)."""
        try:
            fields = _split_quoted(record, self._delim)
        except _Syntax as exc:
            return str(exc)
        want = len(self._cols) if self._select is None else self._select[-1] + 1
        if len(fields) != want if self._select is None else len(fields) < want:
            return f"expected {want} fields, found {len(fields)}"
        return None

    def _rewind(self, position: tuple[int, int]) -> None:
        """Move the line reader back to ``(offset, lines read)``."""
        self._lines.set_state({"type": "text", "offset": position[0], "line": position[1]})

    def _read_header(self) -> None:
        while self._lines.line_number < self.skip_header_lines:
            if next(self._lines, None) is None:
                break
        if self._header and self.column_names is None:
            rec = self._record()
            if rec is not None:
                try:
                    fields = (
                        _split_quoted(rec[0], self._delim)
                        if self._quote and b'"' in rec[0]
                        else rec[0].split(self._delim)
                    )
                except _Syntax as exc:
                    raise DecodeError(
                        f"header: {exc}", path=self.path, line=rec[1], offset=rec[2]
                    ) from None
                self.column_names = [f.decode("utf-8", "replace") for f in fields]
            else:
                self.column_names = []

    def _decode_records(self, recs: list[bytes], where: list[tuple[int, int]]):
        def locate(k: int) -> dict:
            return {"path": self.path, "line": where[k][0], "offset": where[k][1]}

        return _decode(recs, self._cols, self._delim, self._quote, self._na, self._select, locate)

    def _chunk(self, n: int) -> tuple[list[np.ndarray], Sequence[tuple[int, int, int, int]]] | None:
        """Decode up to ``n`` records; returns the columns and, for each record kept,
        ``(offset, line, skipped, first line)``: the state just after it and the 1-based
        line where it starts.

        Under ``on_error="raise"`` the good records before a bad one are returned first
        (the line reader is moved back to the bad record, which raises on the next
        call). Otherwise each record of a chunk that fails is decoded alone, so a file
        with many bad lines costs about two decodes per line.
        """
        self._read_header()
        parts: list[tuple[list[np.ndarray], Sequence[tuple[int, int, int, int]]]] = []
        count = 0
        got: tuple[list[np.ndarray], Sequence[tuple[int, int, int, int]]] | None
        # A batch is the records of a window of n read (less those skipped), as the
        # reference reads it: a block that ends early, or a declined block that the
        # reference way reads up to its end, is followed by what comes next.
        while count < n:
            limit = self._declined if self._lines.tell() < self._declined else None
            try:
                got = self._whole_chunk(n - count)
                whole = got is not None
                if got is None:
                    got = self._chunk_records(n - count, limit)
                    count += self._window
            except DataError:
                if not parts:
                    raise
                break  # raised again by the next call (the state points at its record)
            if got is None:
                break
            parts.append(got)
            if whole:
                count += len(got[1])
            elif limit is None or self._lines.tell() < limit:
                break  # the reference way read its whole window, or stopped at an error
        if len(parts) < 2:
            return parts[0] if parts else None
        return ([np.concatenate(column) for column in zip(*(p[0] for p in parts))],
                _After.join([p[1] for p in parts]))

    def _whole_chunk(self, n: int) -> tuple[list[np.ndarray], _After] | None:
        """Up to ``n`` records of one block decoded whole (pyarrow or numpy), or ``None``
        where the next records need the reference way."""
        got = self._arrow_chunk(n)
        if got is None and self._whole_chunks:
            lines, starts, first = self._lines.peek_lines(n)
            columns = _fast_decode(lines, self._cols, self._delim, self._quote, self._na,
                                   self._select) if lines else None
            if columns is not None:
                self._lines.skip_lines(len(lines))
                got = columns, _After(starts, first, self._skipped)
        return got

    def _chunk_records(self, n: int, limit: int | None = None
                       ) -> tuple[list[np.ndarray], Sequence[tuple[int, int, int, int]]] | None:
        """:meth:`_chunk` the reference way: record by record, reading no record that
        starts at or after byte ``limit``; ``_window`` is then the number of records
        read (kept or not)."""
        recs: list[bytes] = []
        where: list[tuple[int, int]] = []
        after: list[tuple[int, int, int, int]] = []  # offset, line, skips before, first line
        self._window = 0
        while len(recs) < n and (limit is None or self._lines.tell() < limit):
            position = (self._lines.tell(), self._lines.line_number)
            try:
                rec = self._record()
            except DataError:
                self._rewind(position)  # the state points at the bad record
                if not recs:
                    raise
                break  # yield the good records first; raise on the next call
            if rec is None:
                break
            recs.append(rec[0])
            where.append((rec[1], rec[2]))
            after.append((self._lines.tell(), self._lines.line_number, self._skipped, rec[1]))
        self._window = len(recs)
        if not recs:
            return None
        try:
            return self._decode_records(recs, where), after
        except DataError as exc:
            if self.on_error == "raise":
                return self._chunk_prefix(recs, where, after, exc)
        problems = self._find_bad(recs, where)
        keep: list[int] = []
        bad = 0
        for k in range(len(recs)):
            if k in problems:
                if self.on_error != "skip":
                    cls, message = problems[k]
                    report(cls(message, path=self.path, line=where[k][0], offset=where[k][1]),
                           self.on_error, stacklevel=4)
                self._skipped += 1
                bad += 1
                continue
            keep.append(k)
            offset, line, skips, start = after[k]
            after[k] = (offset, line, skips + bad, start)
        while True:
            if not keep:
                return [np.empty(0, dtype=_NUMPY[c.dtype]) for c in self._cols], []
            try:
                return (
                    self._decode_records([recs[k] for k in keep], [where[k] for k in keep]),
                    [after[k] for k in keep],
                )
            except DataError as exc:  # a field the checks above let through
                report(exc, self.on_error, stacklevel=4)
                k = next(k for k in keep if where[k][0] == exc.line)
                i = keep.index(k)
                self._skipped += 1
                del keep[i]
                for j in keep[i:]:
                    offset, line, skips, start = after[j]
                    after[j] = (offset, line, skips + 1, start)

    def _arrow_chunk(self, n: int) -> tuple[list[np.ndarray], _After] | None:
        """Up to ``n`` records of a block that pyarrow decoded, as :meth:`_chunk` returns
        them; ``None`` where the next records go the other ways (no pyarrow, or the
        engine declined their block: see :mod:`feedline.formats.csv_arrow`)."""
        if self._block is None:
            if self._engine is None:
                self._engine = bool(self._arrow and self._whole_chunks) and (
                    csv_arrow.ArrowDecoder.create(self._cols, self._delim, self._quote,
                                                  self._na, self._select) or False)
            if not self._engine or self._lines.tell() < self._declined:
                return None
            engine = cast(csv_arrow.ArrowDecoder, self._engine)
            shrink, here = self._shrink, self._lines.tell()
            while shrink and shrink[-1][0] <= here:
                shrink.pop()
            size, last = (shrink[-1][1] if shrink else self._arrow_block), None
            while True:
                raw, starts, first = self._lines.read_block(size)
                if not raw:
                    return None
                columns = engine.decode(raw, len(starts) - 1)
                if columns is not None:
                    break
                self._lines.unread_block(raw, starts, first)
                if (len(raw) <= self._arrow_min_block or len(starts) <= 2
                        or (last is not None and len(raw) >= last)):
                    self._declined = int(starts[-1])
                    return None
                size, last = max(len(raw) // 8, 1), len(raw)
                shrink.append((int(starts[-1]), size))  # up to its end: smaller blocks
            self._block = [columns, starts, first, 0]
        columns, starts, first, pos = self._block
        end = min(pos + n, len(starts) - 1)
        if end == len(starts) - 1:
            self._block = None
        else:
            self._block[3] = end
        if pos or self._block is not None:
            columns = [c[pos:end] for c in columns]
        return columns, _After(starts[pos : end + 1], first + pos, self._skipped)

    def _find_bad(self, recs: list[bytes], where: list[tuple[int, int]]) -> dict:
        """The first error (class and message) of each record of ``recs`` that does not
        decode, by index, found field by field in Python (cheap next to decoding records
        one by one)."""
        problems: dict[int, tuple[type, str]] = {}  # the error is built only to be shown

        def fail(k: int, cls: type, message: str) -> None:
            if k not in problems:
                problems[k] = (cls, message)

        want = len(self._cols) if self._select is None else self._select[-1] + 1
        rows: list[tuple[int, list[bytes]]] = []
        for k, rec in enumerate(recs):
            try:
                fields = (_split_quoted(rec, self._delim) if self._quote and b'"' in rec
                          else rec.split(self._delim))
            except _Syntax as exc:
                fail(k, DecodeError, str(exc))
                continue
            if len(fields) != want if self._select is None else len(fields) < want:
                fail(k, DecodeError, f"expected {want} fields, found {len(fields)}")
                continue
            rows.append((k, fields))
        numbers_ = self._select if self._select is not None else range(len(self._cols))
        for col, number in zip(self._cols, numbers_):
            for k, fields in rows:
                field = fields[number]
                if field == b"" or field == self._na:
                    if col.default is None:
                        fail(k, MissingFeatureError,
                             f"field {number} ({col.dtype}) is required but missing")
                elif col.dtype != "string":
                    try:
                        _parse_number(field, col.dtype)
                    except (ValueError, OverflowError):
                        fail(k, DecodeError,
                             f"field {number} is not a valid {col.dtype}: {field[:40]!r}")
        return problems

    def _chunk_prefix(self, recs, where, after, exc):
        """Raise mode: decode the records before the bad one that raised ``exc`` and
        move the line reader back to the bad record (it raises on the next call);
        raise ``exc`` now if it is the first record."""
        while True:
            k = next(i for i, w in enumerate(where) if w[0] == exc.line)
            self._rewind((where[k][1], where[k][0] - 1))
            if k == 0:
                raise exc
            recs, where, after = recs[:k], where[:k], after[:k]
            try:
                return self._decode_records(recs, where), after
            except DataError as again:
                exc = again

    def __next__(self) -> Any:
        if self.batch_size is not None:
            while True:
                got = self._chunk(self.batch_size)
                if got is None:
                    raise StopIteration
                columns, after = got
                if after:
                    if self.with_key:
                        return [f"{self.path}:{a[3]}" for a in after], columns
                    return columns
        while self._j >= len(self._rows):
            got = self._chunk(256)
            if got is None:
                raise StopIteration
            columns, after = got
            self._rows = list(zip(*[c.tolist() for c in columns])) if after else []
            self._row_states = after
            self._j = 0
        row = self._rows[self._j]
        self._j += 1
        if self.with_key:
            return f"{self.path}:{self._row_states[self._j - 1][3]}", row
        return row

    def get_state(self) -> dict[str, Any]:
        if 0 < self._j < len(self._rows):
            offset, line, skipped = self._row_states[self._j - 1][:3]
        elif self._block is not None:  # records of a pyarrow block are still to come
            starts, first, pos = self._block[1:]
            offset, line, skipped = int(starts[pos]), first - 1 + pos, self._skipped
        else:
            offset, line, skipped = self._lines.tell(), self._lines.line_number, self._skipped
        return {
            "type": "csv",
            "offset": offset,
            "line": line,
            "skipped": skipped,
            "header_read": self.column_names is not None,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        """Resume at a position :meth:`get_state` returned.

        Args:
            state: a ``{"type": "csv", "offset", "line", ...}`` dict from
                :meth:`get_state`; another type or a missing or negative field raises
                :class:`~feedline.exceptions.StateError`.
        """
        check_state(state, "csv", ("offset", "line"))
        self._lines.set_state({"type": "text", "offset": state["offset"], "line": state["line"]})
        self._rows, self._row_states, self._j = [], [], 0
        self._block, self._shrink, self._declined = None, [], -1
        self._skipped = state_int({"skipped": 0, **state}, "skipped", "csv")
        if state.get("header_read") and self.column_names is None:
            self.column_names = []

    def close(self) -> None:
        lines = getattr(self, "_lines", None)
        if lines is not None:
            lines.close()


@takes_arguments_of(CSVReader)
def read_csv(*args: Any, **kwargs: Any) -> CSVReader:
    """Read the CSV file ``path`` with :func:`decode_csv`'s typing rules.

    Returns a :class:`CSVReader`, whose options these are. Errors name the path, the line
    where the record starts and its byte offset. The reader's state is the byte offset
    and line of the next record.

    Args:
        path: a local path or an fsspec URL (``s3://``, ``gs://``, ``memory://``,
            ``file://``); the file is opened on the first read.
        record_defaults: one entry per column, as :func:`decode_csv` takes them.
        header: true skips the first record and keeps its fields in ``column_names``.
        batch_size: ``None`` (the default) yields one tuple of Python values per record
            (``int``, ``float``, ``bytes``); an int yields a list of numpy columns per
            batch of that many records.
        field_delim: the delimiter, one character (default ``","``).
        use_quote_delim: true (the default) follows RFC 4180 quoting; a quoted field may
            span lines.
        na_value: a field equal to this (default ``""``) takes the column default.
        select_cols: the columns to decode, as for :func:`decode_csv`.
        compression: ``"auto"`` (the default), ``None``, ``"GZIP"`` or ``"ZLIB"``.
        on_error: ``"raise"`` (the default), ``"skip"`` or ``"warn"``: a bad record is
            then skipped and counted in ``skipped`` (see below).
        storage_options: passed to fsspec for a URL.
        skip_header_lines: leaves out that many lines at the start of the file (before
            ``header``'s record).
        with_key: true yields ``(key, row)`` with ``key = "<path>:<line>"``, the line
            where the record starts (with ``batch_size``: ``(keys, columns)``), as
            TensorFlow's readers return ``(key, value)``.

    On damage: under ``on_error="raise"`` the good records before a bad one are yielded
    first and the error is raised when the bad one is reached (the state then points at
    it). Under ``"skip"``/``"warn"`` a bad record costs only itself: a quote left open
    (to the end of the file, or closed by a later line into a record that does not split
    into the expected fields) costs only its own line, and reading goes on at the next
    one.

    Engines (the output is the same whichever runs; only the speed differs): where
    pyarrow is installed, blocks of about 1 MiB of whole lines are parsed by pyarrow's
    threaded CSV reader (:mod:`feedline.formats.csv_arrow`), in batch and per-record mode
    alike, when a check of the block's bytes shows that pyarrow reads it exactly as the
    reference does: no ``"`` (with ``use_quote_delim``), no ``\\r`` but before ``\\n``,
    no empty line, no ``0x`` where an int column is read, no ``nan(`` where a float
    column is, every field parsing, no missing value in a column without a default, and
    an ASCII ``field_delim`` and ``na_value``. A block that fails is tried again in
    eighths down to 64 KiB, and the part that still fails, like every block without
    pyarrow, is split and converted column by column with numpy where its records are
    one-line and quote-free, and otherwise decoded record by record (the reference,
    which gives the errors, skips, lines and offsets). Batches hold the same records
    whichever engine reads them, and states resume exactly at any record.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "t.csv")
    >>> _ = open(path, "w").write('id,name\\n1,"multi\\nline"\\n2,\\n')
    >>> list(read_csv(path, [0, "?"], header=True))
    [(1, b'multi\\nline'), (2, b'?')]
    >>> [(k.rsplit(":", 1)[1], row) for k, row in read_csv(path, [0, "?"], skip_header_lines=1,
    ...                                                     with_key=True)]
    [('2', (1, b'multi\\nline')), ('4', (2, b'?'))]
    """
    return CSVReader(*args, **kwargs)
