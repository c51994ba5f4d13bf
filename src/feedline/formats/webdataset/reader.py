"""Reading WebDataset tar shards as a resumable, sharded :class:`~feedline.Dataset`.

:func:`read` (``feedline.webdataset.read``) yields samples — dicts ``{"__key__": key,
"__url__": shard, ext: bytes, ...}`` grouped exactly as the webdataset package groups
tar members (see :mod:`feedline.formats.webdataset._tarscan`) — from a list of shards:

* ``urls``: a path or URL with brace ranges (``"train-{000000..000099}.tar"``,
  ``"{a,b}.tar"``, see :func:`expand_urls`), globs, a directory, or a list of these;
  local paths and fsspec URLs (``s3://...`` with ``storage_options``);
* sharding: the shard list is cut over ``world_size`` ranks and ``num_workers`` workers
  per rank — part ``rank * num_workers + worker`` of ``world_size * num_workers`` reads
  every that-many-th shard (``shards[part::parts]``), so every sample is read exactly
  once per epoch across all ranks and workers (counts differ when the shards do; for
  equal counts use :class:`~feedline.formats.webdataset.index.IndexedTarShards`);
* ``shuffle_shards=True`` permutes the whole shard list each epoch (seeded by ``seed``
  and the epoch number, identical on every rank) before it is cut into parts; chain
  ``.shuffle(buffer_size)`` for a sample-level buffer shuffle;
* ``decode``: ``False`` (bytes), ``True`` (every known extension), a list of field
  names, or a :class:`~feedline.formats.webdataset.decode.DecodeOptions` (fields and
  image mode; see :mod:`feedline.formats.webdataset.decode`);
* gzip-compressed shards (``.tar.gz``, ``.tgz``) are recognised by their bytes and
  read through :mod:`gzip` (resuming one decompresses it again up to the offset);
* ``on_error``: damaged tar data (a header that fails validation, a truncated member,
  a repeated extension, a gzip stream that does not decompress) raises
  :class:`~feedline.exceptions.CorruptRecordError` naming the shard, the sample index in
  it and the byte offset (``"raise"``), or is left out and counted in the iterator's
  ``skipped`` (``"skip"``, ``"warn"``), reading on at the next valid header;
* ``cache_dir``/``cache_limit``: remote shards are copied into a local
  :class:`~feedline.storage.cache.ShardCache` and read from there; with ``read_ahead=True``
  (the default when caching) a background thread fetches the next shard while the
  current one is read. The thread is joined when the iterator ends or closes (closing
  abandons a download in progress), and an error it met is raised when the iterator
  reaches that shard.

Iterators resume exactly: their state is ``{"type": "webdataset", "shard": i,
"offset": o, "index": k, "skipped": s}`` — the position in this part's shard order, the
byte offset of the next sample in that shard, samples read from it, damaged stretches
skipped so far.

>>> import os, tempfile
>>> from feedline.formats.webdataset.writer import ShardWriter
>>> d = tempfile.mkdtemp()
>>> with ShardWriter(os.path.join(d, "s-%03d.tar"), maxcount=3) as w:
...     for i in range(7): _ = w.write({"__key__": f"{i:04d}", "cls": i})
>>> ds = read(os.path.join(d, "s-{000..002}.tar"), decode=True)
>>> [s["cls"] for s in ds]
[0, 1, 2, 3, 4, 5, 6]
>>> [s["cls"] for s in read(os.path.join(d, "s-*.tar"), rank=1, world_size=2, decode=True)]
[3, 4, 5]
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from feedline._internal.on_error import check_on_error
from feedline._internal.validate import (
    UNSET,
    non_negative_int,
    optional_positive_int,
    positive_int,
)
from feedline.dataset.base import BuildContext, Dataset
from feedline.dataset.iterator import DatasetIterator, check_state
from feedline.exceptions import StateError
from feedline.formats.webdataset._tarscan import SampleScan, samples
from feedline.formats.webdataset.decode import DecodeOptions, decode_options
from feedline.storage.fs import is_remote, open_file, strip_file_scheme

__all__ = ["expand_urls", "read", "TarShards", "TarShardsIterator", "MAX_EXPANDED",
           "MAX_BRACE_DEPTH"]

_RANGE = re.compile(r"^(-?\d+)\.\.(-?\d+)$")
_MAGIC = set("*?[")


#: the most names one ``urls`` argument may expand to, and the deepest brace nesting
MAX_EXPANDED = 1_000_000
MAX_BRACE_DEPTH = 32


def _split_top(body: str) -> list[str]:
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in body:
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
            continue
        depth += (ch == "{") - (ch == "}")
        cur.append(ch)
    parts.append("".join(cur))
    return parts


def _brace_depth(text: str) -> int:
    depth = deepest = 0
    for ch in text:
        if ch == "{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch == "}" and depth:
            depth -= 1
    return deepest


class _Range:
    __slots__ = ("lo", "hi", "width")

    def __init__(self, lo: str, hi: str) -> None:
        padded = (len(lo) > 1 and lo.startswith("0")) or (len(hi) > 1 and hi.startswith("0"))
        self.width = max(len(lo), len(hi)) if padded else 0
        self.lo, self.hi = int(lo), int(hi)

    def count(self) -> int:
        return abs(self.hi - self.lo) + 1

    def names(self) -> Iterator[str]:
        step = 1 if self.hi >= self.lo else -1
        for v in range(self.lo, self.hi + step, step):
            yield str(v).zfill(self.width)


# A parsed pattern is a list of parts: literal text, a _Range, or a list of
# alternatives (each itself a parsed pattern).
_Part = Any


def _parse(text: str) -> list[_Part]:
    parts: list[_Part] = []
    while True:
        start = text.find("{")
        if start < 0:
            parts.append(text)
            return parts
        depth = 0
        for end in range(start, len(text)):
            depth += (text[end] == "{") - (text[end] == "}")
            if depth == 0:
                break
        else:
            raise ValueError(f"unbalanced '{{' in {text!r}")
        parts.append(text[:start])
        body = text[start + 1 : end]
        m = _RANGE.match(body)
        if m:
            if max(len(m.group(1)), len(m.group(2))) > 40:
                raise ValueError(f"brace range {{{body[:60]}}} has bounds of more than 40 digits")
            parts.append(_Range(m.group(1), m.group(2)))
        elif "," in body:
            parts.append([_parse(part) for part in _split_top(body)])
        else:
            parts.append("{" + body + "}")
        text = text[end + 1 :]


def _count(parts: list[_Part], cap: int) -> int:
    """How many names ``parts`` expands to, stopping at ``cap + 1`` (never materialised)."""
    total = 1
    for part in parts:
        if isinstance(part, str):
            continue
        n = part.count() if isinstance(part, _Range) else min(
            sum(_count(alt, cap) for alt in part), cap + 1)
        total = min(total * n, cap + 1)
    return total


def _names(parts: list[_Part]) -> Iterator[str]:
    if not parts:
        yield ""
        return
    head, rest = parts[0], parts[1:]
    if isinstance(head, str):
        options: Iterable[str] = (head,)
    elif isinstance(head, _Range):
        options = head.names()
    else:
        options = (o for alt in head for o in _names(alt))
    for o in options:
        for tail in _names(rest):
            yield o + tail


def _brace(text: str, budget: int = MAX_EXPANDED) -> list[str]:
    """The names of ``text`` with its braces expanded, in order; more than ``budget``
    names or braces nested deeper than :data:`MAX_BRACE_DEPTH` raise ``ValueError``
    before anything is expanded."""
    depth = _brace_depth(text)
    if depth > MAX_BRACE_DEPTH:
        raise ValueError(f"braces nested {depth} deep in {text[:80]!r}; at most "
                         f"{MAX_BRACE_DEPTH} levels are expanded")
    parts = _parse(text)
    n = _count(parts, budget)
    if n > budget:
        raise ValueError(f"{text[:80]!r} expands to more than {budget:,} names (the limit "
                         f"of one `urls` argument is {MAX_EXPANDED:,}); list the shards "
                         "another way, e.g. with a glob or a directory")
    return list(_names(parts))


def expand_urls(urls: str | os.PathLike | Iterable[str | os.PathLike], *,
                storage_options: dict | None = None) -> list[str]:
    """The shard list named by ``urls``: brace ranges and alternatives expanded in order
    (``{000..003}`` keeps the zero padding), then globs and directories expanded (sorted)
    by :func:`feedline.storage.fs.expand`; plain paths are kept as they are.

    The braces of all ``urls`` together may name at most :data:`MAX_EXPANDED` shards,
    nested at most :data:`MAX_BRACE_DEPTH` deep; the count is computed before anything
    is expanded, and more raises ``ValueError`` (``"{a,b}"`` thirty times over, or
    ``"{0..1000000000000}"``, is refused at once instead of exhausting memory).

    Args:
        urls: one pattern or a list of them: paths or URLs with brace ranges
            (``{000..003}``) or alternatives (``{a,b}``), globs, or directories.
        storage_options: passed to fsspec when a remote glob or directory is listed.

    >>> expand_urls("s3://b/train-{00..02}.tar")
    ['s3://b/train-00.tar', 's3://b/train-01.tar', 's3://b/train-02.tar']
    >>> expand_urls(["a-{x,y}.tar", "c.tar"])
    ['a-x.tar', 'a-y.tar', 'c.tar']
    """
    if isinstance(urls, (str, os.PathLike)):
        urls = [urls]
    out: list[str] = []
    for u in urls:
        for one in _brace(os.fspath(u), MAX_EXPANDED - len(out)):
            local = strip_file_scheme(one)
            if _MAGIC & set(one) or (not is_remote(one) and os.path.isdir(local)):
                from feedline.storage.fs import expand

                out.extend(expand(one, storage_options=storage_options))
            else:
                out.append(one)
    return out


class _GzipOwning:
    """A gzip reader that closes the raw file it reads from."""

    def __init__(self, raw: Any) -> None:
        import gzip

        self._raw = raw
        self._gz = gzip.GzipFile(fileobj=raw, mode="rb")
        self.read, self.seek = self._gz.read, self._gz.seek

    def close(self) -> None:
        try:
            self._gz.close()
        finally:
            self._raw.close()


class TarShards(Dataset):
    """The samples of this part's tar shards; built by :func:`read` (see the module
    docstring), which checks the options.

    Args:
        shards: every shard's path or URL, in order (before shuffling and cutting).
        part: which part of the shard list this dataset reads (``0 <= part < parts``).
        parts: how many parts the shard list is cut into: part ``p`` reads
            ``order[p::parts]`` of each epoch's order.
        shuffle_shards: permute the whole shard list each epoch, seeded by ``seed`` and
            the epoch number (identical on every part), before cutting it.
        seed: the seed of that permutation (``None``: 0).
        decode: how samples are decoded (``None``: not at all, fields stay ``bytes``).
        on_error: ``"raise"``, ``"skip"`` or ``"warn"`` for damaged tar data.
        storage_options: passed to fsspec for a URL.
        cache: a :class:`~feedline.storage.cache.ShardCache` remote shards are copied
            into and read from, or ``None``.
        read_ahead: fetch the next remote shard into ``cache`` while this one is read.

    >>> import os, tempfile
    >>> from feedline.formats.webdataset.writer import ShardWriter
    >>> d = tempfile.mkdtemp()
    >>> with ShardWriter(os.path.join(d, "train-%06d.tar"), maxcount=2, index=True) as w:
    ...     for i in range(4):
    ...         _ = w.write({"__key__": f"s{i}", "txt": f"text {i}", "cls": i})
    >>> urls = os.path.join(d, "train-{000000..000001}.tar")          # two shards of two samples
    >>> ds = read(urls, shuffle_shards=True, seed=0)
    >>> type(ds).__name__, sorted(os.path.basename(u) for u in ds.shard_order(0))
    ('TarShards', ['train-000000.tar', 'train-000001.tar'])
    """

    def __init__(self, shards: list[str], *, part: int, parts: int, shuffle_shards: bool,
                 seed: int | None, decode: DecodeOptions | None, on_error: str,
                 storage_options: dict | None, cache: Any, read_ahead: bool) -> None:
        super().__init__()
        self.shards = shards
        self.part, self.parts = part, parts
        self.shuffle_shards, self.seed = shuffle_shards, seed
        self.decode = decode
        self.on_error = on_error
        self.storage_options = storage_options
        self.shard_cache, self.read_ahead = cache, read_ahead  # a ShardCache or None

    @property
    def name(self) -> str:
        return f"webdataset({len(self.shards)} shards, part {self.part}/{self.parts})"

    def shard_order(self, epoch: int) -> list[str]:
        """The shards this part reads in iteration ``epoch``, in order.

        Args:
            epoch: the iteration number; with ``shuffle_shards`` the order is a
                permutation drawn from ``(seed, epoch)``, so each epoch has its own and
                every rank draws the same one before taking its part.

        >>> ds = read(["a.tar", "b.tar", "c.tar"], rank=1, world_size=2)
        >>> ds.shard_order(0)
        ['b.tar']
        >>> sorted(read(["a.tar", "b.tar", "c.tar"], shuffle_shards=True, seed=1).shard_order(5))
        ['a.tar', 'b.tar', 'c.tar']
        """
        order = self.shards
        if self.shuffle_shards:
            import numpy as np

            rng = np.random.default_rng([self.seed or 0, epoch])
            order = [order[j] for j in rng.permutation(len(order))]
        return order[self.part :: self.parts]

    def _make_iterator(self, ctx: BuildContext) -> TarShardsIterator:
        return TarShardsIterator(self, self.shard_order(ctx.epoch))


class TarShardsIterator(DatasetIterator[dict]):
    """Iterator of :class:`TarShards`; ``skipped`` counts damaged stretches left out.

    Args:
        ds: the :class:`TarShards` whose options (decoding, ``on_error``, cache,
            read-ahead) apply.
        order: the shards to read, in order (what :meth:`TarShards.shard_order` gives).

    >>> import os, tempfile
    >>> from feedline.formats.webdataset.writer import ShardWriter
    >>> d = tempfile.mkdtemp()
    >>> with ShardWriter(os.path.join(d, "train-%06d.tar"), maxcount=2, index=True) as w:
    ...     for i in range(4):
    ...         _ = w.write({"__key__": f"s{i}", "txt": f"text {i}", "cls": i})
    >>> urls = os.path.join(d, "train-{000000..000001}.tar")          # two shards of two samples
    >>> ds = read(urls, decode=True)
    >>> it = ds.iterator(); _ = next(it)
    >>> [s["__key__"] for s in ds.iterator(it.get_state())]           # resume after the first sample
    ['s1', 's2', 's3']
    """

    def __init__(self, ds: TarShards, order: list[str]) -> None:
        self._ds = ds
        self._order = order
        self._i = 0
        self._scan = SampleScan()
        self._file: Any = None
        self._gen: Any = None
        self._ahead: dict[int, tuple[threading.Thread, list]] = {}
        self._stop = threading.Event()
        self._closed = False

    @property
    def skipped(self) -> int:
        return self._scan.skipped

    # --------------------------------------------------------------- shard access
    def _fetch(self, url: str) -> str:
        return self._ds.shard_cache.local(url)

    def _start_ahead(self, i: int) -> None:
        if i >= len(self._order) or i in self._ahead:
            return
        url = self._order[i]
        if not is_remote(url):
            return
        box: list = []

        cache: Any = self._ds.shard_cache
        stop = self._stop

        def work() -> None:
            try:
                box.append(("ok", cache.local(url, stop=stop)))
            except BaseException as exc:  # noqa: BLE001 - handed to the reading thread
                box.append(("error", exc))

        t = threading.Thread(target=work, name=f"feedline-wds-ahead-{i}", daemon=True)
        self._ahead[i] = (t, box)
        t.start()

    def _local(self, i: int) -> str:
        ahead = self._ahead.pop(i, None)
        if ahead is not None:
            t, box = ahead
            t.join()
            kind, value = box[0]
            if kind == "error":
                raise value
            return value
        return self._fetch(self._order[i])

    def _open(self) -> None:
        ds = self._ds
        url = self._order[self._i]
        f: Any
        if ds.shard_cache is not None and is_remote(url):
            path = self._local(self._i)
            try:
                f = open(path, "rb", buffering=1 << 16)  # noqa: SIM115 - closed in _finish
            except FileNotFoundError:  # evicted by another process meanwhile
                f = open(self._fetch(url), "rb", buffering=1 << 16)  # noqa: SIM115
            if ds.read_ahead:
                self._start_ahead(self._i + 1)
        elif is_remote(url):
            f = open_file(url, "rb", storage_options=ds.storage_options)
        else:
            f = open(strip_file_scheme(url), "rb", buffering=1 << 16)  # noqa: SIM115
        try:
            if f.read(2) == b"\x1f\x8b":  # a gzip-compressed shard (.tar.gz, .tgz)
                f.seek(0)
                f = _GzipOwning(f)
            else:
                f.seek(0)
            if self._scan.offset:
                f.seek(self._scan.offset)
        except BaseException:
            f.close()
            raise
        self._file = f
        self._gen = samples(f, url, self._scan, on_error=ds.on_error)

    def _finish(self) -> None:
        gen, self._gen = self._gen, None
        if gen is not None:
            gen.close()
        f, self._file = self._file, None
        if f is not None:
            f.close()

    def __next__(self) -> dict:
        ds = self._ds
        while True:
            if self._gen is None:
                if self._i >= len(self._order):
                    self._join_ahead()
                    raise StopIteration
                self._open()
            try:
                sample = next(self._gen)
            except StopIteration:
                self._finish()
                self._i += 1
                self._scan = SampleScan(skipped=self._scan.skipped)
                continue
            except BaseException:
                self._finish()
                raise
            if ds.decode is not None:
                sample = ds.decode.apply(sample)
            return sample

    # --------------------------------------------------------------- state
    def get_state(self) -> dict[str, Any]:
        i, offset, index = self._i, self._scan.offset, self._scan.index
        if offset < 0:  # this shard is done
            i, offset, index = i + 1, 0, 0
        return {"type": "webdataset", "shard": i, "offset": offset, "index": index,
                "skipped": self._scan.skipped}

    def set_state(self, state: dict[str, Any]) -> None:
        """Resume at a position :meth:`get_state` returned.

        Args:
            state: a ``{"type": "webdataset", "shard", "offset", "index", ...}`` dict from
                :meth:`get_state`; another type, a shard number outside this part's shards
                or a negative offset raises :class:`~feedline.exceptions.StateError`.
        """
        check_state(state, "webdataset", ("shard", "offset", "index"))
        i, offset, index = state["shard"], state["offset"], state["index"]
        if not (isinstance(i, int) and 0 <= i <= len(self._order)):
            raise StateError(f"state shard {i!r} is outside this part's {len(self._order)} shards")
        if not (isinstance(offset, int) and offset >= 0):
            raise StateError(f"state offset must be a non-negative int, got {offset!r}")
        self._finish()
        self._i = i
        self._scan = SampleScan(index=index, skipped=state.get("skipped", 0), offset=offset)

    def _join_ahead(self) -> None:
        ahead, self._ahead = self._ahead, {}
        for t, _ in ahead.values():
            t.join()

    def close(self) -> None:
        if getattr(self, "_closed", True):
            return
        self._closed = True
        self._finish()
        self._stop.set()  # a download in progress stops at its next block
        self._join_ahead()


def read(urls: Any, *, rank: int | None = None, world_size: int | None = None,
         worker: int = 0, num_workers: int = 1, shuffle_shards: bool = False,
         seed: int | None = None, decode: bool | Sequence[str] | DecodeOptions = False,
         on_error: str = "raise", storage_options: dict | None = None,
         cache_dir: str | os.PathLike | None = None, cache_limit: int | None = None,
         read_ahead: bool | None = None, image_mode: str = UNSET) -> TarShards:
    """The samples of WebDataset tar shards as a :class:`~feedline.Dataset`; see the
    module docstring.

    Args:
        urls: a path or URL with brace ranges (``"train-{000000..000099}.tar"``), a glob,
            a directory, or a list of these (see :func:`expand_urls`); naming no shard is
            a ``ValueError``.
        rank: this process's rank (``None``: as :func:`feedline.split` finds it, from
            ``torch.distributed`` or the environment, else 0).
        world_size: the number of ranks (``None``: found as ``rank`` is).
        worker: this data-loading worker's index within the rank (``0 <= worker <
            num_workers``).
        num_workers: data-loading workers per rank: part ``rank * num_workers + worker``
            of ``world_size * num_workers`` reads every that-many-th shard.
        shuffle_shards: permute the whole shard list each epoch (seeded by ``seed`` and
            the epoch, identical on every rank) before cutting it into parts.
        seed: the seed of that permutation (``None``: 0).
        decode: ``False`` (fields stay ``bytes``), ``True`` (every field of a known
            extension), a list of field names to decode, or a
            :class:`~feedline.webdataset.DecodeOptions` (fields and image mode).
        on_error: damaged tar data raises
            :class:`~feedline.exceptions.CorruptRecordError` naming shard, sample index and
            byte offset (``"raise"``), or is left out and counted in the iterator's
            ``skipped`` (``"skip"``; ``"warn"`` also logs it).
        storage_options: passed to fsspec for URLs (``s3://`` credentials, endpoint).
        cache_dir: copy remote shards into this local folder (a
            :class:`~feedline.storage.cache.ShardCache`) and read them from there.
        cache_limit: the most bytes the cache keeps (least recently used shards are
            evicted; ``None``: no limit); needs ``cache_dir``.
        read_ahead: fetch the next remote shard into the cache in a background thread
            while the current one is read (``None``: on when ``cache_dir`` is given);
            ``True`` needs ``cache_dir``.

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
    >>> [(s["__key__"], s["cls"]) for s in read(urls, decode=True)]
    [('s0', 0), ('s1', 1), ('s2', 2), ('s3', 3)]
    >>> [s["__key__"] for s in read(urls, rank=1, world_size=2)]      # rank 1 of 2: the second shard
    ['s2', 's3']
    >>> [s["cls"] for s in read(urls, decode=DecodeOptions(fields=["cls"]))]
    [0, 1, 2, 3]
    """
    from feedline.io.split import resolve_rank_world

    rank, world_size = resolve_rank_world(rank, world_size)
    positive_int("num_workers", num_workers)
    non_negative_int("worker", worker)
    if worker >= num_workers:
        raise ValueError(f"`worker` must be below num_workers={num_workers}, got {worker}")
    check_on_error(on_error)
    decoding = decode_options(decode, image_mode)
    optional_positive_int("cache_limit", cache_limit)
    if cache_limit is not None and cache_dir is None:
        raise ValueError("`cache_limit` needs `cache_dir`")
    shards = expand_urls(urls, storage_options=storage_options)
    if not shards:
        raise ValueError(f"`urls` names no shard: {urls!r}")
    cache = None
    if cache_dir is not None:
        from feedline.storage.cache import ShardCache

        cache = ShardCache(cache_dir, limit=cache_limit, storage_options=storage_options)
    if read_ahead is None:
        read_ahead = cache is not None
    elif read_ahead and cache is None:
        raise ValueError("`read_ahead` fetches the next shard into the cache: it needs `cache_dir`")
    return TarShards(shards, part=rank * num_workers + worker, parts=world_size * num_workers,
                     shuffle_shards=bool(shuffle_shards), seed=seed, decode=decoding,
                     on_error=on_error, storage_options=storage_options,
                     cache=cache, read_ahead=bool(read_ahead))
