"""``pack_images(..., backend="ray")`` (the internals of ``feedline pack --ray``): Ray tasks read, encode and write the shards.

:func:`pack_with_tasks` is what :func:`feedline.image.pack.pack_images` runs with
``backend="ray"``; the files are byte-identical to a local pack with the same arguments
(``.rec``, ``.idx``, ``.tfrecord``, the ``.lst`` and the shard set's manifest). The
record files are written on the cluster, not by the calling process, in two rounds of
tasks (``num_workers`` at once), all on the shared file system beside the output:

1. **Encode.** The list, in write order, is cut into chunks of consecutive entries.
   A task reads, decodes and re-encodes its chunk's images and writes the finished
   records into one fragment file in a scratch folder beside the output
   (``.<first shard's name>.parts-<host>-<pid>-<random>/<chunk>``), grouped by
   *lane*: the chunk's ``j``-th written record goes to lane ``j % num_shards``. It
   returns each lane's byte range, keys and record offsets, and the entries it skipped.
2. **Assemble.** Records go to shards round robin over the records *written*, so once
   every chunk is back the caller knows how many records precede each chunk (``W``),
   and lane ``j`` of that chunk belongs to shard ``(W + j) % num_shards``. One task per
   shard concatenates its lanes, chunk after chunk, into the shard's temporary file
   (:meth:`~feedline.sharded.ShardedWriter.hand_over`) and writes its ``.idx`` with the
   offsets moved by where each lane landed — the bytes a local pack writes, since a
   record's framing does not depend on where it starts.

The calling process then checks that it sees each shard at the size its task reported
(else the output folder is not one shared file system: ``OSError``) and commits the set
with the shard set's manifest
(:class:`~feedline.sharded.ShardedWriter`: pending manifest, renames, complete
manifest) only when every task succeeded. A failing image under ``on_error="raise"``
(or any other failure) cancels the tasks still running, waits for them, and deletes
the fragments and temporary files: no manifest, no shard file, nothing half written.
The fragment folder of a calling process that was killed outright stays behind until
the next pack into the same folder removes it (its process no longer alive).
Every task writes its file under a name of its own and renames it into place, and its
bytes depend only on its inputs, so a task lost with its node and rerun by Ray (up to
3 times) writes the same file. An image's own exception is not retried: it is raised
here as its original type with the task's traceback as ``__cause__``
(:class:`~feedline.exceptions.RemoteTraceback`).

When no task has finished for 5 seconds the cluster is probed: gone or unreachable, it
is a :class:`~feedline.exceptions.ClusterUnavailableError` naming the stage (nothing
committed, the temporary files removed), never a hang.

Each task's report names the process and Ray node that wrote the file; they are logged
on the ``feedline.image._pack_ray`` logger at ``DEBUG`` level.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import uuid
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from feedline._internal.pid import host_tag, left_by_dead_writers
from feedline.exceptions import ClusterUnavailableError, PipelineError
from feedline.image.listfile import write_list
from feedline.runtime.ray_executor import SCHEDULING, connect, reachable
from feedline.runtime.workers import pack_exception, unpack_exception

__all__ = ["pack_with_tasks", "chunk_ranges"]

logger = logging.getLogger(__name__)

_STAGE = "pack"
_MAX_CHUNK = 256  # images per encode task at most
_COPY = 1 << 20
_PROBE_EVERY = 5.0  # seconds without a finished task before the cluster is probed


def chunk_ranges(count: int, num_workers: int) -> list[tuple[int, int]]:
    """The ``[start, stop)`` ranges of the list the encode tasks get: about four tasks
    per worker, at most 256 images each (the output does not depend on the cut).

    Args:
        count: entries in the list.
        num_workers: tasks in flight at once.

    >>> chunk_ranges(10, 1)
    [(0, 3), (3, 6), (6, 9), (9, 10)]
    """
    size = max(1, min(_MAX_CHUNK, -(-count // (4 * num_workers))))
    return [(start, min(start + size, count)) for start in range(0, count, size)]


# ------------------------------------------------------------------ task side
def _where() -> dict[str, Any]:
    import ray

    return {"pid": os.getpid(), "node": ray.get_runtime_context().get_node_id()}


def _replace_whole(path: str, fill: Callable[[str], Any], scratch: str) -> Any:
    """``fill(tmp)`` writes a file of this attempt's own in the folder ``scratch``; it is
    then renamed to ``path`` (a rerun of a lost task replaces it with the same bytes; what
    a lost attempt left in ``scratch`` goes with the folder)."""
    tmp = os.path.join(scratch, f"{os.path.basename(path)}.{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        out = fill(tmp)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return out


def _encode_chunk(encode: Callable, items: list, start: int, num_shards: int, fmt: str,
                  path: str) -> dict[str, Any]:
    """Round 1: encode ``items`` (list positions ``start``...) into the fragment file
    ``path``, lane by lane. Returns the lanes, the skipped entries and the writer; an
    exception comes back as ``{"error": ...}`` (so that Ray does not retry it)."""
    position: int | None = start
    try:
        lanes: list[list[tuple[int, bytes]]] = [[] for _ in range(num_shards)]
        skipped = []
        for position, item in enumerate(items, start):
            item, record, reason = encode(item)
            if record is None:
                skipped.append((position, item.index, item.path, reason))
                continue
            lanes[(sum(map(len, lanes))) % num_shards].append((item.index, record))
        position = None
        spans = _replace_whole(path, lambda tmp: _write_lanes(tmp, lanes, fmt), os.path.dirname(path))
        return {"lanes": spans, "skipped": skipped, "by": _where()}
    except Exception as exc:  # noqa: BLE001 - reported to the caller at its position
        return {"error": pack_exception(exc, phase="packing", worker=0), "position": position}


def _write_lanes(path: str, lanes: list[list[tuple[int, bytes]]], fmt: str) -> list:
    """Write the records lane after lane; per lane ``(start, size, keys, offsets)`` with
    record offsets relative to the lane's start."""
    from feedline.formats.recordio import RecordIOWriter
    from feedline.formats.tfrecord import TFRecordWriter

    writer: Any = RecordIOWriter(path) if fmt == "recordio" else TFRecordWriter(path)
    spans = []
    start = 0
    with writer:
        for lane in lanes:
            offsets = []
            for _, record in lane:
                at = writer.write(record)
                if fmt == "recordio":
                    offsets.append(at - start)
            writer.flush()
            end = os.path.getsize(path)
            spans.append((start, end - start, [key for key, _ in lane], offsets))
            start = end
    return spans


