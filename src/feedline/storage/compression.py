"""Opening files for the record and text readers, and whole-file GZIP and ZLIB streams.

:func:`open_reader` opens a local path or an fsspec URL (through
:func:`feedline.storage.fs.open_file`), detecting the compression from the first bytes on
request; :func:`stream_size` measures an open file; :func:`local_path` guards the
random-access classes, which need local files.

Compression is named as TensorFlow names it: ``None`` (or ``""``) for none, ``"GZIP"``
and ``"ZLIB"`` (case-insensitive); readers also accept ``"auto"``, which looks at the
first bytes (:func:`sniff`). A compressed file is one stream over the whole file (as
``TFRecordOptions(compression_type=...)`` writes it); concatenated streams (``cat
a.gz b.gz``) read as one.

:class:`DecompressReader` is a forward-only binary stream whose ``read(n)`` returns
exactly ``n`` bytes unless the data ends; damage (a bad header, a bad checksum, a stream
cut short) raises :class:`~feedline.exceptions.CorruptRecordError` naming the path and
the uncompressed offset reached. It never decompresses more than it was asked for plus
one chunk, so a "zip bomb" costs no more memory than an honest file.

>>> import io, zlib
>>> sniff(zlib.compress(b"x")), sniff(b"\\x1f\\x8b\\x08"), sniff(b"plain")
('ZLIB', 'GZIP', None)
>>> r = DecompressReader(io.BytesIO(zlib.compress(b"hello world")), "ZLIB", path="m")
>>> r.read(5), r.read(100), r.read(1)
(b'hello', b' world', b'')
"""

from __future__ import annotations

import io
import os
import zlib
from collections.abc import Callable
from typing import IO, Any, BinaryIO

from feedline.exceptions import CorruptRecordError
from feedline.storage.fs import is_remote, open_file, strip_file_scheme

__all__ = [
    "COMPRESSIONS",
    "normalize",
    "sniff",
    "window_bits",
    "DecompressReader",
    "CompressWriter",
    "open_reader",
    "stream_size",
    "local_path",
    "compression_property",
    "open_writer",
]

#: Accepted compression names after :func:`normalize` (``None`` means uncompressed).
COMPRESSIONS = (None, "GZIP", "ZLIB")

_CHUNK = 1 << 16
_WBITS = {"GZIP": 31, "ZLIB": 15}


def normalize(value: Any, *, allow_auto: bool, name: str = "compression") -> str | None:
    """Return ``None``, ``"GZIP"``, ``"ZLIB"`` (or ``"auto"`` when allowed) for ``value``.

    Args:
        value: ``None`` or ``""`` (no compression), or a name compared case-insensitively;
            a non-string raises ``TypeError``, an unknown name ``ValueError``.
        allow_auto: accept ``"auto"`` (any case).
        name: the option's name in the error message.

    >>> normalize("gzip", allow_auto=False), normalize("", allow_auto=False)
    ('GZIP', None)
    >>> normalize("lz4", allow_auto=True)
    Traceback (most recent call last):
    ...
    ValueError: `compression` must be one of None, 'GZIP', 'ZLIB', 'auto', got 'lz4'
    """
    if value is None or value == "":
        return None
    choices = "None, 'GZIP', 'ZLIB'" + (", 'auto'" if allow_auto else "")
    if not isinstance(value, str):
        raise TypeError(f"`{name}` must be one of {choices}, got {value!r}")
    upper = value.upper()
    if upper in ("GZIP", "ZLIB"):
        return upper
    if allow_auto and value.lower() == "auto":
        return "auto"
    raise ValueError(f"`{name}` must be one of {choices}, got {value!r}")


def window_bits(compression: str) -> int:
    """The ``wbits`` argument of :func:`zlib.decompressobj` for ``"GZIP"`` or ``"ZLIB"``.

    Args:
        compression: ``"GZIP"`` or ``"ZLIB"`` as :func:`normalize` returns them; anything
            else raises ``KeyError``.

    >>> window_bits("GZIP"), window_bits("ZLIB")
    (31, 15)
    """
    return _WBITS[compression]


