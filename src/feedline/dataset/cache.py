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
  every stage's type, name and options, all of each value and never a sample of it —
  numpy arrays by their dtype, shape and bytes, lists, tuples, sets and dicts of any
  length item by item, numbers exactly, paths; functions by their bytecode, constants,
  defaults, closure cells and the module globals they read (data, functions, classes
  and modules; another object there, such as a logger, by its type); ``functools.partial`` by its
  function and arguments; bound methods by their function and object; other objects by
  their class and every attribute (``__dict__`` and ``__slots__``), or what pickle keeps
  of them; tensors and frames (anything numpy reads through ``__array__``) by their
  values. A changed pipeline therefore writes a new cache. A value none of these
  describe (a generator object, an unpicklable object without attributes) makes
  ``cache()`` raise ``TypeError`` naming the stage and option rather than risk replaying
  a stale cache. The *contents* of the files a source reads are not part of it: after
  rewriting input files in place, delete the cache. A source built from a reader
  function is fingerprinted by that function (its code and what it reads).
  ``cache(path)`` keeps one pipeline per directory: it removes the caches of other
  fingerprints in ``path`` once its own is complete, so pipelines that share a path
  evict each other — under ``shard``, give each rank its own path
  (``f"cache/rank{rank}"``) or use ``snapshot(path)``, which keeps every fingerprint's
  directory (each rank's shard has its own), so switching between pipelines reuses each
  one's snapshot.
* **A full disk** (or a read-only one, or an element that does not pickle) drops the
  cache being written: the iteration keeps yielding the parent's elements to the end,
  ``get_state()`` keeps working (the state then names no staging directory), the
  partial files are removed, and a later iteration writes the cache again.
* **Two writers** (two iterators, two processes) each write their own staging
  directory; the first to finish wins the rename and the other discards its copy.
* **Resume.** While writing, the state holds the parent's state and where the writer
  stands (staging directory, part, bytes written); a resumed iterator yields exactly
  the remaining elements and continues the cache in a new staging directory (copying
  the finished part prefix) when the old one is still there, or else just yields them
  (the cache is then written by a later iteration). While reading, the state is the
  part and the TFRecord reader's position. Every field of a state is checked before
  use (:class:`~feedline.exceptions.InvalidStateError`): the staging directory must be
  one of this pipeline's, directly inside ``path`` and not a link, and the parts must
  carry the names this writer gives them, so that no state can make the cache copy
  (and a later epoch unpickle) a file from elsewhere.

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

import functools
import hashlib
import json
import logging
import os
import pickle
import re
import shutil
import types
import uuid
from typing import Any

import numpy as np

from feedline._internal.atomic import replace_file
from feedline._internal.pid import host_tag, left_by_dead_writers
from feedline._internal.state import confined_name, state_bool, state_int, state_list
from feedline._internal.validate import positive_int
from feedline.dataset.base import BuildContext, Dataset
from feedline.dataset.iterator import DatasetIterator, check_state
from feedline.exceptions import CorruptRecordError, InvalidStateError, StateError
from feedline.formats.tfrecord import TFRecordReader, TFRecordWriter

__all__ = ["FileCacheDataset", "pipeline_fingerprint"]

logger = logging.getLogger(__name__)

_MANIFEST = "manifest.json"
_STAGING = ".staging-"
# a staging folder's name: _STAGING + <fingerprint>-<host>-<pid>-<random>
_STAGING_NAME = re.compile(re.escape(_STAGING) + r"[^-]+-(?P<host>[^-]+)-(?P<pid>\d+)-[^-]+$")
_CLOSED = "CLOSED"
_FORMAT = "feedline-cache-1"
_SKIP_ATTRS = {"_iterations", "_items", "_pool", "_pools", "_lock", "_fingerprint"}


# --------------------------------------------------------------------------- fingerprint


#: Nesting deeper than this is refused rather than cut off (a cut-off description would
#: let two different pipelines share a fingerprint).
_MAX_DEPTH = 64


class _Unhashable(TypeError):
    """A value the fingerprint cannot describe; ``cache(path)`` refuses the pipeline."""


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _const(const: Any) -> str:
    """A constant of compiled code, spelled the same in every process (a frozenset's
    order follows string hashing, which changes from process to process)."""
    if isinstance(const, frozenset):
        return "frozenset(" + ",".join(sorted(_const(c) for c in const)) + ")"
    if isinstance(const, tuple):
        return "(" + ",".join(_const(c) for c in const) + ")"
    return repr(const)


def _code_digest(code: types.CodeType, h: Any, depth: int = 0) -> None:
    h.update(code.co_code)
    h.update(repr(code.co_names).encode())
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            if depth >= _MAX_DEPTH:
                raise _Unhashable("code nested too deeply")
            _code_digest(const, h, depth + 1)
        else:
            h.update(_const(const).encode())


def _function(fn: types.FunctionType, depth: int, seen: set[int]) -> Any:
    """A function by its code, defaults, closure cells and the module globals its code
    reads (a changed constant such as ``SCALE = 2`` changes the fingerprint); functions
    and classes met there are described by name (and, for functions, their code)."""
    h = hashlib.sha256()
    _code_digest(fn.__code__, h)
    parts = [_describe(fn.__defaults__, depth + 1, seen),
             _describe(fn.__kwdefaults__, depth + 1, seen)]
    for cell in fn.__closure__ or ():
        try:
            contents = cell.cell_contents
        except ValueError:  # an empty cell
            parts.append("<empty cell>")
            continue
        parts.append(_describe(contents, depth + 1, seen))
    names = set(fn.__code__.co_names)
    for const in fn.__code__.co_consts:  # the names nested functions and lambdas read
        if isinstance(const, types.CodeType):
            names.update(const.co_names)
    for name in sorted(names):
        if name in fn.__globals__:
            parts.append([name, _global(fn.__globals__[name], depth + 1, seen)])
    h.update(json.dumps(parts, sort_keys=True).encode())
    return ["function", f"{fn.__module__}.{fn.__qualname__}", h.hexdigest()]


#: Module globals a function reads are described when they are data, code or a module;
#: any other object there (a logger, a lock, a client) is named by its type only.
_GLOBAL_KINDS = (type(None), bool, int, float, str, bytes, range, os.PathLike, np.ndarray,
                 np.generic, list, tuple, dict, set, frozenset, type, types.ModuleType,
                 types.FunctionType, functools.partial)


def _global(value: Any, depth: int, seen: set[int]) -> Any:
    if isinstance(value, _GLOBAL_KINDS):
        try:
            return _describe(value, depth, seen)
        except _Unhashable:
            pass
    return ["global object", f"{type(value).__module__}.{type(value).__qualname__}"]


def _state_of(value: Any) -> dict[str, Any] | None:
    """The attributes of an object: its ``__dict__`` and every ``__slots__`` entry set."""
    state: dict[str, Any] = {}
    found = False
    if hasattr(value, "__dict__"):
        found = True
        state.update(vars(value))
    for cls in type(value).__mro__:
        slots = cls.__dict__.get("__slots__")
        if slots is None:
            continue
        found = True
        for slot in (slots,) if isinstance(slots, str) else slots:
            if slot not in ("__dict__", "__weakref__") and hasattr(value, slot):
                state[slot] = getattr(value, slot)
    return state if found else None


def _describe(value: Any, depth: int = 0, seen: set[int] | None = None) -> Any:
    """A JSON-able description of an option value that changes whenever the value does
    (see the module docstring); raises ``_Unhashable`` for what it cannot describe."""
    if depth > _MAX_DEPTH:
        raise _Unhashable(f"nested more than {_MAX_DEPTH} levels deep")
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value if type(value) is int else [type(value).__qualname__, int(value)]
    if isinstance(value, float):
        return ["float", value.hex()]  # exact, and NaN/inf are JSON too
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        return data.hex() if len(data) <= 64 else _digest(data)
    if isinstance(value, os.PathLike):
        return ["path", os.fspath(value)]
    if isinstance(value, range):
        return ["range", value.start, value.stop, value.step]
    if isinstance(value, np.ndarray):
        if value.dtype.hasobject:
            return ["ndarray", str(value.dtype), list(value.shape),
                    _describe(value.tolist(), depth + 1, seen)]
        return ["ndarray", value.dtype.str, list(value.shape),
                _digest(np.ascontiguousarray(value).tobytes())]
    if isinstance(value, np.generic):
        return ["numpy", value.dtype.str, _digest(np.asarray(value).tobytes())]
    if isinstance(value, type):
        return ["class", f"{value.__module__}.{value.__qualname__}"]
    if isinstance(value, types.ModuleType):
        return ["module", value.__name__]
    if isinstance(value, Dataset):  # in a list of inputs, in a closure: its whole pipeline
        return ["dataset", pipeline_fingerprint(value)]
    seen = set() if seen is None else seen
    if id(value) in seen:
        return ["cycle"]
    seen.add(id(value))
    try:
        return _describe_container(value, depth, seen)
    finally:
        seen.discard(id(value))


def _describe_container(value: Any, depth: int, seen: set[int]) -> Any:
    if isinstance(value, (list, tuple)):
        if all(x is None or type(x) in (bool, int, str) for x in value):  # fast and exact
            return [type(value).__name__, len(value), _digest(repr(value).encode())]
        items = [_describe(x, depth + 1, seen) for x in value]
        return [type(value).__name__, len(value),
                _digest(json.dumps(items, sort_keys=True).encode())]
    if isinstance(value, (set, frozenset)):
        items = sorted(json.dumps(_describe(x, depth + 1, seen), sort_keys=True) for x in value)
        return [type(value).__name__, _digest(json.dumps(items).encode())]
    if isinstance(value, dict):
        items = sorted([json.dumps(_describe(k, depth + 1, seen), sort_keys=True),
                        _describe(v, depth + 1, seen)] for k, v in value.items())
        return ["dict", len(items), _digest(json.dumps(items, sort_keys=True).encode())]
    if isinstance(value, functools.partial):
        return ["partial", _describe(value.func, depth + 1, seen),
                _describe(value.args, depth + 1, seen),
                _describe(value.keywords, depth + 1, seen)]
    if isinstance(value, types.MethodType):
        return ["method", _describe(value.__func__, depth + 1, seen),
                _describe(value.__self__, depth + 1, seen)]
    if isinstance(value, types.FunctionType):
        return _function(value, depth, seen)
    if isinstance(value, (types.BuiltinFunctionType, types.BuiltinMethodType)):
        owner = getattr(value, "__self__", None)
        if owner is None or isinstance(owner, types.ModuleType):  # a function of a module
            return ["builtin", getattr(owner, "__name__", None), value.__qualname__]
        return ["builtin method", value.__qualname__,  # bound: its object counts (dict.get)
                _describe(owner, depth + 1, seen)]
    if isinstance(value, (types.GeneratorType, types.CoroutineType)):
        raise _Unhashable(f"a {type(value).__name__} (its position cannot be described)")
    if hasattr(value, "__array__") and not isinstance(value, Dataset):
        # a torch/JAX tensor, a pandas frame: its values (its attributes do not hold them)
        try:
            array = np.asarray(value)
        except Exception as exc:  # noqa: BLE001 - any conversion failure: cannot describe
            raise _Unhashable(f"a {type(value).__qualname__} whose values numpy cannot "
                              f"read ({exc})") from exc
        return [f"{type(value).__module__}.{type(value).__qualname__}",
                _describe(array, depth + 1, seen)]
    state = _state_of(value)
    if state is not None:  # an object: its class and every attribute (``__slots__`` too)
        return ["object", f"{type(value).__module__}.{type(value).__qualname__}",
                {k: _describe(v, depth + 1, seen) for k, v in sorted(state.items())
                 if k not in _SKIP_ATTRS}]
    try:  # no attributes to read (a C type): what pickle keeps of it
        return ["pickle", type(value).__qualname__,
                _digest(pickle.dumps(value, protocol=4))]
    except Exception as exc:  # noqa: BLE001 - any pickling failure means "cannot describe"
        raise _Unhashable(f"a {type(value).__qualname__} object (not picklable: {exc})") from exc


def _node(ds: Dataset, seen: dict[int, int]) -> Any:
    if id(ds) in seen:
        return ["ref", seen[id(ds)]]
    seen[id(ds)] = len(seen)
    options = {}
    for key, value in sorted((_state_of(ds) or {}).items()):
        if key in _SKIP_ATTRS or key == "_parents" or isinstance(value, Dataset):
            continue
        try:
            options[key] = _describe(value)
        except _Unhashable as exc:
            raise TypeError(
                f"cache(): cannot fingerprint option {key.lstrip('_')!r} of stage "
                f"{ds.name!r}: {exc}. The fingerprint must cover everything that changes "
                "the pipeline's output, so this pipeline cannot be cached; use values "
                "feedline can describe (numbers, strings, arrays, lists, dicts, functions, "
                "functools.partial, objects with attributes or picklable ones)"
            ) from exc
    return {
        "type": f"{type(ds).__module__}.{type(ds).__qualname__}",
        "name": ds.name,
        "options": options,
        "parents": [_node(p, seen) for p in ds._parents],
    }


def pipeline_fingerprint(ds: Dataset) -> str:
    """A 16-hex-digit hash of the description of ``ds`` and every stage upstream of it
    (see the module docstring).

    Args:
        ds: the last stage of the pipeline; a value the fingerprint cannot describe
            raises ``TypeError`` naming the stage and option.

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

    Args:
        parent: the pipeline whose output is cached.
        path: the cache directory (not a path: ``TypeError``); the cache lives in
            ``<path>/<fingerprint>/``.
        shard_size: elements per part file (a positive int, else
            ``ValueError``/``TypeError``).
        keep_others: ``False`` removes the caches of other fingerprints in ``path`` once
            this one is complete; ``True`` keeps them.

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
            parts = manifest.get("parts")
            ok = isinstance(parts, list) and all(  # only this writer's part names
                isinstance(p, dict) and p.get("name") == f"part-{k:05d}.tfrecord"
                and isinstance(p.get("bytes"), int) for k, p in enumerate(parts))
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
        if state["mode"] not in ("read", "write"):
            raise InvalidStateError(
                f"state of stage 'file_cache': `mode` must be 'read' or 'write', got "
                f"{state['mode']!r}")
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
        self._open(state_int(state, "part", "file_cache", high=len(self._parts)))
        if self._reader is not None and state.get("reader") is not None:
            self._reader.set_state(state["reader"])

    def close(self) -> None:
        reader = getattr(self, "_reader", None)
        if reader is not None:
            self._reader = None
            reader.close()


# --------------------------------------------------------------------------- writing


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
        name = (f"{_STAGING}{self._ds.fingerprint}-{host_tag()}-{os.getpid()}-"
                f"{uuid.uuid4().hex[:8]}")
        self._staging = os.path.join(self._ds.path, name)
        os.mkdir(self._staging)

    def _clean_stale(self) -> None:
        """Remove staging folders that were closed, or whose writer (of this machine) died."""
        path = self._ds.path
        stale = set(left_by_dead_writers(path, _STAGING, _STAGING_NAME))
        stale.update(entry for entry in os.listdir(path) if entry.startswith(_STAGING)
                     and os.path.exists(os.path.join(path, entry, _CLOSED)))
        for entry in stale:
            shutil.rmtree(os.path.join(path, entry), ignore_errors=True)

    def _abandon(self, exc: BaseException) -> None:
        """Drop the cache being written (a full disk, an item that does not pickle) and
        keep yielding the parent's items; a later iteration writes it again."""
        logger.warning("%s: writing the cache failed (%s); it will be written again",
                       self._ds.path, exc)
        try:
            self._close_writer()
        except OSError:  # the buffered tail cannot be written either: it is dropped
            pass
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
        writer, self._writer = self._writer, None  # closed once, even if closing fails
        if writer is not None:
            writer.close()

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
            try:
                self._writer.flush()
            except OSError as exc:  # a full disk: drop the cache, the state stays valid
                self._abandon(exc)
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
        done, old, parts = self._checked(state)  # before any of it is used
        self._parent.set_state(state["parent"])
        self._done = done
        if self._staging is None:
            return
        self._close_writer()
        resumed = False
        if old is not None and state.get("fingerprint") == self._ds.fingerprint:
            resumed = self._copy_from(old, parts, state)
        if not resumed:
            logger.info("%s: the cache being written when the state was saved is gone; "
                        "this iteration only reads", self._ds.path)
            shutil.rmtree(self._staging, ignore_errors=True)
            self._staging = None

    def _checked(self, state: dict[str, Any]) -> tuple[bool, str | None, list[dict]]:
        """``(done, staging directory or None, parts)`` of a write-mode state, every field
        checked: the staging directory is one of this pipeline's in ``path`` (a plain
        name, no link), the parts are named as this writer names them, counts and sizes
        in range. Anything else raises InvalidStateError, so that a tampered state
        cannot make the cache copy (and later unpickle) a file from elsewhere."""
        kind = "file_cache"
        done = state_bool(state, "done", kind)
        name = confined_name(state, "staging", kind, optional=True)
        if name is not None and not name.startswith(f"{_STAGING}{self._ds.fingerprint}-"):
            raise InvalidStateError(f"state of stage {kind!r}: `staging` {name!r} is not a "
                                    "staging directory of this pipeline")
        parts = []
        size = self._ds.shard_size
        for k, part in enumerate(state_list(state, "parts", kind)):
            if not isinstance(part, dict):
                raise InvalidStateError(f"state of stage {kind!r}: part {k} is not a dict")
            if part.get("name") != self._part_name(k):
                raise InvalidStateError(f"state of stage {kind!r}: part {k} must be named "
                                        f"{self._part_name(k)!r}, got {part.get('name')!r}")
            parts.append({"name": part["name"],
                          "count": state_int(part, "count", kind, low=1, high=size),
                          "bytes": state_int(part, "bytes", kind)})
        state_int(state, "in_part", kind, high=size - 1)
        state_int(state, "bytes", kind)
        old = None if name is None else os.path.join(self._ds.path, name)
        if old is not None and (os.path.islink(old) or os.path.realpath(os.path.dirname(old))
                                != os.path.realpath(self._ds.path)):
            raise InvalidStateError(f"state of stage {kind!r}: `staging` {name!r} is not a "
                                    f"directory of {self._ds.path}")
        return done, old, parts

    def _copy_from(self, old: str, parts: list[dict], state: dict[str, Any]) -> bool:
        """Continue the staging directory ``old`` in ours: its finished ``parts`` and the
        first ``bytes`` bytes of the part being written (both checked by
        :meth:`_checked`; part files that are links are not followed). ``False`` if it
        is gone."""
        try:
            for p in parts:
                src = os.path.join(old, p["name"])
                if os.path.islink(src) or os.path.getsize(src) != p["bytes"]:
                    return False
                shutil.copyfile(src, os.path.join(self._staging_dir(), p["name"]))
            in_part, nbytes = int(state["in_part"]), int(state["bytes"])
            self._parts, self._part = parts, len(parts)
            self._in_part, self._bytes = in_part, nbytes
            if in_part:  # re-frame the first `in_part` records of the part being written
                src = os.path.join(old, self._part_name(self._part))
                if os.path.islink(src) or os.path.getsize(src) < nbytes:
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
        try:
            self._close_writer()
        except OSError as exc:  # a full disk: the unfinished cache is dropped
            self._abandon(exc)
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
