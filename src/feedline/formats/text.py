"""The implementation of :mod:`feedline.text`, whose page documents it: import the
public names from ``feedline.text``."""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterable
from typing import Any

import numpy as np

from feedline._internal.signature import takes_arguments_of
from feedline._internal.state import state_int
from feedline._internal.validate import check_bool, non_negative_int, positive_int
from feedline.dataset.iterator import DatasetIterator, check_state
from feedline.exceptions import CorruptRecordError, DecodeError
from feedline.storage import compression as _compression
from feedline.storage.fs import open_file

__all__ = ["TextLineReader", "read_lines", "write_lines", "detect_compression"]

_BLOCK = 1 << 20


def detect_compression(
    path: str | os.PathLike, *, storage_options: dict | None = None
) -> str | None:
    """``"GZIP"``, ``"ZLIB"`` or ``None`` for the file at ``path``: a gzip or zlib header
    whose first kilobytes actually decompress, or any such header in a file named
    ``*.gz``, ``*.zlib``, ...

    Args:
        path: a local path or a URL.
        storage_options: passed to fsspec for a URL (see :mod:`feedline.storage.fs`).

    >>> import gzip, os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> _ = open(os.path.join(d, "a.txt"), "wb").write(gzip.compress(b"x\\n"))
    >>> _ = open(os.path.join(d, "b.txt"), "wb").write(b"x^ is text\\n")
    >>> detect_compression(os.path.join(d, "a.txt")), detect_compression(os.path.join(d, "b.txt"))
    ('GZIP', None)
    """
    with open_file(path, "rb", storage_options=storage_options) as f:
        return _detect(f)


def _detect(f: Any) -> str | None:
    """Detect the compression from the first bytes of the open binary file ``f``.

    Text can start with bytes that look like a gzip or zlib header (``"x^"`` is a valid
    zlib header), so the magic alone decides only for a file named ``*.gz``/``*.gzip``
    (GZIP) or ``*.zz``/``*.zlib``/``*.z`` (ZLIB), where damage must raise rather than
    read as text. Any other file counts as compressed only if its first 4 KiB inflate
    without error and, when that is the whole file, form a complete stream.
    """
    head = f.read(4096)
    whole = not f.read(1)
    kind = _compression.sniff(head)
    if kind is None:
        return None
    name = str(getattr(f, "name", None) or getattr(f, "path", "")).lower()
    if name.endswith(_SUFFIXES[kind]):
        return kind
    d = zlib.decompressobj(_compression.window_bits(kind))
    try:
        d.decompress(head)
    except zlib.error:
        return None
    if whole and not d.eof:  # the whole file was seen and is no complete stream
        return None
    return kind


_SUFFIXES = {"GZIP": (".gz", ".gzip"), "ZLIB": (".zz", ".zlib", ".z")}