def _assemble_shard(parts: list[tuple[str, int, int, list[int], list[int]]], records: str,
                    index: str | None, scratch: str) -> dict[str, Any]:
    """Round 2: concatenate the lanes ``parts`` (fragment, start, size, keys, offsets)
    into the shard file ``records`` and, for RecordIO, its ``.idx`` ``index``."""
    try:
        def fill_records(tmp: str) -> list[str]:
            lines = []
            with open(tmp, "wb") as out:
                for fragment, start, size, keys, offsets in parts:
                    base = out.tell()
                    lines += [f"{key}\t{base + off}\n" for key, off in zip(keys, offsets)]
                    with open(fragment, "rb") as f:
                        f.seek(start)
                        _copy(f, out, size, fragment)
            return lines

        lines = _replace_whole(records, fill_records, scratch)
        if index is not None:
            _replace_whole(index, lambda tmp: _write_text(tmp, "".join(lines)), scratch)
        return {"count": sum(len(keys) for _, _, _, keys, _ in parts),
                "size": os.path.getsize(records), "by": _where()}
    except Exception as exc:  # noqa: BLE001 - reported to the caller
        return {"error": pack_exception(exc, phase="writing a shard", worker=0), "position": None}


def _copy(src: Any, dst: Any, size: int, name: str) -> None:
    left = size
    while left:
        block = src.read(min(_COPY, left))
        if not block:
            raise OSError(f"{name}: fragment ends {left} bytes early")
        dst.write(block)
        left -= len(block)


def _write_text(path: str, text: str) -> None:
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(text)


