"""The sample index of a tar shard: the byte offset of every sample, in a sidecar file.

``<shard>.index`` holds the 8-byte magic ``FLWDSIX1``, the sample count ``n`` and
``n + 1`` offsets (all little-endian ``uint64``): offset ``i`` is where sample ``i``'s
first tar header starts, offset ``n`` where the last sample's data ends. Sample ``i`` is
therefore the byte range ``[offset[i], offset[i + 1])``, which a remote shard serves
with one ranged GET. An index of a shard with damaged stretches left out
(``build_index(on_error="skip")``) has gaps between samples: it is written with the
magic ``FLWDSIX2`` and the same fields followed by ``n`` more offsets, where each
sample's data ends, so sample ``i`` is ``[offset[i], end[i])`` and never spans the
damage after it (:func:`read_ranges`). Indexes are validated when read: offsets in
order, multiples of 512, ends inside their sample's stretch; anything else is a
:class:`~feedline.exceptions.CorruptRecordError`.

:func:`build_index` scans a shard (local or URL) and writes it (atomically);
:class:`ShardWriter(..., index=True) <feedline.formats.webdataset.writer.ShardWriter>`
writes it while writing.

:class:`IndexedTarShards` is a :class:`~feedline.dataset.base.RandomAccessDataset` of
the samples of indexed shards: ``len``, ``ds[i]``, ``global_shuffle`` and
``shard``/``feedline.split`` with equal counts per rank.

>>> import os, tempfile
>>> from feedline.formats.webdataset.writer import TarWriter
>>> path = os.path.join(tempfile.mkdtemp(), "a.tar")
>>> with TarWriter(path) as w:
...     for i in range(3): _ = w.write({"__key__": f"k{i}", "cls": i})
>>> build_index(path).tolist()
[0, 1024, 2048, 3072]
>>> ds = IndexedTarShards([path], decode=True)
>>> len(ds), ds[2]["cls"]
(3, 2)
"""

from __future__ import annotations

import bisect
import os
import struct
from collections.abc import Sequence
from typing import Any

import numpy as np

from feedline._internal.atomic import replace_file
from feedline._internal.on_error import check_on_error
from feedline._internal.validate import UNSET
from feedline.dataset.base import RandomAccessDataset
from feedline.exceptions import CorruptRecordError
from feedline.formats.webdataset._tarscan import BLOCK, OffsetView, SampleScan, samples
from feedline.formats.webdataset.decode import DecodeOptions, decode_options
from feedline.storage.fs import is_remote, open_file

__all__ = ["index_path", "build_index", "write_index", "read_index", "read_ranges",
           "IndexedTarShards"]

_MAGIC = b"FLWDSIX1"
_MAGIC_GAPS = b"FLWDSIX2"


def index_path(shard: str) -> str:
    """The sidecar index path of ``shard``: ``shard + ".index"``.

    Args:
        shard: the shard's path or URL.

    >>> index_path("s3://bucket/train-000001.tar")
    's3://bucket/train-000001.tar.index'
    """
    return os.fspath(shard) + ".index"


def write_index(shard: str, offsets: Sequence[int], *, ends: Sequence[int] | None = None,
                storage_options: dict | None = None) -> str:
    """Write ``shard``'s index (atomically for a local shard); return the index path.

    Args:
        shard: the shard's path or URL; the index goes to :func:`index_path` of it.
        offsets: each sample's start, then where the last one's data ends.
        ends: where each sample's data ends, one per sample (another count raises
            ``ValueError``); stored only when some sample ends before the next one starts
            (the ``FLWDSIX2`` layout). ``None`` (the default): every sample ends where the
            next starts.
        storage_options: passed to fsspec for a URL.

    >>> import os, tempfile
    >>> shard = os.path.join(tempfile.mkdtemp(), "a.tar")
    >>> os.path.basename(write_index(shard, [0, 1024, 3072]))
    'a.tar.index'
    >>> read_index(shard).tolist()
    [0, 1024, 3072]
    >>> _ = write_index(shard, [0, 2048, 3072], ends=[1024, 3072])    # a gap at 1024..2048
    >>> [a.tolist() for a in read_ranges(shard)]
    [[0, 2048], [1024, 3072]]
    """
    arr = np.asarray(offsets, dtype="<u8")
    magic, tail = _MAGIC, b""
    if ends is not None:
        e = np.asarray(ends, dtype="<u8")
        if len(e) != len(arr) - 1:
            raise ValueError(f"`ends` must hold one offset per sample ({len(arr) - 1}), "
                             f"got {len(e)}")
        if not np.array_equal(e, arr[1:]):
            magic, tail = _MAGIC_GAPS, e.tobytes()
    data = magic + struct.pack("<Q", len(arr) - 1) + arr.tobytes() + tail
    path = index_path(shard)
    if is_remote(path):
        with open_file(path, "wb", storage_options=storage_options) as f:
            f.write(data)
    else:
        replace_file(path, data)
    return path


