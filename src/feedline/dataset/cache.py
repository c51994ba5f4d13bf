"""``Dataset.cache(path)`` and ``Dataset.snapshot(path)``: keep a pipeline's output on disk.

The first iteration reads the parent and yields its elements while writing them (pickled,
one record each) into TFRecord files ``part-00000.tfrecord``, ``part-00001.tfrecord``,
... of ``shard_size`` elements, in a private staging directory
``<path>/.staging-<fingerprint>-<host>-<pid>-<random>/``. When the parent ends, a
``manifest.json`` (fingerprint, parts, element and byte counts) is written and the
staging directory is renamed to ``<path>/<fingerprint>/`` in one step. Later iterations
(in this process or any other) read that directory instead of running the parent, in
the order it was written: like tf.data's ``cache``, a shuffle *before* the cache is
replayed, not redrawn, so shuffle after it.

* **Never half-read.** Only a renamed directory with a manifest whose part files have
  the recorded sizes is read. A job killed while writing leaves only a staging
  directory: it is never read, the next iteration writes the cache again, and staging
  directories of dead processes (or of iterators closed before the end) are removed.
  A damaged cache directory (a part missing or of the wrong size) is logged, removed
  and rebuilt.
* **Fingerprint.** ``<fingerprint>`` is a hash of the upstream pipeline's description:
  every stage's type, name and options, the code of its functions (bytecode, constants,
  names), and plain source arguments (ranges, lists of numbers or strings, paths). A
  changed pipeline therefore writes a new cache. The *contents* of the files a source
  reads are not part of it: after rewriting input files in place, delete the cache.
  Sources whose contents cannot be described (a generator, a reader function) are
  fingerprinted by their type and code only.
  ``cache(path)`` keeps one pipeline per directory: it removes the caches of other
  fingerprints in ``path`` once its own is complete, so pipelines that share a path
  evict each other — under ``shard``, give each rank its own path
  (``f"cache/rank{rank}"``) or use ``snapshot(path)``, which keeps every fingerprint's
  directory (each rank's shard has its own), so switching between pipelines reuses each
  one's snapshot.
* **Two writers** (two iterators, two processes) each write their own staging
  directory; the first to finish wins the rename and the other discards its copy.
* **Resume.** While writing, the state holds the parent's state and where the writer
  stands (staging directory, part, bytes written); a resumed iterator yields exactly
  the remaining elements and continues the cache in a new staging directory (copying
  the finished part prefix) when the old one is still there, or else just yields them
  (the cache is then written by a later iteration). While reading, the state is the
  part and the TFRecord reader's position.

``shard_size`` (default 1024) is the number of elements per part file. Part files are
checked against the manifest's sizes when a cache is opened; their records are read
without the per-record CRC check (a cache is a private, local copy, and reading it fast
is its point), so delete a cache you suspect of disk damage.

>>> import tempfile
>>> d = tempfile.mkdtemp()
>>> ds = Dataset.range(5).map(lambda x: x * x).cache(d)
>>> ds.to_list(), ds.to_list()  # the second pass reads the files
([0, 1, 4, 9, 16], [0, 1, 4, 9, 16])
>>> ds.is_cached()
True
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import pickle
import shutil
import socket
import types
import uuid
from typing import Any

from feedline._internal.atomic import replace_file
from feedline._internal.validate import positive_int
from feedline.dataset.base import BuildContext, Dataset
from feedline.dataset.iterator import DatasetIterator, check_state
from feedline.exceptions import CorruptRecordError, StateError
from feedline.formats.tfrecord import TFRecordReader, TFRecordWriter

__all__ = ["FileCacheDataset", "pipeline_fingerprint"]

logger = logging.getLogger(__name__)

_MANIFEST = "manifest.json"
_STAGING = ".staging-"
_CLOSED = "CLOSED"
_FORMAT = "feedline-cache-1"
_SKIP_ATTRS = {"_iterations", "_items", "_pool", "_pools", "_lock"}


# --------------------------------------------------------------------------- fingerprint


def _code_digest(code: types.CodeType, h: Any, depth: int = 0) -> None:
    h.update(code.co_code)
    h.update(repr(code.co_names).encode())
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            if depth < 8:
                _code_digest(const, h, depth + 1)
        else:
            h.update(repr(const).encode())


def _describe(value: Any, depth: int = 0) -> Any:
    """A JSON-able description of an option value (see the module docstring)."""
    if depth > 4:
        return type(value).__name__
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, bytes):
        return value.hex() if len(value) <= 64 else hashlib.sha256(value).hexdigest()
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, range):
        return ["range", value.start, value.stop, value.step]
    if isinstance(value, (list, tuple)):
        if len(value) > 100_000:
            return [type(value).__name__, len(value)]
        if all(x is None or isinstance(x, (bool, int, float, str, bytes)) for x in value):
            return [type(value).__name__,
                    hashlib.sha256(repr(value).encode()).hexdigest()]
        return [type(value).__name__, [_describe(x, depth + 1) for x in value[:64]], len(value)]
    if isinstance(value, dict):
        return {str(k): _describe(v, depth + 1) for k, v in list(value.items())[:64]}
    if isinstance(value, Dataset):
        return None  # described as a parent
    if isinstance(value, (types.FunctionType, types.MethodType)):
        fn = value.__func__ if isinstance(value, types.MethodType) else value
        h = hashlib.sha256()
        _code_digest(fn.__code__, h)
        for cell in fn.__closure__ or ():
            try:
                h.update(json.dumps(_describe(cell.cell_contents, depth + 1),
                                    sort_keys=True, default=str).encode())
            except ValueError:  # an empty cell
                pass
        return ["function", f"{fn.__module__}.{fn.__qualname__}", h.hexdigest()]
    if callable(value) and hasattr(value, "__dict__"):  # a callable object: its class + state
        return ["callable", f"{type(value).__module__}.{type(value).__qualname__}",
                {k: _describe(v, depth + 1) for k, v in sorted(vars(value).items())
                 if not k.startswith("__")}]
    if callable(value):
        return ["callable", getattr(value, "__qualname__", type(value).__qualname__)]
    return type(value).__qualname__


def _node(ds: Dataset, seen: dict[int, int]) -> Any:
    if id(ds) in seen:
        return ["ref", seen[id(ds)]]
    seen[id(ds)] = len(seen)
    options = {}
    for key, value in sorted(vars(ds).items()):
        if key in _SKIP_ATTRS or key == "_parents" or isinstance(value, Dataset):
            continue
        options[key] = _describe(value)
    return {
        "type": f"{type(ds).__module__}.{type(ds).__qualname__}",
        "name": ds.name,
        "options": options,
        "parents": [_node(p, seen) for p in ds._parents],
    }


def pipeline_fingerprint(ds: Dataset) -> str:
    """A 16-hex-digit hash of the description of ``ds`` and every stage upstream of it
    (see the module docstring).

    >>> a = pipeline_fingerprint(Dataset.range(4).map(lambda x: x + 1))
    >>> a == pipeline_fingerprint(Dataset.range(4).map(lambda x: x + 1))
    True
    >>> a == pipeline_fingerprint(Dataset.range(4).map(lambda x: x + 2))
    False
    """
    text = json.dumps(_node(ds, {}), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# --------------------------------------------------------------------------- dataset


class FileCacheDataset(Dataset):
    """The dataset of ``cache(path)`` (``keep_others=False``) and ``snapshot(path)``
    (``keep_others=True``); see the module docstring.

    >>> import os, tempfile
    >>> calls = []
    >>> path = os.path.join(tempfile.mkdtemp(), "cache")
    >>> ds = Dataset.range(3).map(lambda x: calls.append(x) or x * 10).cache(path)
    >>> type(ds).__name__, ds.to_list(), ds.to_list(), len(calls)    # second epoch read from the file
    ('FileCacheDataset', [0, 10, 20], [0, 10, 20], 3)
    """

    def __init__(self, parent: Dataset, path: str | os.PathLike, *, shard_size: int = 1024,
                 keep_others: bool = False) -> None:
        super().__init__()
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"`path` must be a directory path, got {type(path).__name__}")
        self._parents = (parent,)
        self.path = os.fspath(path)
        self.shard_size = positive_int("shard_size", shard_size)
        self._keep_others = bool(keep_others)
        self._fingerprint: str | None = None

    @property
    def name(self) -> str:
        return f"{'snapshot' if self._keep_others else 'cache'}({os.path.basename(self.path)})"

    @property
    def fingerprint(self) -> str:
        """The upstream pipeline's fingerprint (the name of its cache directory)."""
        if self._fingerprint is None:
            self._fingerprint = pipeline_fingerprint(self._parents[0])
        return self._fingerprint

    @property
    def directory(self) -> str:
        """Where the complete cache of this pipeline lives (or will)."""
        return os.path.join(self.path, self.fingerprint)

    def is_cached(self) -> bool:
        """Whether a complete, valid cache of this pipeline is on disk."""
        return self._manifest() is not None

    def _manifest(self) -> dict | None:
        """The manifest of the complete cache, or ``None``; a damaged cache directory is
        removed (and logged)."""
        directory = self.directory
        try:
            with open(os.path.join(directory, _MANIFEST), encoding="utf-8") as f:
                manifest = json.load(f)
        except FileNotFoundError:
            if os.path.isdir(directory):
                logger.warning("%s: cache directory without a manifest; rebuilding", directory)
                shutil.rmtree(directory, ignore_errors=True)
            return None
        except (OSError, ValueError):
            manifest = None
        ok = (isinstance(manifest, dict) and manifest.get("format") == _FORMAT
              and manifest.get("fingerprint") == self.fingerprint)
        if ok:
            for part in manifest["parts"]:
                try:
                    size = os.path.getsize(os.path.join(directory, part["name"]))
                except OSError:
                    ok = False
                    break
                if size != part["bytes"]:
                    ok = False
                    break
        if not ok:
            logger.warning("%s: damaged cache (manifest or parts do not match); rebuilding",
                           directory)
            shutil.rmtree(directory, ignore_errors=True)
            return None
        return manifest

    def _make_iterator(self, ctx: BuildContext) -> DatasetIterator:
        return _CacheIterator(self, ctx)