# ------------------------------------------------------------------ caller side
class _Tasks:
    """Ray tasks of one pack, at most ``limit`` in flight, results in submission order;
    the first failure cancels the rest and waits for them (nothing writes after it)."""

    def __init__(self, ray: Any, limit: int) -> None:
        self.ray = ray
        self.limit = limit
        self.pending: dict[Any, int] = {}  # ref -> submission number

    def run(self, fn: Any, calls: Sequence[tuple], on_done: Callable[[int, dict], None]) -> list[dict]:
        remote = self.ray.remote(fn).options(num_cpus=1, max_retries=3, retry_exceptions=False,
                                             name=f"feedline:{_STAGE}",
                                             scheduling_strategy=SCHEDULING)
        results: list[dict | None] = [None] * len(calls)
        todo = iter(enumerate(calls))
        try:
            while True:
                while len(self.pending) < self.limit:
                    call = next(todo, None)
                    if call is None:
                        break
                    self.pending[remote.remote(*call[1])] = call[0]
                if not self.pending:
                    return [r for r in results if r is not None]
                done, _ = self.ray.wait(list(self.pending), num_returns=1, timeout=_PROBE_EVERY)
                if not done:
                    if not reachable(self.ray):
                        raise ClusterUnavailableError(
                            f"stage {_STAGE!r}: the Ray cluster cannot be reached (stopped, "
                            "or its head node is gone); nothing was committed")
                    continue
                number = self.pending.pop(done[0])
                try:
                    result = self.ray.get(done[0])
                except self.ray.exceptions.RayError as exc:
                    raise _lost(self.ray, exc) from exc
                if "error" in result:
                    raise unpack_exception(result["error"], stage=_STAGE, position=result["position"])
                results[number] = result
                on_done(number, result)
        except BaseException as exc:
            if isinstance(exc, ClusterUnavailableError):
                self.pending.clear()  # nothing left to cancel or wait for
            self.stop()
            raise

    def stop(self) -> None:
        """Cancel what is still in flight and wait until it has stopped."""
        refs = list(self.pending)
        self.pending.clear()
        for ref in refs:
            try:
                self.ray.cancel(ref)
            except Exception:  # noqa: BLE001 - finished already, or the cluster is gone
                pass
        for ref in refs:
            try:
                self.ray.get(ref, timeout=60)
            except Exception:  # noqa: BLE001 - cancelled or failed: either way, stopped
                pass


def _lost(ray: Any, exc: BaseException) -> PipelineError:
    if isinstance(exc, ray.exceptions.RayTaskError):  # the task failed before its own try
        return PipelineError(
            f"a Ray task of stage {_STAGE!r} failed outside the image work (feedline must be "
            f"importable on every node): {exc}")
    return ClusterUnavailableError(
        f"stage {_STAGE!r} lost its Ray cluster or a task more often than retries allow: "
        f"{type(exc).__name__}: {exc}")


_PARTS_NAME = re.compile(r"\.parts-(?P<host>[^-]+)-(?P<pid>\d+)-[0-9a-f]+$")


def parts_folder(first: str) -> str:
    """A new fragment folder's path beside ``first``:
    ``.<name>.parts-<host>-<pid>-<random>`` (see :func:`remove_stale_parts`).

    Args:
        first: the path of the first shard of the set being written.

    >>> parts_folder("out/a.rec").startswith(f"out/.a.rec.parts-{host_tag()}-{os.getpid()}-")
    True
    """
    return os.path.join(os.path.dirname(first) or ".", f".{os.path.basename(first)}.parts-"
                        f"{host_tag()}-{os.getpid()}-{uuid.uuid4().hex[:12]}")


def remove_stale_parts(first: str) -> list[str]:
    """Delete the fragment folders beside ``first`` (:func:`parts_folder`) that a packing
    process of this machine left when it died (killed before it could clean up); those
    of live processes, and those of other machines sharing the folder, stay. Returns the
    folders removed.

    Args:
        first: the path of the first shard of the set being written.

    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> os.mkdir(parts_folder(os.path.join(folder, "a.rec")))   # this process's
    >>> remove_stale_parts(os.path.join(folder, "a.rec"))
    []
    """
    directory, base = os.path.split(first)
    removed = left_by_dead_writers(directory, f".{base}.parts-", _PARTS_NAME)
    for name in removed:
        shutil.rmtree(os.path.join(directory, name), ignore_errors=True)
        logger.info("removed %s, left by a packing process that died", name)
    return removed


