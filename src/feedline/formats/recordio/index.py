"""RecordIO random access: ``.idx`` files and :class:`IndexedRecordIO` (see
:mod:`feedline.recordio`)."""

from __future__ import annotations

import os
import threading
from typing import Any

from feedline._internal.atomic import replace_file
from feedline._internal.closing import Closeable
from feedline._internal.on_error import check_on_error
from feedline._internal.validate import one_of, record_index
from feedline.exceptions import CorruptRecordError
from feedline.formats.recordio.stream import (
    HEADER,
    LENGTH_MASK,
    MAGIC,
    MAGIC_BYTES,
    RecordIOWriter,
    Scan,
    Window,
    iter_records,
)
from feedline.storage.compression import local_path
from feedline.storage.fs import open_file

__all__ = ["IndexedRecordIO", "read_index", "build_index", "default_idx_path"]


# --------------------------------------------------------------------------- random access


def _read_record_at(fd: int, offset: int, size: int, path: str, index: int | None) -> bytes:
    """Read the whole record starting at ``offset`` with positional reads."""
    pieces = []
    cur = offset
    part = 0
    if offset + 8 > size:
        raise CorruptRecordError(
            f"the index points at byte {offset}, beyond the file's {size} bytes",
            path=path, index=index, offset=offset,
        )
    while True:
        head = os.pread(fd, 8, cur)
        if len(head) < 8:
            raise CorruptRecordError(
                f"truncated record header at byte {cur}: {len(head)} of 8 bytes",
                path=path, index=index, offset=offset,
            )
        magic, lrec = HEADER.unpack(head)
        if magic != MAGIC:
            raise CorruptRecordError(
                f"bad magic word 0x{magic:08x} at byte {cur} (expected 0x{MAGIC:08x})",
                path=path, index=index, offset=offset,
            )
        cflag, length = lrec >> 29, lrec & LENGTH_MASK
        expected = (0, 1) if part == 0 else (2, 3)
        if cflag not in expected:
            raise CorruptRecordError(
                f"part {part} at byte {cur} has cflag {cflag}, expected "
                f"{' or '.join(map(str, expected))}",
                path=path, index=index, offset=offset,
            )
        if cur + 8 + length > size:
            raise CorruptRecordError(
                f"truncated record: part {part} needs {length} bytes, the file has "
                f"{max(size - cur - 8, 0)}",
                path=path, index=index, offset=offset,
            )
        data = os.pread(fd, length, cur + 8) if length else b""
        if part:
            pieces.append(MAGIC_BYTES)
        pieces.append(data)
        if cflag in (0, 3):
            return data if part == 0 else b"".join(pieces)
        cur += 8 + ((length + 3) & ~3)
        part += 1


def read_index(idx_path: str | os.PathLike, *, key_type: type = int,
               storage_options: dict | None = None) -> list[tuple[Any, int]]:
    """Parse an ``.idx`` file into ``[(key, offset), ...]`` in file order.

    Each line is ``key<TAB>offset``; blank lines are ignored; anything else raises
    :class:`CorruptRecordError` naming the line.

    Args:
        idx_path: a local path or a URL.
        key_type: called on each key's text to make the key (default ``int``); a key it
            rejects (``ValueError``/``TypeError``) raises :class:`CorruptRecordError`.
        storage_options: passed to fsspec for a URL; with a ``"cache_dir"`` the file is
            read through the node-local cache.

    >>> import os, tempfile
    >>> p = os.path.join(tempfile.mkdtemp(), "a.idx")
    >>> _ = open(p, "w").write("7\\t0\\n3\\t16\\n")
    >>> read_index(p)
    [(7, 0), (3, 16)]
    """
    idx_path = os.fspath(idx_path)
    entries = []
    pos = 0
    with open_file(idx_path, "rb", storage_options=storage_options) as f:
        for lineno, raw in enumerate(f, 1):
            start, pos = pos, pos + len(raw)
            try:
                text = raw.decode("utf-8").strip()
            except UnicodeDecodeError as exc:
                raise CorruptRecordError(
                    f"bad index line {raw[:40]!r}: not UTF-8 ({exc.reason})",
                    path=idx_path, line=lineno, offset=start,
                ) from exc
            if not text:
                continue
            fields = text.split("\t")
            try:
                if len(fields) != 2:
                    raise ValueError(f"expected 2 tab-separated fields, got {len(fields)}")
                key = key_type(fields[0])
                offset = int(fields[1])
                if offset < 0:
                    raise ValueError(f"negative offset {offset}")
                if offset >= 1 << 63:
                    raise ValueError(f"offset {offset} is beyond any file")
            except (ValueError, OverflowError, TypeError) as exc:
                raise CorruptRecordError(
                    f"bad index line {text[:80]!r}: {exc}", path=idx_path, line=lineno,
                    offset=start,
                ) from exc
            entries.append((key, offset))
    return entries