class _CacheIterator(DatasetIterator):
    """Reads the cache when it is complete, else writes it; a state restores the mode it
    was saved in (a state saved while writing resumes writing, even if the cache was
    completed since)."""

    def __init__(self, ds: FileCacheDataset, ctx: BuildContext) -> None:
        self._ds = ds
        self._ctx = ctx
        manifest = ds._manifest()
        self._inner: DatasetIterator = (
            _ReadIterator(ds, manifest) if manifest is not None else _WriteIterator(ds, ctx)
        )

    def __next__(self) -> Any:
        return next(self._inner)

    def get_state(self) -> dict[str, Any]:
        return self._inner.get_state()

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, "file_cache", ("mode",))
        if state["mode"] == "write" and not isinstance(self._inner, _WriteIterator):
            self._inner.close()
            self._inner = _WriteIterator(self._ds, self._ctx)
        elif state["mode"] == "read" and not isinstance(self._inner, _ReadIterator):
            manifest = self._ds._manifest()
            if manifest is None:
                raise StateError(
                    f"{self._ds.path}: the state was saved while reading a cache that is no "
                    "longer there; start a new iteration"
                )
            self._inner.close()
            self._inner = _ReadIterator(self._ds, manifest)
        self._inner.set_state(state)

    def close(self) -> None:
        inner = getattr(self, "_inner", None)
        if inner is not None:
            inner.close()


