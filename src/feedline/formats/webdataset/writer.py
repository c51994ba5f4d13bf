"""Writing WebDataset tar shards.

:class:`TarWriter` writes one shard; :class:`ShardWriter` cuts a stream of samples into
shards of at most ``maxcount`` samples and about ``maxsize`` bytes (a new shard starts
before a sample when the current one already holds ``maxcount`` samples or ``maxsize``
bytes, as the webdataset package's ``ShardWriter`` decides).

A sample is a dict with ``"__key__"`` (a string without dots in its last path
component) and fields named by extension; each field becomes the tar member
``<key>.<extension>``, written in sorted extension order. Values are encoded by
extension: ``bytes`` as they are, ``str`` as UTF-8, ``int`` as its decimal text,
``dict``/``list`` (and anything under ``json``) as JSON, ``numpy`` arrays under ``npy``
with ``numpy.save``, and ``uint8`` image arrays under ``jpg``/``jpeg``/``png`` through
:func:`feedline.image.pack.encode_image`. Other ``__*`` entries are not written.

Every shard is written under a temporary name beside its final path and renamed into
place when it is complete, so a reader never sees half a shard. A URL (``s3://...``,
with ``storage_options``) is written to a local temporary file and uploaded in one
``put`` when complete. Tar headers are
deterministic (POSIX ustar, mode 0444, uid/gid 0, empty user and group names, mtime 0),
so the same samples always give the same bytes. With ``index=True`` each shard also gets
its sidecar sample index (:mod:`feedline.formats.webdataset.index`).

>>> import os, tempfile
>>> d = tempfile.mkdtemp()
>>> with ShardWriter(os.path.join(d, "train-%06d.tar"), maxcount=2) as w:
...     for i in range(5):
...         _ = w.write({"__key__": f"s{i:03d}", "cls": i, "txt": f"sample {i}"})
>>> sorted(os.listdir(d)), w.shards_written
(['train-000000.tar', 'train-000001.tar', 'train-000002.tar'], 3)
"""

from __future__ import annotations

import io
import json
import os
import tarfile
import tempfile
from typing import Any

from feedline._internal.atomic import temporary_path
from feedline._internal.closing import Abortable, Closeable
from feedline._internal.validate import non_negative_int, positive_int
from feedline.formats.webdataset._tarscan import split_name
from feedline.storage.fs import is_remote

__all__ = ["TarWriter", "ShardWriter", "encode_field"]


def encode_field(ext: str, value: Any) -> bytes:
    """The bytes stored for field ``ext`` holding ``value``; see the module docstring.

    Args:
        ext: the field's extension (its last dot-separated part decides ``json``,
            ``npy`` and image encodings).
        value: ``bytes``-like (stored as is), ``str`` (UTF-8), ``int`` (decimal text),
            ``dict``/``list`` or anything under ``json``/``jsn`` (JSON), or a numpy array
            under ``npy`` (``numpy.save``) or ``jpg``/``jpeg``/``png`` (an encoded
            image); anything else raises ``TypeError``.

    >>> encode_field("cls", 3), encode_field("json", {"a": 1}), encode_field("txt", "é")
    (b'3', b'{"a": 1}', b'\\xc3\\xa9')
    """
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    last = ext.rsplit(".", 1)[-1].lower()
    if last in ("json", "jsn"):
        return json.dumps(value).encode("utf-8")
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value).encode("ascii")
    if isinstance(value, (dict, list)):
        return json.dumps(value).encode("utf-8")
    import numpy as np

    if isinstance(value, np.ndarray):
        if last == "npy":
            buf = io.BytesIO()
            np.save(buf, value, allow_pickle=False)
            return buf.getvalue()
        if last in ("jpg", "jpeg", "png"):
            from feedline.image.pack import encode_image

            return encode_image(value, encoding=".png" if last == "png" else ".jpg")
    raise TypeError(f"field {ext!r}: cannot encode a {type(value).__name__}; pass bytes, str, "
                    "int, dict/list (json), or a numpy array under npy/jpg/png")


def _tmp_beside(path: str) -> tuple[Any, str]:
    if is_remote(path):  # written locally, then uploaded in one PUT on close
        fd, tmp = tempfile.mkstemp(prefix=".feedline-shard-", suffix=".tar.tmp")
        return os.fdopen(fd, "wb"), tmp
    fd, tmp = temporary_path(path)
    return os.fdopen(fd, "wb"), tmp