def read_ranges(shard: str, *, storage_options: dict | None = None
                ) -> tuple[np.ndarray, np.ndarray]:
    """``(starts, ends)`` of the samples in ``shard``'s index (``uint64`` arrays of
    ``n``): sample ``i`` is the byte range ``[starts[i], ends[i])``.

    Args:
        shard: the shard's path or URL (its index is :func:`index_path` of it; a missing
            index raises ``FileNotFoundError``, a damaged or inconsistent one
            :class:`~feedline.exceptions.CorruptRecordError`).
        storage_options: passed to fsspec for a URL.

    >>> import os, tempfile
    >>> shard = os.path.join(tempfile.mkdtemp(), "r.tar")
    >>> _ = write_index(shard, [0, 512, 2048]); [a.tolist() for a in read_ranges(shard)]
    [[0, 512], [512, 2048]]
    """
    path = index_path(shard)
    with open_file(path, "rb", storage_options=storage_options) as f:
        data = f.read()
    magic = data[:8]
    if len(data) < 16 or magic not in (_MAGIC, _MAGIC_GAPS):
        raise CorruptRecordError("not a feedline tar index (bad magic)", path=path, offset=0)
    (n,) = struct.unpack_from("<Q", data, 8)
    words = (len(data) - 16) // 8
    want = n + 1 if magic == _MAGIC else 2 * n + 1
    if len(data) % 8 or words != want:
        raise CorruptRecordError(f"index holds {words} offsets, its header says {want}",
                                 path=path, offset=8)
    offsets = np.frombuffer(data, dtype="<u8", offset=16, count=n + 1).astype(np.uint64)
    ends = (offsets[1:] if magic == _MAGIC else
            np.frombuffer(data, dtype="<u8", offset=16 + 8 * (n + 1)).astype(np.uint64))
    starts = offsets[:-1]
    bad = np.flatnonzero((offsets % BLOCK != 0)[:-1] | (ends <= starts) | (ends > offsets[1:]))
    if len(bad) or (n and ends[-1] != offsets[-1]):
        i = int(bad[0]) if len(bad) else n - 1
        raise CorruptRecordError(
            f"index entry {i} is not a sample's byte range: [{int(starts[i])}, {int(ends[i])}) "
            f"before the next at {int(offsets[i + 1])}", path=path, index=i,
            offset=16 + 8 * i)
    return starts, ends


def read_index(shard: str, *, storage_options: dict | None = None) -> np.ndarray:
    """The offsets stored in ``shard``'s index (``n + 1`` of them, ``uint64``: each
    sample's start, then where the last one ends). Where the index has gaps (damage left
    out), use :func:`read_ranges` for each sample's end.

    Args:
        shard: the shard's path or URL; a file at its index path that is not such an
            index raises :class:`~feedline.exceptions.CorruptRecordError`.
        storage_options: passed to fsspec for a URL.

    >>> import os, tempfile
    >>> shard = os.path.join(tempfile.mkdtemp(), "b.tar")
    >>> _ = write_index(shard, [0, 512]); read_index(shard).tolist()
    [0, 512]
    """
    starts, ends = read_ranges(shard, storage_options=storage_options)
    return np.concatenate([starts, ends[-1:] if len(ends) else np.zeros(1, np.uint64)])


def build_index(shard: str | os.PathLike, *, on_error: str = "raise",
                storage_options: dict | None = None) -> np.ndarray:
    """Scan ``shard``, write its index beside it, return the offsets.

    Args:
        shard: a local path or URL of an uncompressed tar shard; gzip-compressed shards
            are refused (``ValueError``: a byte range of them is not a sample).
        on_error: ``"raise"`` (the default) raises at damage; with ``"skip"`` (or
            ``"warn"``) damaged samples are left out of the index (each sample's end is
            stored too, so no sample spans the damage after it: see :func:`read_ranges`).
        storage_options: passed to fsspec for a URL (writing the index needs write
            access beside the shard).

    >>> import os, tempfile
    >>> from feedline.formats.webdataset.writer import TarWriter
    >>> shard = os.path.join(tempfile.mkdtemp(), "c.tar")
    >>> with TarWriter(shard) as w:
    ...     _ = w.write({"__key__": "a", "txt": "x", "cls": 1}); _ = w.write({"__key__": "b", "txt": "y"})
    >>> build_index(shard).tolist()
    [0, 2048, 3072]
    """
    shard = os.fspath(shard)
    check_on_error(on_error)
    starts, ends = [], []
    scan = SampleScan()
    with open_file(shard, "rb", storage_options=storage_options) as f:
        if f.read(2) == b"\x1f\x8b":
            raise ValueError(f"{shard}: a sample index needs an uncompressed tar shard, "
                             "this one is gzip-compressed")
        f.seek(0)
        for _ in samples(f, shard, scan, on_error=on_error):
            starts.append(scan.start)
            ends.append(scan.end)
    offsets = starts + [ends[-1] if ends else 0]
    write_index(shard, offsets, ends=ends, storage_options=storage_options)
    return np.asarray(offsets, dtype=np.uint64)