class TextLineReader(DatasetIterator[Any]):
    """Iterator over the lines of one text file (see the module docstring).

    ``line_number`` is the number of lines read so far. ``next_batch(n)`` returns up to
    ``n`` lines at once. The file is opened on first use (a read, ``set_state``, or
    asking for ``compression`` when it is ``"auto"``).

    Args:
        path: a local path or an fsspec URL (``s3://``, ``gs://``, ``memory://``,
            ``file://``).
        compression: ``"auto"`` (the default: see :func:`detect_compression`), ``None``,
            ``"GZIP"`` or ``"ZLIB"``; anything else raises ``ValueError``.
        encoding: ``None`` (the default) yields ``bytes`` lines; a codec name yields
            ``str`` lines (an unknown codec raises ``LookupError``; a line that does not
            decode raises :class:`~feedline.exceptions.DecodeError` naming path, line and
            byte offset).
        block_size: bytes read at a time, a positive int (default 1 MiB).
        storage_options: passed to fsspec for a URL (construction arguments, not state).
        skip_header_lines: leave out the first that many lines of the file (TF's
            ``TextLineReader(skip_header_lines=)``), a non-negative int (default 0).
        with_key: true yields ``(key, line)`` with ``key = "<path>:<line number>"``
            (1-based, counting skipped header lines), as TF's reader ``read()`` returns
            them; false (the default) yields lines. A non-bool raises ``TypeError``.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "t.txt.gz")
    >>> write_lines(path, ["alpha", "beta", "gamma"], compression="GZIP")
    3
    >>> r = TextLineReader(path, encoding="utf-8")
    >>> next(r), r.line_number, r.compression
    ('alpha', 1, 'GZIP')
    >>> state = r.get_state(); r.close()
    >>> r2 = TextLineReader(path, encoding="utf-8"); r2.set_state(state)
    >>> r2.next_batch(5)
    ['beta', 'gamma']
    >>> r2.close()
    """

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        compression: str | None = "auto",
        encoding: str | None = None,
        block_size: int = _BLOCK,
        storage_options: dict | None = None,
        skip_header_lines: int = 0,
        with_key: bool = False,
    ) -> None:
        self.path = os.fspath(path)
        self.skip_header_lines = non_negative_int("skip_header_lines", skip_header_lines)
        check_bool("with_key", with_key)
        self.with_key = with_key
        self._compression = _compression.normalize(compression, allow_auto=True)
        if encoding is not None:
            "".encode(encoding)  # LookupError for an unknown codec, now
        self.encoding = encoding
        self.block_size = positive_int("block_size", block_size)
        self.storage_options = storage_options
        self._file: Any = None  # opened on first use
        self._closed = False
        self._lines: list[bytes] = []
        self._starts = np.zeros(1, dtype=np.int64)  # offsets of self._lines[i], then end
        self._raw, self._raw_base = b"", 0  # the bytes self._lines were split from, offset
        self._buf = bytearray()  # read_block's buffer
        self._i = 0
        self._line0 = 0  # line number of self._lines[0]
        self._tail = b""  # bytes after the last newline seen
        self._tail_offset = 0  # offset of the first byte of the tail
        self._eof = False
        self._parked: int | None = None  # reopen here: an error released the file

    def _open(self) -> Any:
        """The open stream, opening the file (from its start) if it is not open yet."""
        if self._file is None:
            if self._closed:
                raise ValueError(f"{self.path}: read from a closed TextLineReader")
            self._file, self._compression = _compression.open_reader(
                self.path,
                self._compression,
                storage_options=self.storage_options,
                detect=_detect,
            )
            if self._parked is not None:
                parked, self._parked = self._parked, None
                if self._compression is None:
                    self._file.seek(parked)
                else:
                    self._file.skip(parked)
        return self._file

    compression = _compression.compression_property("_open")

    @property
    def line_number(self) -> int:
        return self._line0 + self._i

    def _fill(self) -> bool:
        self._line0 += len(self._lines)
        self._lines, self._i = [], 0
        raw, base = self._read_raw(self.block_size)
        if not raw:
            return False
        self._load(raw, base, self._line_starts(raw, base))
        return True

    def _read_raw(self, size: int) -> tuple[bytes, int]:
        """Read on to the end of the line holding the ``size``-th byte read (or to the
        end of the file): ``(the raw whole lines, the offset of their first byte)``,
        line endings kept (the last line of the file may have none); ``b""`` at the end.
        The bytes after the last newline wait in the tail."""
        file = self._open()
        while not self._eof:
            block = self._checked(file, file.read, size)
            if not block:
                self._eof = True
                break
            data = self._tail + block if self._tail else block
            cut = data.rfind(b"\n")
            if cut < 0:
                self._tail = data
                continue
            base = self._tail_offset
            self._tail = data[cut + 1 :]
            self._tail_offset = base + cut + 1
            return data[: cut + 1], base
        raw, base = self._tail, self._tail_offset
        self._tail_offset += len(raw)
        self._tail = b""
        return raw, base

    def _checked(self, file: Any, read: Any, arg: Any) -> Any:
        """``read(arg)``, a damaged compressed stream raising with the line and offset."""
        try:
            return read(arg)
        except CorruptRecordError as exc:
            # release the descriptor now; a later call reopens where the lines stopped
            self._file, self._parked, self._tail = None, self._tail_offset, b""
            file.close()
            raise CorruptRecordError(
                exc.message, path=self.path, line=self._line0 + 1, offset=self._tail_offset
            ) from exc

    def _read_view(self, size: int) -> tuple[memoryview, int]:
        """:meth:`_read_raw` into a buffer kept from call to call (fresh large ``bytes``
        cost a page fault per 4 KiB): a view valid until the next read."""
        file = self._open()
        tail, buf = self._tail, self._buf
        if len(buf) < len(tail) + size:
            buf = self._buf = bytearray(len(tail) + size)
        view = memoryview(buf)
        have = len(tail)
        view[:have] = tail
        cut = -1
        while not self._eof:
            got = self._checked(file, file.readinto, view[have:])
            if not got:
                self._eof = True
                break
            have += got
            cut = buf.rfind(b"\n", 0, have)
            if cut >= 0:
                break
            if have == len(buf):  # a line longer than size
                buf = self._buf = buf[:have] + bytearray(len(buf))
                view = memoryview(buf)
        end = have if self._eof else cut + 1
        base = self._tail_offset
        self._tail, self._tail_offset = bytes(view[end:have]), base + end
        return view[:end], base

    @staticmethod
    def _line_starts(raw: Any, base: int) -> np.ndarray:
        """The offset of each line of ``raw`` (read at ``base``), then of its end."""
        data = np.frombuffer(raw, dtype=np.uint8)
        newlines = np.flatnonzero(data == 10)
        starts = np.empty(len(newlines) + 1 + (data[-1] != 10), dtype=np.int64)
        starts[0] = base
        starts[1 : len(newlines) + 1] = newlines + (base + 1)
        starts[-1] = base + len(raw)
        return starts

    def _load(self, raw: bytes, base: int, starts: np.ndarray) -> None:
        """Make the whole lines ``raw`` (read at ``base``) the buffered lines."""
        body = raw[:-1] if raw.endswith(b"\n") else raw
        lines = body.split(b"\n")
        if b"\r" in body:
            lines = [ln[:-1] if ln.endswith(b"\r") else ln for ln in lines]
        self._lines, self._starts, self._raw, self._raw_base = lines, starts, raw, base

    def read_block(self, size: int) -> tuple[Any, np.ndarray, int]:
        """Consume the next whole lines, about ``size`` bytes of them, unsplit:
        ``(raw, starts, first)`` with ``raw`` the lines' bytes (a buffer: ``bytes`` or a
        ``memoryview`` valid until the next read), line endings kept (the last line of
        the file may have none), and ``starts`` and ``first`` as :meth:`peek_lines`
        gives them; ``raw`` is empty only at the end of the file. Lines already split
        by an earlier read come first, alone (at least one, then up to ``size`` bytes).
        For a parser that takes whole blocks; :meth:`unread_block` puts them back.

        Args:
            size: the bytes to read (more to end the last line), a positive int.

        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "b.txt")
        >>> _ = open(path, "wb").write(b"ab\\r\\ncd\\nlast")
        >>> r = TextLineReader(path)
        >>> raw, starts, first = r.read_block(1 << 20)
        >>> bytes(raw), starts.tolist(), first, r.line_number
        (b'ab\\r\\ncd\\n', [0, 4, 7], 1, 2)
        >>> r.unread_block(raw, starts, first); list(r)
        [b'ab', b'cd', b'last']
        >>> r.set_state({"type": "text", "offset": 4, "line": 1}); next(r)
        b'cd'
        >>> bytes(r.read_block(1 << 20)[0]), len(r.read_block(1 << 20)[0]), r.line_number
        (b'last', 0, 3)
        """
        size = positive_int("size", size)
        if self.skip_header_lines and self._line0 + self._i < self.skip_header_lines:
            self._skip_header()
        first = self._line0 + self._i + 1
        raw: Any
        i = self._i
        if i < len(self._lines):
            stop = int(np.searchsorted(self._starts, self._starts[i] + size, "right")) - 1
            stop = min(max(stop, i + 1), len(self._lines))
            starts = self._starts[i : stop + 1]
            raw = self._raw[int(starts[0]) - self._raw_base : int(starts[-1]) - self._raw_base]
            self._i = stop
        else:
            raw, base = self._read_view(size)
            starts = self._line_starts(raw, base) if raw else np.array([base])
            self._line0, self._lines, self._i = first - 2 + len(starts), [], 0
        return raw, starts, first

    def unread_block(self, raw: bytes, starts: np.ndarray, first: int) -> None:
        """Put back the block the last :meth:`read_block` returned: its lines are read
        again, split, by the other methods (no I/O).

        Args:
            raw: the ``raw`` of that call.
            starts: its ``starts``.
            first: its ``first``; a block other than the last one read raises
                ``ValueError``.
        """
        if self.tell() != int(starts[-1]) or self.line_number != first - 2 + len(starts):
            raise ValueError("unread_block: not the block the last read_block returned")
        if self._lines and self._i >= len(starts) - 1:  # it came from the split lines
            self._i -= len(starts) - 1
        elif raw:
            self._line0 = first - 1
            self._load(bytes(raw), int(starts[0]), starts)

    def _decode(self, line: bytes, k: int) -> Any:
        assert self.encoding is not None  # callers decode only with an encoding
        try:
            return line.decode(self.encoding)
        except UnicodeDecodeError as exc:
            raise DecodeError(
                f"line is not valid {self.encoding}: {exc.reason} at character {exc.start}",
                path=self.path,
                line=self._line0 + k + 1,
                offset=int(self._starts[k]),
            ) from exc

    def _skip_header(self) -> None:
        """Pass over the first ``skip_header_lines`` lines of the file, if not yet."""
        while self._line0 + self._i < self.skip_header_lines:
            if self._i >= len(self._lines) and not self._fill():
                return
            self._i += min(len(self._lines) - self._i,
                           self.skip_header_lines - self._line0 - self._i)

    def __next__(self) -> Any:
        if self.skip_header_lines and self._line0 + self._i < self.skip_header_lines:
            self._skip_header()
        i = self._i
        if i >= len(self._lines):
            if not self._fill():
                raise StopIteration
            i = 0
        line = self._lines[i]
        if self.encoding is not None:
            line = self._decode(line, i)
        self._i = i + 1
        if self.with_key:
            return f"{self.path}:{self._line0 + i + 1}", line
        return line

    def next_batch(self, n: int) -> list:
        """Return the next ``n`` lines (fewer at the end of the file; ``[]`` at the end).

        Args:
            n: the most lines to return (``(key, line)`` pairs with ``with_key``); ``0``
                or less returns ``[]``.
        """
        if self.skip_header_lines and self._line0 + self._i < self.skip_header_lines:
            self._skip_header()
        if self.with_key:
            first = self._line0 + self._i + 1
            lines = self._next_lines(n)
            return [(f"{self.path}:{first + k}", line) for k, line in enumerate(lines)]
        return self._next_lines(n)

    def _next_lines(self, n: int) -> list:
        out: list = []
        while len(out) < n:
            if self._i >= len(self._lines) and not self._fill():
                break
            take = self._lines[self._i : self._i + n - len(out)]
            if self.encoding is not None:
                take = [self._decode(line, self._i + k) for k, line in enumerate(take)]
            self._i += len(take)
            out.extend(take)
        return out

    def peek_lines(self, n: int) -> tuple[list[bytes], np.ndarray, int]:
        """Up to ``n`` of the next lines, not consumed: ``(lines, starts, first)`` with
        ``starts[k]`` the byte offset of ``lines[k]``, ``starts[len(lines)]`` the offset
        just after the last one, and ``first`` the 1-based number of ``lines[0]``. The
        lines come from one read block, so there may be fewer than ``n`` before the end
        of the file; ``[]`` only at the end. Lines are ``bytes`` whatever ``encoding``.
        :meth:`skip_lines` consumes them.

        Args:
            n: the most lines to return.

        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "p.txt")
        >>> _ = open(path, "wb").write(b"ab\\ncd\\n")
        >>> r = TextLineReader(path)
        >>> lines, starts, first = r.peek_lines(5)
        >>> lines, starts.tolist(), first
        ([b'ab', b'cd'], [0, 3, 6], 1)
        >>> r.skip_lines(1); next(r)
        b'cd'
        """
        if self.skip_header_lines and self._line0 + self._i < self.skip_header_lines:
            self._skip_header()
        if self._i >= len(self._lines) and not self._fill():
            return [], self._starts[:1], self._line0 + self._i + 1
        i = self._i
        lines = self._lines[i : i + n]
        return lines, self._starts[i : i + len(lines) + 1], self._line0 + i + 1

    def skip_lines(self, k: int) -> None:
        """Consume ``k`` lines returned by the last :meth:`peek_lines`.

        Args:
            k: how many, from 0 to the number of lines left in the block the last
                :meth:`peek_lines` read from; anything else raises ``ValueError``.
        """
        if not 0 <= k <= len(self._lines) - self._i:
            raise ValueError(f"skip_lines({k}): only {len(self._lines) - self._i} lines are "
                             "in the block peek_lines reads from")
        self._i += k

    def tell(self) -> int:
        """Byte offset (uncompressed stream) of the next line."""
        if self._i < len(self._lines):
            return int(self._starts[self._i])
        return self._tail_offset

    def get_state(self) -> dict[str, Any]:
        return {"type": "text", "offset": self.tell(), "line": self.line_number}

    def set_state(self, state: dict[str, Any]) -> None:
        """Resume at a position :meth:`get_state` returned.

        Args:
            state: a ``{"type": "text", "offset", "line"}`` dict from :meth:`get_state`;
                another type or a missing or negative field raises
                :class:`~feedline.exceptions.StateError`, a closed reader ``ValueError``.
        """
        check_state(state, "text", ("offset", "line"))
        if self._closed:
            raise ValueError(f"{self.path}: set_state on a closed TextLineReader")
        offset = state_int(state, "offset", "text")
        state_int(state, "line", "text")
        self._parked = None
        if self._file is not None and self._lines:  # a line still in the buffer: no I/O
            k = int(np.searchsorted(self._starts, offset))
            if (k <= len(self._lines) and int(self._starts[k]) == offset
                    and self._line0 + k == int(state["line"])):
                self._i = k
                return
        fresh = self._file is None
        file = self._open()
        if self._compression is None:
            file.seek(offset)
        else:
            if not fresh:  # decompressing cannot go back: start again
                self._file = None
                file.close()
                file = self._open()
            file.skip(offset)
        self._lines, self._i = [], 0
        self._line0 = int(state["line"])
        self._tail, self._tail_offset, self._eof = b"", offset, False

    def close(self) -> None:
        self._closed = True
        f = getattr(self, "_file", None)
        if f is not None:
            self._file = None
            f.close()