def sniff(head: bytes) -> str | None:
    """Guess the compression from a file's first bytes: ``"GZIP"`` for the gzip magic
    ``1f 8b 08`` (deflate), ``"ZLIB"`` for a valid zlib header (deflate, window <= 32 KiB, header
    checksum divisible by 31), else ``None``.

    Formats whose own header could look like a zlib header (a TFRecord whose first
    length byte is ``0x78``) must be checked by the caller first.

    Args:
        head: the file's first bytes (3 suffice).

    >>> import gzip, zlib
    >>> sniff(gzip.compress(b"x")), sniff(zlib.compress(b"x")), sniff(b"plain text")
    ('GZIP', 'ZLIB', None)
    """
    if head[:3] == b"\x1f\x8b\x08":
        return "GZIP"
    if len(head) >= 2:
        cmf, flg = head[0], head[1]
        if cmf & 0x0F == 8 and cmf >> 4 <= 7 and ((cmf << 8) | flg) % 31 == 0 and not flg & 0x20:
            return "ZLIB"
    return None


class DecompressReader(io.RawIOBase):
    """Forward-only stream of the decompressed bytes of a GZIP or ZLIB file object.

    ``position`` is the number of decompressed bytes returned so far. ``skip(n)`` moves
    forward by decompressing and dropping. ``close()`` closes the underlying file.

    Args:
        fileobj: the compressed binary file, read forward in 64 KiB chunks.
        compression: ``"GZIP"`` or ``"ZLIB"``; anything else raises ``ValueError``.
        path: named in :class:`~feedline.exceptions.CorruptRecordError` messages.

    >>> import io, zlib
    >>> r = DecompressReader(io.BytesIO(zlib.compress(b"0123456789")), "ZLIB")
    >>> r.read(3), r.position
    (b'012', 3)
    >>> r.skip(4)
    4
    >>> r.read(), r.position
    (b'789', 10)
    >>> r.close()
    """

    def __init__(self, fileobj: IO[bytes], compression: str, *, path: str | None = None) -> None:
        if compression not in _WBITS:
            raise ValueError(f"`compression` must be 'GZIP' or 'ZLIB', got {compression!r}")
        self._f = fileobj
        self._compression = compression
        self._path = path
        self._d = zlib.decompressobj(_WBITS[compression])
        self._input = b""  # compressed bytes not yet given to the decompressor
        self._started = False  # the current stream has consumed input
        self._done = False
        self._failed: CorruptRecordError | None = None
        self._produced = 0  # bytes decompressed so far (some may not be returned yet)
        self.position = 0

    def readable(self) -> bool:
        return True

    def _error(self, message: str, exc: BaseException | None = None) -> CorruptRecordError:
        """Build the error and remember it: every later read raises it again."""
        err = CorruptRecordError(
            f"{self._compression} stream: {message} (after {self._produced} decompressed bytes)",
            path=self._path,
        )
        if exc is not None:
            err.__cause__ = exc
        self._failed = err
        return err

    def _decompress_some(self, want: int) -> bytes:
        """Return up to ``want`` (> 0) new decompressed bytes; ``b""`` only at the end."""
        if self._failed is not None:
            raise self._failed
        while not self._done:
            if self._d.eof:
                rest = self._d.unused_data + self._input
                self._input = b""
                if not rest:
                    rest = self._f.read(_CHUNK)
                if not rest:
                    self._done = True
                    break
                # Another stream follows (concatenated members).
                self._d = zlib.decompressobj(_WBITS[self._compression])
                self._input = rest
                self._started = False
                continue
            data = self._d.unconsumed_tail or self._input
            self._input = b""
            if not data:
                data = self._f.read(_CHUNK)
                if not data:
                    if not self._started:
                        self._done = True
                        break
                    raise self._error("the compressed data ends before the stream does")
            self._started = True
            try:
                out = self._d.decompress(data, want)
            except zlib.error as exc:
                raise self._error(str(exc), exc) from exc
            if out:
                self._produced += len(out)
                return out
        return b""

    def read(self, size: int = -1) -> bytes:
        """Return ``size`` bytes (all remaining when ``size < 0``), fewer only at the end.
        Damage raises :class:`~feedline.exceptions.CorruptRecordError`, after the bytes
        that decompressed cleanly were returned.

        Args:
            size: bytes wanted; negative or ``None`` reads to the end.
        """
        if size is None or size < 0:
            parts = []
            while True:
                chunk = self._decompress_some(1 << 20)
                if not chunk:
                    break
                parts.append(chunk)
            out = b"".join(parts)
        else:
            parts = []
            need = size
            try:
                while need > 0:
                    chunk = self._decompress_some(need)
                    if not chunk:
                        break
                    parts.append(chunk)
                    need -= len(chunk)
            except CorruptRecordError:
                if not parts:
                    raise
                # return what decompressed cleanly; the next read raises the error
            out = parts[0] if len(parts) == 1 else b"".join(parts)
        self.position += len(out)
        return out

    def readinto(self, buffer: Any) -> int:
        """Fill ``buffer`` with the next bytes; the number written (fewer only at the end).

        Args:
            buffer: a writable buffer.
        """
        mv = memoryview(buffer).cast("B")
        data = self.read(len(mv))
        mv[: len(data)] = data
        return len(data)

    def skip(self, n: int) -> int:
        """Decompress and drop up to ``n`` bytes; return how many were dropped.

        Args:
            n: bytes to skip; fewer are dropped only at the end of the data.
        """
        dropped = 0
        while dropped < n:
            chunk = self._decompress_some(min(n - dropped, 1 << 20))
            if not chunk:
                break
            dropped += len(chunk)
        self.position += dropped
        return dropped

    def close(self) -> None:
        if not self.closed:
            self._f.close()
        super().close()