# --------------------------------------------------------------------------- reading


class _ReadIterator(DatasetIterator):
    def __init__(self, ds: FileCacheDataset, manifest: dict) -> None:
        self._ds = ds
        self._dir = ds.directory
        self._parts = [p["name"] for p in manifest["parts"]]
        self._part = 0
        self._reader: TFRecordReader | None = None

    def _open(self, k: int) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        self._part = k
        if k < len(self._parts):
            self._reader = TFRecordReader(os.path.join(self._dir, self._parts[k]),
                                          compression=None, verify=False)

    def __next__(self) -> Any:
        while True:
            reader = self._reader
            if reader is None:
                if self._part >= len(self._parts):
                    raise StopIteration
                self._open(self._part)
                continue
            try:
                record = next(reader)
            except StopIteration:
                self._open(self._part + 1)
                continue
            try:
                return pickle.loads(record)
            except Exception as exc:
                raise CorruptRecordError(
                    f"cached element does not unpickle: {exc}", path=reader.path
                ) from exc

    def get_state(self) -> dict[str, Any]:
        reader = None if self._reader is None else self._reader.get_state()
        return {"type": "file_cache", "mode": "read", "fingerprint": self._ds.fingerprint,
                "part": self._part, "reader": reader}

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, "file_cache", ("mode",))
        if state["mode"] != "read" or state.get("fingerprint") != self._ds.fingerprint:
            raise StateError(
                f"{self._dir}: the state was saved while the cache was being written (or for "
                "another pipeline); restore it with dataset.iterator(state) on the pipeline "
                "that saved it"
            )
        self._open(int(state["part"]))
        if self._reader is not None and state["reader"] is not None:
            self._reader.set_state(state["reader"])

    def close(self) -> None:
        reader = getattr(self, "_reader", None)
        if reader is not None:
            self._reader = None
            reader.close()