class IndexedRecordIO(Closeable):
    """A RecordIO file with its ``.idx`` file, as ``MXIndexedRecordIO(idx_path, rec_path,
    mode)``.

    ``keys`` lists keys in file order; with duplicate keys ``read_idx`` returns the
    last record written under the key (as MXNet does) and ``ir[i]`` the i-th line's.

    Args:
        idx_path: the ``.idx`` file, local (a path or a ``file://`` URL): positional
            reads need a file descriptor, and a remote URL raises ``ValueError``. Read
            remote RecordIO files sequentially with :func:`read` (``storage_options=...``).
        rec_path: the ``.rec`` file, local as well.
        mode: ``"r"`` (the default) reads by key (``read_idx``) or by position (``ir[i]``,
            ``len(ir)``) with two positional reads per record, safe from several threads,
            and picklable (file handles reopen lazily); ``"w"`` creates both files
            (``write_idx(key, payload)`` appends the record and a ``key<TAB>offset`` line,
            byte-identical to MXNet). Anything else raises ``ValueError``.
        key_type: the type of the keys (default ``int``): called on each key read from the
            index, and on each key given to ``write_idx``.

    >>> import os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> idx, rec = os.path.join(d, "a.idx"), os.path.join(d, "a.rec")
    >>> with IndexedRecordIO(idx, rec, "w") as w:
    ...     for key in (10, 5, 7):
    ...         w.write_idx(key, b"payload %d" % key)
    >>> open(idx).read()
    '10\\t0\\n5\\t20\\n7\\t40\\n'
    >>> r = IndexedRecordIO(idx, rec, "r")
    >>> r.keys, r.read_idx(5), r[0], len(r)
    ([10, 5, 7], b'payload 5', b'payload 10', 3)
    """

    def __init__(
        self,
        idx_path: str | os.PathLike,
        rec_path: str | os.PathLike,
        mode: str = "r",
        *,
        key_type: type = int,
    ) -> None:
        self.idx_path = local_path(idx_path, "IndexedRecordIO", "feedline.recordio.read")
        self.rec_path = local_path(rec_path, "IndexedRecordIO", "feedline.recordio.read")
        self.mode = one_of("mode", mode, ("r", "w"))
        self.key_type = key_type
        self.keys: list[Any] = []
        self._offsets: list[int] = []
        self._index: dict[Any, int] = {}  # key -> position in keys (last wins)
        self._fd: int | None = None
        self._writer: RecordIOWriter | None = None
        self._fidx: Any = None
        self._lock = threading.Lock()
        if mode == "w":
            self._writer = RecordIOWriter(self.rec_path)
            self._fidx = open(self.idx_path, "w", encoding="utf-8", newline="")  # noqa: SIM115
        else:
            for key, offset in read_index(self.idx_path, key_type=key_type):
                self._index[key] = len(self.keys)
                self.keys.append(key)
                self._offsets.append(offset)
            self._size = os.path.getsize(self.rec_path)

    # -- writing
    def write_idx(self, key: Any, payload: bytes | bytearray | memoryview) -> None:
        """Append ``payload`` as a record and ``key<TAB>offset`` to the index.

        Args:
            key: the record's key, converted by ``key_type``; one whose text holds a tab
                or a newline raises ``ValueError``.
            payload: the record's bytes, bytes-like.

        Raises:
            ValueError: the file is open in mode ``"r"``.
        """
        if self._writer is None:
            raise ValueError(f"{self.rec_path}: write_idx needs mode 'w', this is mode {self.mode!r}")
        key = self.key_type(key)
        text = str(key)
        if "\t" in text or "\n" in text or "\r" in text:
            raise ValueError(f"`key` must not contain tabs or newlines, got {text!r}")
        offset = self._writer.write(payload)
        self._fidx.write(f"{text}\t{offset}\n")
        self._index[key] = len(self.keys)
        self.keys.append(key)
        self._offsets.append(offset)

    def tell(self) -> int:
        """Offset the next ``write_idx`` record will start at (mode ``"w"``)."""
        if self._writer is None:
            raise ValueError(f"{self.rec_path}: tell needs mode 'w'")
        return self._writer.tell()

    # -- reading
    def offset(self, key: Any) -> int:
        """Byte offset of the record stored under ``key``.

        Args:
            key: a key of the index (the last record written under it counts); an unknown
                key raises ``KeyError``.
        """
        try:
            return self._offsets[self._index[key]]
        except KeyError:
            raise KeyError(f"{self.idx_path}: no record with key {key!r}") from None

    def _read_at(self, position: int) -> bytes:
        if self.mode != "r":
            raise ValueError(f"{self.rec_path}: reading needs mode 'r'")
        fd = self._fd
        if fd is None:
            with self._lock:
                if self._fd is None:
                    self._fd = os.open(self.rec_path, os.O_RDONLY)
                fd = self._fd
        return _read_record_at(fd, self._offsets[position], self._size, self.rec_path, position)

    def read_idx(self, key: Any) -> bytes:
        """The payload stored under ``key``.

        Args:
            key: a key of the index (the last record written under it counts); an unknown
                key raises ``KeyError``.
        """
        try:
            position = self._index[key]
        except KeyError:
            raise KeyError(f"{self.idx_path}: no record with key {key!r}") from None
        return self._read_at(position)

    def __len__(self) -> int:
        return len(self.keys)

    def __getitem__(self, position: int) -> bytes:
        """The payload of the ``position``-th index line (negative counts from the end)."""
        return self._read_at(record_index("position", position, len(self.keys),
                                          what="record position"))

    # -- lifecycle
    def close(self) -> None:
        """Close the files (flushing both in mode ``"w"``); idempotent."""
        writer = getattr(self, "_writer", None)
        if writer is not None:
            writer.close()
            self._writer = None
        if getattr(self, "_fidx", None) is not None:
            self._fidx.close()
            self._fidx = None
        fd = getattr(self, "_fd", None)
        if fd is not None:
            os.close(fd)
            self._fd = None

    def __getstate__(self) -> dict[str, Any]:
        if self.mode != "r":
            raise TypeError("an IndexedRecordIO in mode 'w' cannot be pickled")
        state = self.__dict__.copy()
        state["_fd"] = None
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()