class CompressWriter(io.RawIOBase):
    """Writable stream that compresses into ``fileobj`` as one GZIP or ZLIB stream.

    GZIP output carries modification time 0, so equal input gives equal files.
    ``flush()`` emits a sync flush point (everything written so far can be decompressed);
    ``close()`` ends the stream and closes ``fileobj``.

    Args:
        fileobj: the binary file the compressed bytes go to.
        compression: ``"GZIP"`` or ``"ZLIB"``; anything else raises ``ValueError``.
        level: zlib's compression level, ``0``-``9``, or ``-1`` for zlib's default (6).

    >>> import io, gzip
    >>> class Keep(io.BytesIO):
    ...     def close(self): self.data = self.getvalue(); super().close()
    >>> raw = Keep()
    >>> w = CompressWriter(raw, "GZIP")
    >>> _ = w.write(b"hello "); _ = w.write(b"world"); w.close()
    >>> gzip.decompress(raw.data)
    b'hello world'
    >>> raw.data[4:8]                                   # mtime 0: reproducible bytes
    b'\\x00\\x00\\x00\\x00'
    """

    def __init__(self, fileobj: BinaryIO, compression: str, *, level: int = -1) -> None:
        if compression not in _WBITS:
            raise ValueError(f"`compression` must be 'GZIP' or 'ZLIB', got {compression!r}")
        self._f = fileobj
        self._c: zlib._Compress | None = zlib.compressobj(level, zlib.DEFLATED, _WBITS[compression])

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        """Compress ``data`` into the file; returns its length in bytes. ``ValueError``
        after :meth:`close`.

        Args:
            data: a bytes-like object.
        """
        if self._c is None:
            raise ValueError("I/O operation on closed file")
        out = self._c.compress(data)
        if out:
            self._f.write(out)
        return len(memoryview(data))

    def flush(self) -> None:
        if self.closed or self._c is None:
            return
        self._f.write(self._c.flush(zlib.Z_SYNC_FLUSH))
        self._f.flush()

    def close(self) -> None:
        if self.closed:
            return
        try:
            compressor, self._c = self._c, None
            assert compressor is not None  # cleared only here, and the stream is closed after
            self._f.write(compressor.flush(zlib.Z_FINISH))
        finally:
            self._f.close()
            super().close()