# --------------------------------------------------------------------------- writing


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


class _WriteIterator(DatasetIterator):
    """Yields the parent's elements and writes them into a staging directory."""

    def __init__(self, ds: FileCacheDataset, ctx: BuildContext) -> None:
        self._ds = ds
        self._parent = ds._parents[0]._build(ctx)
        self._writer: TFRecordWriter | None = None
        self._staging: str | None = None
        self._part = 0
        self._in_part = 0
        self._bytes = 0
        self._parts: list[dict[str, Any]] = []
        self._done = False
        try:
            self._start_staging()
        except OSError as exc:  # a read-only or full disk: still yield the elements
            logger.warning("%s: cannot write the cache (%s); reading without it", ds.path, exc)
            self._staging = None

    # -- staging directories
    def _start_staging(self) -> None:
        os.makedirs(self._ds.path, exist_ok=True)
        host = socket.gethostname().replace("-", "_")
        name = f"{_STAGING}{self._ds.fingerprint}-{host}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self._staging = os.path.join(self._ds.path, name)
        os.mkdir(self._staging)

    def _clean_stale(self) -> None:
        host = socket.gethostname().replace("-", "_")
        for entry in os.listdir(self._ds.path):
            if not entry.startswith(_STAGING):
                continue
            full = os.path.join(self._ds.path, entry)
            fields = entry[len(_STAGING):].split("-")
            stale = os.path.exists(os.path.join(full, _CLOSED))
            if len(fields) == 4 and fields[1] == host and fields[2].isdigit():
                stale = stale or not _pid_alive(int(fields[2]))
            if stale:
                shutil.rmtree(full, ignore_errors=True)

    def _abandon(self, exc: BaseException) -> None:
        logger.warning("%s: writing the cache failed (%s); it will be written again",
                       self._ds.path, exc)
        self._close_writer()
        if self._staging is not None:
            shutil.rmtree(self._staging, ignore_errors=True)
        self._staging = None

    def _staging_dir(self) -> str:
        if self._staging is None:
            raise RuntimeError("the cache writer has no staging directory")
        return self._staging

    def _part_name(self, k: int) -> str:
        return f"part-{k:05d}.tfrecord"

    def _close_writer(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def _write(self, item: Any) -> None:
        if self._writer is None:
            self._writer = TFRecordWriter(os.path.join(self._staging_dir(), self._part_name(self._part)))
        data = pickle.dumps(item, protocol=pickle.HIGHEST_PROTOCOL)
        self._writer.write(data)
        self._in_part += 1
        self._bytes += len(data) + 16
        if self._in_part >= self._ds.shard_size:
            self._finish_part()

    def _finish_part(self) -> None:
        self._close_writer()
        self._parts.append({"name": self._part_name(self._part), "count": self._in_part,
                            "bytes": self._bytes})
        self._part += 1
        self._in_part = 0
        self._bytes = 0

    def _commit(self) -> None:
        if self._in_part:
            self._finish_part()
        manifest = {"format": _FORMAT, "fingerprint": self._ds.fingerprint,
                    "parts": self._parts, "count": sum(p["count"] for p in self._parts)}
        replace_file(os.path.join(self._staging_dir(), _MANIFEST),
                     json.dumps(manifest, indent=1).encode())
        final = self._ds.directory
        staging, self._staging = self._staging_dir(), None
        try:
            os.rename(staging, final)
        except OSError:  # another writer finished first: keep its cache
            shutil.rmtree(staging, ignore_errors=True)
            return
        self._clean_stale()
        if not self._ds._keep_others:
            for entry in os.listdir(self._ds.path):
                full = os.path.join(self._ds.path, entry)
                if (entry != self._ds.fingerprint and not entry.startswith(".")
                        and os.path.isfile(os.path.join(full, _MANIFEST))):
                    shutil.rmtree(full, ignore_errors=True)

    # -- iteration
    def __next__(self) -> Any:
        if self._done:
            raise StopIteration
        try:
            item = next(self._parent)
        except StopIteration:
            self._done = True
            if self._staging is not None:
                try:
                    self._commit()
                except OSError as exc:
                    self._abandon(exc)
            raise
        if self._staging is not None:
            try:
                self._write(item)
            except (OSError, pickle.PicklingError, TypeError, AttributeError) as exc:
                self._abandon(exc)
        return item

    def get_state(self) -> dict[str, Any]:
        if self._writer is not None:
            self._writer.flush()
        return {"type": "file_cache", "mode": "write", "fingerprint": self._ds.fingerprint,
                "parent": self._parent.get_state(), "done": self._done,
                "staging": None if self._staging is None else os.path.basename(self._staging),
                "parts": list(self._parts), "in_part": self._in_part, "bytes": self._bytes}

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, "file_cache", ("mode",))
        if state["mode"] != "write":
            raise StateError(
                f"{self._ds.path}: the state was saved while reading a cache that is no "
                "longer there (or is for another pipeline); start a new iteration"
            )
        check_state(state, "file_cache", ("parent", "done", "staging", "parts", "in_part",
                                          "bytes"))
        self._parent.set_state(state["parent"])
        self._done = bool(state["done"])
        if self._staging is None:
            return
        self._close_writer()
        old = state["staging"]
        resumed = False
        if old is not None and state.get("fingerprint") == self._ds.fingerprint:
            resumed = self._copy_from(os.path.join(self._ds.path, old), state)
        if not resumed:
            logger.info("%s: the cache being written when the state was saved is gone; "
                        "this iteration only reads", self._ds.path)
            shutil.rmtree(self._staging, ignore_errors=True)
            self._staging = None

    def _copy_from(self, old: str, state: dict[str, Any]) -> bool:
        """Continue the staging directory ``old`` in ours: its finished parts and the
        first ``bytes`` bytes of the part being written. ``False`` if it is gone."""
        try:
            parts = [dict(p) for p in state["parts"]]
            for p in parts:
                src = os.path.join(old, p["name"])
                if os.path.getsize(src) != p["bytes"]:
                    return False
                shutil.copyfile(src, os.path.join(self._staging_dir(), p["name"]))
            in_part, nbytes = int(state["in_part"]), int(state["bytes"])
            self._parts, self._part = parts, len(parts)
            self._in_part, self._bytes = in_part, nbytes
            if in_part:  # re-frame the first `in_part` records of the part being written
                src = os.path.join(old, self._part_name(self._part))
                if os.path.getsize(src) < nbytes:
                    return False
                reader = TFRecordReader(src, compression=None)
                try:
                    head = [next(reader) for _ in range(in_part)]
                finally:
                    reader.close()
                self._writer = TFRecordWriter(
                    os.path.join(self._staging_dir(), self._part_name(self._part)))
                for record in head:
                    self._writer.write(record)
            return True
        except (OSError, StopIteration, CorruptRecordError):
            return False

    def close(self) -> None:
        self._close_writer()
        staging = getattr(self, "_staging", None)
        if staging is not None and not self._done:
            try:  # unfinished: keep it for a resume in this process, but let it be cleaned
                with open(os.path.join(staging, _CLOSED), "wb"):
                    pass
            except OSError:
                pass
        parent = getattr(self, "_parent", None)
        if parent is not None:
            parent.close()
