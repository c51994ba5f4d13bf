"""What format a record file is in, found from its bytes (not its name).

``detect_format(path) -> (format, compression)``: TFRecord by its first header's length
CRC (also inside GZIP/ZLIB), MXNet RecordIO by its magic word, MNIST IDX by its header
(and, uncompressed, by its exact size), an MXNet ``.idx`` by its ``key<TAB>offset``
lines, a tar archive (WebDataset shards) by its first header's checksum and ``ustar``
magic (also inside GZIP), CSV and text by decoding as UTF-8, CIFAR-10 when the size is a multiple of 3073
bytes, otherwise ``"unknown"``. Local paths and fsspec URLs.

>>> import os, tempfile
>>> from feedline import tfrecord
>>> path = os.path.join(tempfile.mkdtemp(), "anything.bin")
>>> tfrecord.write(path, [b"ab", b"cde"], compression="GZIP")
2
>>> detect_format(path)
('tfrecord', 'GZIP')
"""

from __future__ import annotations

import math
import os
import struct
import zlib

from feedline.storage.fs import open_file

__all__ = ["detect_format", "FORMATS"]

#: every value ``detect_format`` can return as the format
FORMATS = ("tfrecord", "recordio", "recordio_idx", "idx", "tar", "csv", "text", "cifar10",
           "empty", "unknown")

_HEAD = 1 << 16
_RECORDIO_MAGIC = 0xCED7230A
_IDX_TYPES = {0x08: 1, 0x09: 1, 0x0B: 2, 0x0C: 4, 0x0D: 4, 0x0E: 8}
_CIFAR10_RECORD = 3073


def _head(path: str, storage_options: dict | None) -> tuple[bytes, int]:
    from feedline.storage.fs import file_size

    with open_file(path, "rb", storage_options=storage_options) as f:
        head = f.read(_HEAD)
    return head, file_size(path, storage_options=storage_options)


def _inflate_head(data: bytes, compression: str) -> bytes | None:
    d = zlib.decompressobj(31 if compression == "GZIP" else 15)
    try:
        return d.decompress(data, _HEAD)
    except zlib.error:
        return None


def _is_tfrecord(head: bytes) -> bool:
    from feedline.formats.tfrecord.scan import masked_crc

    return len(head) >= 12 and masked_crc(head[:8]) == struct.unpack_from("<I", head, 8)[0]


def _is_tar(head: bytes) -> bool:
    if len(head) < 512 or head[257:262] != b"ustar":
        return False
    try:
        stored = int(head[148:156].replace(b"\x00", b" ").strip(), 8)
    except ValueError:
        return False
    return stored == sum(head[:512]) - sum(head[148:156]) + 256


def _is_idx(head: bytes, size: int | None) -> bool:
    if len(head) < 4 or head[0] or head[1] or head[2] not in _IDX_TYPES or not 1 <= head[3] <= 8:
        return False
    ndim = head[3]
    if len(head) < 4 + 4 * ndim:
        return False
    dims = struct.unpack_from(f">{ndim}I", head, 4)
    if size is None:
        return True
    return 4 + 4 * ndim + _IDX_TYPES[head[2]] * math.prod(dims) == size


def _is_idx_line(line: bytes) -> bool:
    key, tab, offset = line.partition(b"\t")
    return bool(tab) and bool(key) and offset.isdigit()


def _text_kind(head: bytes, whole: bool) -> str | None:
    """``"recordio_idx"``, ``"csv"``, ``"text"`` or ``None`` (not text) for a file's
    first bytes."""
    if not head or b"\x00" in head:
        return None
    sample = head
    if not whole:  # drop a multi-byte character cut at the end of the sample
        sample = head[: head.rfind(b"\n") + 1] or head
    try:
        sample.decode("utf-8")
    except UnicodeDecodeError:
        return None
    from feedline.formats.csv import split_record

    lines = [ln.rstrip(b"\r") for ln in sample.split(b"\n") if ln.strip()][:20]
    if lines and all(_is_idx_line(ln) for ln in lines):
        return "recordio_idx"
    try:
        counts = {len(split_record(ln)) for ln in lines}
    except Exception:  # noqa: BLE001 - not CSV then
        return "text"
    return "csv" if len(counts) == 1 and counts.pop() > 1 else "text"


def detect_format(path: str | os.PathLike, *,
                  storage_options: dict | None = None) -> tuple[str, str | None]:
    """Return ``(format, compression)`` for the file at ``path``.

    ``format`` is one of ``"tfrecord"``, ``"recordio"``, ``"recordio_idx"`` (an MXNet
    ``.idx``: ``key<TAB>offset`` lines), ``"idx"`` (MNIST), ``"tar"``, ``"csv"``, ``"text"``,
    ``"cifar10"``, ``"empty"``, ``"unknown"``; ``compression`` is ``None``,
    ``"GZIP"`` or ``"ZLIB"`` (for TFRecord, IDX, CSV and text).

    Args:
        path: a local path or a URL; only its first bytes (and its size) are read, its
            name is not looked at. A missing file raises ``FileNotFoundError``.
        storage_options: passed to fsspec for a URL (see :mod:`feedline.storage.fs`).

    >>> import os, tempfile
    >>> from feedline import recordio
    >>> from feedline.tfrecord import write
    >>> d = tempfile.mkdtemp()
    >>> _ = write(os.path.join(d, "a.tfrecord"), [b"x"], compression="ZLIB")
    >>> with recordio.RecordIOWriter(os.path.join(d, "b.rec")) as w: _ = w.write(b"y")
    >>> with open(os.path.join(d, "c.txt"), "w") as f: _ = f.write("hello" + chr(10))
    >>> open(os.path.join(d, "e.bin"), "w").close()
    >>> [detect_format(os.path.join(d, n)) for n in ("a.tfrecord", "b.rec", "c.txt", "e.bin")]
    [('tfrecord', 'ZLIB'), ('recordio', None), ('text', None), ('empty', None)]
    """
    path = os.fspath(path)
    head, size = _head(path, storage_options)
    if size == 0:
        return "empty", None
    if _is_tfrecord(head):
        return "tfrecord", None
    if len(head) >= 4 and struct.unpack_from("<I", head)[0] == _RECORDIO_MAGIC:
        return "recordio", None
    if _is_tar(head):
        return "tar", None
    from feedline.storage.compression import sniff

    compression = sniff(head)
    if compression is not None:
        inner = _inflate_head(head, compression)
        if inner is not None:
            if not inner:
                return "empty", compression
            if _is_tfrecord(inner):
                return "tfrecord", compression
            if _is_tar(inner):
                return "tar", compression
            if _is_idx(inner, None):
                return "idx", compression
            kind = _text_kind(inner, False)
            if kind is not None:
                return kind, compression
            return "unknown", compression
    if _is_idx(head, size):
        return "idx", None
    kind = _text_kind(head, size <= len(head))
    if kind is not None:
        return kind, None
    if size % _CIFAR10_RECORD == 0:
        return "cifar10", None
    return "unknown", None