def open_reader(
    path: str | os.PathLike,
    compression: str | None,
    *,
    storage_options: dict | None = None,
    detect: Callable[[IO[bytes]], str | None] | None = None,
) -> tuple[Any, str | None]:
    """Open ``path`` for reading; return ``(stream, compression)``.

    The stream is the binary file itself when the compression is ``None``, else a
    :class:`DecompressReader` over it.

    Args:
        path: a local path or a URL (:func:`feedline.storage.fs.open_file`).
        compression: ``None``, ``"GZIP"``, ``"ZLIB"`` (as :func:`normalize` returns them)
            or ``"auto"``, which asks ``detect`` and rewinds before reading, so detecting
            costs no second open.
        storage_options: passed to :func:`~feedline.storage.fs.open_file`.
        detect: reads the start of the raw file and returns its compression; required
            with ``"auto"`` (else ``ValueError``).

    >>> import gzip, os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "a.gz")
    >>> with open(path, "wb") as f: _ = f.write(gzip.compress(b"payload"))
    >>> stream, found = open_reader(path, "auto", detect=lambda f: sniff(f.read(4)))
    >>> found, stream.read()
    ('GZIP', b'payload')
    >>> stream.close()
    """
    raw = open_file(path, "rb", storage_options=storage_options)
    try:
        if compression == "auto":
            if detect is None:
                raise ValueError("`compression='auto'` needs a `detect` function")
            compression = detect(raw)
            raw.seek(0)
        if compression is None:
            return raw, None
        return DecompressReader(raw, compression, path=os.fspath(path)), compression
    except BaseException:
        raw.close()
        raise


def stream_size(f: Any) -> int:
    """Size in bytes of a seekable binary file, leaving its position where it was.

    Args:
        f: the open file (local or fsspec).

    >>> import io
    >>> f = io.BytesIO(b"abcdef"); _ = f.seek(2)
    >>> stream_size(f), f.tell()
    (6, 2)
    """
    here = f.tell()
    end = f.seek(0, io.SEEK_END)
    f.seek(here)
    return end


def compression_property(open_method: str) -> property:
    """The ``compression`` property of a reader that opens its file lazily.

    The reader keeps the compression it was given in ``_compression``; its method named
    ``open_method`` opens the file and replaces ``"auto"`` there by what it found. The
    property returns ``None``, ``"GZIP"`` or ``"ZLIB"``, opening the file only when it
    must find out.

    Args:
        open_method: the name of the reader's method that opens the file.

    >>> class Reader:
    ...     compression = compression_property("_open")
    ...     def __init__(self): self._compression = "auto"
    ...     def _open(self): self._compression = "GZIP"     # what a real reader would detect
    >>> Reader().compression
    'GZIP'
    """

    def compression(self: Any) -> str | None:
        """The file's compression: ``None``, ``"GZIP"`` or ``"ZLIB"`` (with
        ``compression="auto"``, finding it out opens the file)."""
        if self._compression == "auto":
            getattr(self, open_method)()
        return self._compression

    return property(compression)


def local_path(path: str | os.PathLike, what: str, stream_reader: str) -> str:
    """``path`` without a ``file://`` scheme; ``ValueError`` for a remote URL, which the
    positional reads of random access cannot use.

    Args:
        path: a local path, ``file://`` URL or remote URL.
        what: the class that needs random access, named in the error.
        stream_reader: the sequential reader the error suggests instead, such as
            ``"feedline.recordio.read"``.

    >>> local_path("file:///data/a.rec", "IndexedRecordIO", "feedline.recordio.read")
    '/data/a.rec'
    >>> local_path("s3://b/a.rec", "IndexedRecordIO", "feedline.recordio.read")
    ... # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: IndexedRecordIO needs a local file for random access, got 's3://b/a.rec'; ...
    """
    p = os.fspath(path)
    if is_remote(p):
        raise ValueError(
            f"{what} needs a local file for random access, got {p!r}; read remote "
            f"files sequentially with {stream_reader}(path, storage_options=...) or copy "
            "them to a local disk first"
        )
    return strip_file_scheme(p)


def open_writer(path: str | os.PathLike, compression: str | None) -> Any:
    """Open ``path`` for writing through a 1 MiB buffer, compressing when asked.

    Args:
        path: a local path, created or truncated.
        compression: ``None``, ``"GZIP"`` or ``"ZLIB"`` (a :class:`CompressWriter` at
            zlib's default level).

    >>> import os, tempfile, zlib
    >>> path = os.path.join(tempfile.mkdtemp(), "a.z")
    >>> with open_writer(path, "ZLIB") as w: _ = w.write(b"data")
    >>> zlib.decompress(open(path, "rb").read())
    b'data'
    >>> with open_writer(path, None) as w: _ = w.write(b"raw")
    >>> open(path, "rb").read()
    b'raw'
    """
    buffered = open(path, "wb", buffering=1 << 20)  # noqa: SIM115 - returned to the caller
    if compression is None:
        return buffered
    return CompressWriter(buffered, compression)