@takes_arguments_of(TextLineReader)
def read_lines(*args: Any, **kwargs: Any) -> TextLineReader:
    """Iterate over the lines of the text file ``path`` (see the module docstring).

    Returns a :class:`TextLineReader`, whose options these are.

    Args:
        path: a local path or an fsspec URL.
        compression: ``"auto"`` (the default), ``None``, ``"GZIP"`` or ``"ZLIB"``.
        encoding: ``None`` (the default) yields ``bytes``; a codec name yields ``str``.
        block_size: bytes read at a time (default 1 MiB).
        storage_options: passed to fsspec for a URL.
        skip_header_lines: leave out the first that many lines of the file (TF's
            ``TextLineReader(skip_header_lines=)``); default 0.
        with_key: true yields ``(key, line)`` with ``key = "<path>:<line number>"``
            (1-based, counting skipped header lines), as TF's reader ``read()`` returns
            them.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "h.txt")
    >>> _ = open(path, "wb").write(b"header\\na\\nb\\n")
    >>> [(k.rsplit(os.sep, 1)[1], v) for k, v in read_lines(path, skip_header_lines=1,
    ...                                                       with_key=True)]
    [('h.txt:2', b'a'), ('h.txt:3', b'b')]
    """
    return TextLineReader(*args, **kwargs)