class TarWriter(Abortable):
    """Write samples into one tar shard at ``path`` (atomically: see the module
    docstring).

    ``count`` is the number of samples written, ``size`` the archive's size so far.

    Args:
        path: the shard to write, a local path or a URL (written locally, uploaded on
            close).
        index: true also writes the sidecar index on close; false (the default) does not.
        storage_options: passed to fsspec for a URL.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "a.tar")
    >>> with TarWriter(path) as w:
    ...     w.write({"__key__": "x", "txt": "hello"})
    1024
    """

    def __init__(self, path: str | os.PathLike, *, index: bool = False,
                 storage_options: dict | None = None) -> None:
        self.path = os.fspath(path)
        self.storage_options = storage_options
        self.index = bool(index)
        self._file, self._tmp = _tmp_beside(self.path)
        self._tar = tarfile.open(fileobj=self._file, mode="w", format=tarfile.USTAR_FORMAT)
        self.offsets: list[int] = []
        self.count = 0
        self._closed = False

    @property
    def size(self) -> int:
        return self._tar.offset

    def write(self, sample: dict[str, Any]) -> int:
        """Write one sample; return the number of bytes its members occupy in the
        archive (headers and padding included).

        Args:
            sample: a dict with a non-empty str ``"__key__"`` (no ``.`` in its last path
                component) and at least one field named by extension, each encoded by
                :func:`encode_field`; other ``__*`` entries are not written. A bad key or
                no field raises ``ValueError``, as does a closed writer.
        """
        if self._closed:
            raise ValueError(f"{self.path}: write to a closed TarWriter")
        key = sample.get("__key__")
        if not isinstance(key, str) or not key:
            raise ValueError(f"a sample needs a non-empty string '__key__', got {key!r}")
        fields = sorted(k for k in sample if not k.startswith("__"))
        if not fields:
            raise ValueError(f"sample {key!r} has no fields to write")
        encoded = [(ext, encode_field(ext, sample[ext])) for ext in fields]
        for ext, _ in encoded:
            parts = split_name(f"{key}.{ext}")
            if parts is None or parts != (key, ext):
                raise ValueError(f"sample key {key!r} with field {ext!r} would not read back "
                                 "as the same key: keys must not contain '.' in their last "
                                 "path component")
        start = self._tar.offset
        for ext, data in encoded:
            info = tarfile.TarInfo(f"{key}.{ext}")
            info.size = len(data)
            info.mtime = 0
            info.mode = 0o444
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            self._tar.addfile(info, io.BytesIO(data))
        self.offsets.append(start)
        self.count += 1
        return self._tar.offset - start

    def close(self) -> None:
        """Finish the archive and rename it into place (idempotent)."""
        if getattr(self, "_closed", True):
            return
        self._closed = True
        data_end = self._tar.offset  # where the end-of-archive blocks begin
        try:
            self._tar.close()
            self._file.close()
            if is_remote(self.path):
                from feedline.storage.fs import filesystem

                filesystem(self.path, self.storage_options).put_file(self._tmp, self.path)
                os.unlink(self._tmp)
            else:
                os.replace(self._tmp, self.path)
        except BaseException:
            self.abort()
            raise
        if self.index:
            from feedline.formats.webdataset.index import write_index

            write_index(self.path, self.offsets + [data_end],
                        storage_options=self.storage_options)

    def abort(self) -> None:
        """Drop the shard: nothing appears at ``path``."""
        self._closed = True
        for closer in (getattr(self, "_file", None),):
            try:
                if closer is not None:
                    closer.close()
            except OSError:
                pass
        if os.path.exists(self._tmp):
            os.unlink(self._tmp)


class ShardWriter(Closeable):
    """Write samples into numbered shards ``pattern % shard``; see the module docstring.

    ``shards_written`` counts the shards started, ``paths`` lists them, ``total`` counts
    the samples written. Leaving a ``with`` block by an exception drops the shard being
    written (the finished ones stay).

    Args:
        pattern: the shard names, with a %-format for the shard number such as
            ``"train-%06d.tar"`` (else ``ValueError``); local paths or URLs.
        maxcount: the most samples per shard, a positive int (default 100,000).
        maxsize: a new shard starts before a sample once the current one holds this many
            bytes, a positive int (default 3,000,000,000).
        start_shard: the number of the first shard, a non-negative int (default 0).
        index: true also writes each shard's sidecar index; false (the default) does not.
        storage_options: passed to fsspec for URLs.

    >>> import os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> with ShardWriter(os.path.join(d, "s-%02d.tar"), maxsize=2048) as w:
    ...     for i in range(3): _ = w.write({"__key__": str(i), "bin": b"x" * 600})
    >>> [os.path.basename(p) for p in w.paths], w.total
    (['s-00.tar', 's-01.tar'], 3)
    """

    def __init__(self, pattern: str, *, maxcount: int = 100_000, maxsize: int = 3_000_000_000,
                 start_shard: int = 0, index: bool = False,
                 storage_options: dict | None = None) -> None:
        if not isinstance(pattern, str) or "%" not in pattern:
            raise ValueError(f"`pattern` must contain a %-format for the shard number, got {pattern!r}")
        self.pattern = pattern
        self.maxcount = positive_int("maxcount", maxcount)
        self.maxsize = positive_int("maxsize", maxsize)
        self.shard = non_negative_int("start_shard", start_shard)
        self.index = index
        self.storage_options = storage_options
        self.paths: list[str] = []
        self.total = 0
        self._writer: TarWriter | None = None

    @property
    def shards_written(self) -> int:
        return len(self.paths)

    def write(self, sample: dict[str, Any]) -> int:
        """Write one sample into the current shard (starting a new one first if it is
        full); returns the bytes it occupies.

        Args:
            sample: a dict with ``"__key__"`` and fields, as :meth:`TarWriter.write` takes
                it.
        """
        w = self._writer
        if w is None or w.count >= self.maxcount or w.size >= self.maxsize:
            if w is not None:
                w.close()
            path = self.pattern % self.shard
            self.shard += 1
            self._writer = w = TarWriter(path, index=self.index,
                                         storage_options=self.storage_options)
            self.paths.append(path)
        n = w.write(sample)
        self.total += 1
        return n

    def close(self) -> None:
        """Finish the current shard (idempotent)."""
        w = getattr(self, "_writer", None)
        if w is not None:
            self._writer = None
            w.close()

    def __exit__(self, *exc_info: object) -> None:
        if exc_info and exc_info[0] is not None and self._writer is not None:
            self._writer.abort()
            self._writer = None
        self.close()