class IndexedTarShards(RandomAccessDataset):
    """Random access over the samples of indexed tar shards, in shard order; item ``i``
    is sample ``i`` counted across the shards. Each item is read with one ranged read
    (local ``pread`` or a ranged GET).

    Args:
        shards: the shard paths or URLs (none raises ``ValueError``). Shards without an
            index are indexed first (:func:`build_index`; remote ones need write access
            beside them, or build the indexes beforehand).
        decode: ``False`` (the default) returns raw ``bytes`` fields; ``True`` decodes
            every known field, a list of field names only those, a
            :class:`~feedline.webdataset.DecodeOptions` sets fields and image mode (see
            :mod:`feedline.formats.webdataset.decode`).
        storage_options: passed to fsspec for URLs.

    Deprecated:
        ``image_mode=`` is ``decode=DecodeOptions(image_mode=...)``; it still works for
        one release with a ``DeprecationWarning``.

    >>> import os, tempfile
    >>> from feedline.formats.webdataset.writer import ShardWriter
    >>> d = tempfile.mkdtemp()
    >>> with ShardWriter(os.path.join(d, "train-%06d.tar"), maxcount=2, index=True) as w:
    ...     for i in range(4):
    ...         _ = w.write({"__key__": f"s{i}", "txt": f"text {i}", "cls": i})
    >>> urls = os.path.join(d, "train-{000000..000001}.tar")          # two shards of two samples
    >>> from feedline.formats.webdataset.reader import expand_urls
    >>> samples = IndexedTarShards(expand_urls(urls), decode=["cls"])
    >>> len(samples), samples[3]["__key__"], samples[3]["cls"], samples[3]["txt"]
    (4, 's3', 3, b'text 3')
    """

    def __init__(self, shards: Sequence[str | os.PathLike], *,
                 decode: bool | Sequence[str] | DecodeOptions = False,
                 storage_options: dict | None = None, image_mode: str = UNSET) -> None:
        super().__init__()
        self._shards = [os.fspath(s) for s in shards]
        if not self._shards:
            raise ValueError("`shards` must name at least one shard, got none")
        self._decode = decode_options(decode, image_mode)
        self._so = storage_options
        self._ranges: list[tuple[np.ndarray, np.ndarray]] = []
        self._starts = [0]
        for s in self._shards:
            try:
                ranges = read_ranges(s, storage_options=storage_options)
            except FileNotFoundError:
                build_index(s, storage_options=storage_options)
                ranges = read_ranges(s, storage_options=storage_options)
            self._ranges.append(ranges)
            self._starts.append(self._starts[-1] + len(ranges[0]))
        self._files: dict[int, Any] = {}

    @property
    def name(self) -> str:
        return f"tar_shards({len(self._shards)})"

    def __len__(self) -> int:
        return self._starts[-1]

    def _read(self, shard: int, begin: int, end: int) -> bytes:
        path = self._shards[shard]
        if is_remote(path):
            from feedline.storage.fs import read_range

            return read_range(path, begin, end, storage_options=self._so)
        fd = self._files.get(shard)
        if fd is None:
            from feedline.storage.fs import strip_file_scheme

            fd = self._files[shard] = os.open(strip_file_scheme(path), os.O_RDONLY)
        end = min(end, os.fstat(fd).st_size)  # never more than the file holds
        return os.pread(fd, max(end - begin, 0), begin)

    def _getitem(self, index: int) -> dict[str, Any]:
        i = bisect.bisect_right(self._starts, index) - 1
        local = index - self._starts[i]
        starts, ends = self._ranges[i]
        begin, end = int(starts[local]), int(ends[local])
        data = self._read(i, begin, end)
        scan = SampleScan(index=local, offset=begin)
        view: Any = OffsetView(data, begin)
        got = list(samples(view, self._shards[i], scan, end=end))
        if len(got) != 1:
            raise CorruptRecordError(f"index entry {local} does not hold one sample "
                                     f"(found {len(got)}); rebuild the index",
                                     path=self._shards[i], index=local, offset=begin)
        sample = got[0]
        if self._decode is not None:
            sample = self._decode.apply(sample)
        return sample

    def __getstate__(self) -> dict:  # reopen files in worker processes
        state = self.__dict__.copy()
        state["_files"] = {}
        return state

    def close(self) -> None:
        files, self._files = getattr(self, "_files", {}), {}
        for fd in files.values():
            os.close(fd)
        super().close()