def pack_with_tasks(order: Sequence, encode: Callable, writer: Any, *, format: str,
                    num_workers: int, on_error: str, bar: Any,
                    list_file: tuple[str, Sequence] | None = None) -> tuple[int, list[tuple[int, str, str]]]:
    """Write ``order`` into the handed-over shards of ``writer`` with Ray tasks (see the
    module docstring) and commit them; return (records written, skipped entries).

    Args:
        order: the list entries (:class:`~feedline.image.listfile.ListItem`) in write order.
        encode: picklable; an entry -> ``(entry, record, reason)``, ``record`` ``None``
            (and ``reason`` why) for an entry skipped under ``on_error``.
        writer: a new :class:`~feedline.sharded.ShardedWriter` for the output set; it is
            committed on success and aborted on any failure.
        format: ``"recordio"`` or ``"tfrecord"``.
        num_workers: Ray tasks in flight at once.
        on_error: ``"raise"``, ``"skip"`` or ``"warn"`` (a ``RuntimeWarning`` per skip).
        bar: progress display with ``update(done, final=False)``.
        list_file: ``(path, entries)`` of a ``.lst`` to write (a folder source's) when
            every shard is written, before the set is committed.
    """
    ray = connect()
    temporaries = writer.hand_over()
    first = writer.paths[0]
    remove_stale_parts(first)
    parts_dir = parts_folder(first)
    num_shards = len(temporaries)
    tasks = _Tasks(ray, num_workers)
    try:
        os.makedirs(parts_dir)
        ranges = chunk_ranges(len(order), num_workers)
        done = [0]

        def progress(number: int, result: dict) -> None:
            done[0] += ranges[number][1] - ranges[number][0]
            bar.update(done[0])

        chunks = tasks.run(_encode_chunk, [
            (encode, list(order[a:b]), a, num_shards, format, os.path.join(parts_dir, str(c)))
            for c, (a, b) in enumerate(ranges)], progress)
        bar.update(len(order), final=True)
        shard_parts: list[list] = [[] for _ in range(num_shards)]
        written = 0
        skipped: list[tuple[int, str, str]] = []
        for c, chunk in enumerate(chunks):
            _log("encoded chunk %d", c, chunk)
            for j, (start, size, keys, offsets) in enumerate(chunk["lanes"]):
                if keys:
                    shard_parts[(written + j) % num_shards].append(
                        (os.path.join(parts_dir, str(c)), start, size, keys, offsets))
            written += sum(len(lane[2]) for lane in chunk["lanes"])
            skipped += [(index, path, reason) for _, index, path, reason in chunk["skipped"]]
        shards = tasks.run(_assemble_shard, [
            (shard_parts[s], records, index, parts_dir)
            for s, (records, index) in enumerate(temporaries)],
            lambda number, result: None)
        for s, shard in enumerate(shards):
            _log("wrote shard %d", s, shard)
            seen = os.path.getsize(temporaries[s][0])
            if seen != shard["size"]:
                raise OSError(
                    f"{temporaries[s][0]}: a Ray task wrote {shard['size']} bytes and this "
                    f"process sees {seen}: the output folder must be one file system that "
                    "every node shares")
        writer.counts = [shard["count"] for shard in shards]
        for _, path, reason in skipped:
            if on_error == "warn":
                warnings.warn(f"pack: skipping {path}: {reason}", RuntimeWarning, stacklevel=3)
        if list_file is not None:
            write_list(*list_file)
        writer.close()
    except BaseException:
        tasks.stop()
        writer.abort()
        raise
    finally:
        shutil.rmtree(parts_dir, ignore_errors=True)
    return written, skipped


def _log(what: str, number: int, result: dict) -> None:
    logger.debug(what + " in pid %d on node %s", number, result["by"]["pid"], result["by"]["node"])