def default_idx_path(rec_path: str | os.PathLike) -> str:
    """``x.rec`` -> ``x.idx`` (as im2rec names them); other names get ``.idx`` appended.

    Args:
        rec_path: the RecordIO file's path.

    >>> default_idx_path("data/train.rec"), default_idx_path("data/train.bin")
    ('data/train.idx', 'data/train.bin.idx')
    """
    rec_path = os.fspath(rec_path)
    root, ext = os.path.splitext(rec_path)
    return root + ".idx" if ext == ".rec" else rec_path + ".idx"


def build_index(
    rec_path: str | os.PathLike,
    idx_path: str | os.PathLike | None = None,
    *,
    on_error: str = "raise",
) -> int:
    """Scan ``rec_path`` and write its ``.idx`` (keys 0, 1, 2, ... in file order);
    return the number of records. The index is written to a temporary file and renamed,
    so a failed scan leaves no index behind.

    Args:
        rec_path: a local RecordIO file.
        idx_path: where to write the index; ``None`` (the default) means
            :func:`default_idx_path` of ``rec_path``.
        on_error: ``"raise"`` (the default), ``"skip"`` or ``"warn"``: what a damaged
            record does (skipped ones are left out of the index); anything else raises
            ``ValueError``.

    >>> import os, tempfile
    >>> rec = os.path.join(tempfile.mkdtemp(), "b.rec")
    >>> with RecordIOWriter(rec) as w:
    ...     _ = [w.write(b"x" * i) for i in range(3)]
    >>> build_index(rec), open(rec[:-4] + ".idx").read()
    (3, '0\\t0\\n1\\t8\\n2\\t20\\n')
    """
    rec_path = os.fspath(rec_path)
    idx_path = default_idx_path(rec_path) if idx_path is None else os.fspath(idx_path)
    on_error = check_on_error(on_error)
    win = Window([(rec_path, os.path.getsize(rec_path))])
    try:
        lines = [
            f"{i}\t{start}\n"
            for i, (_, start) in enumerate(iter_records(win, on_error, 0, Scan()))
        ]
    finally:
        win.close()
    replace_file(idx_path, "".join(lines).encode("utf-8"))
    return len(lines)