def write_lines(
    path: str | os.PathLike,
    lines: Iterable[Any],
    *,
    compression: str | None = None,
    encoding: str = "utf-8",
) -> int:
    """Write ``lines``, each followed by ``\\n``; return how many.

    Args:
        path: the local file to create (an existing one is overwritten).
        lines: ``str`` or bytes-like lines. A line holding a newline raises
            ``ValueError`` (it would read back as two lines).
        compression: ``None`` (the default), ``"GZIP"`` or ``"ZLIB"``.
        encoding: the codec of ``str`` lines (default ``"utf-8"``); ``bytes`` are written
            as they are.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "t.txt")
    >>> write_lines(path, ["a", b"b"])
    2
    >>> list(open(path))
    ['a\\n', 'b\\n']
    >>> write_lines(path, ["two" + chr(10) + "lines"])
    Traceback (most recent call last):
    ...
    ValueError: line 1 holds a newline: ...
    """
    comp = _compression.normalize(compression, allow_auto=False)
    count = 0
    out = _compression.open_writer(path, comp)
    try:
        for line in lines:
            data = line.encode(encoding) if isinstance(line, str) else bytes(line)
            if b"\n" in data:
                raise ValueError(f"line {count + 1} holds a newline: {data[:40]!r}")
            out.write(data + b"\n")
            count += 1
    finally:
        out.close()
    return count
