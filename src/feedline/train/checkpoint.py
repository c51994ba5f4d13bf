"""Checkpoints: atomic, checksummed files holding everything a job needs to go on.

A **checkpoint** (:func:`save_checkpoint`) holds the state of every runner item that has
one — the model's parameters and buffers, the optimizer and updater state, the model
average, the counters, the metric sums of the running pass, the data pipeline's
iterator position (``PipelineIterator.get_state()``) — and every random generator:
Python's ``random``, numpy's global generator, torch's CPU generator and, when CUDA is in
use, every CUDA generator. Restoring it (:func:`load_checkpoint`) into a runner built
the same way continues with exactly the batches the uninterrupted run would have seen
and, on the CPU with a fixed ``torch.set_num_threads``, produces bitwise the same
parameters.

A **params export** (:func:`save_params`) holds only the parameters and buffers, for
inference: ``load_params(path, model)``.

File layout (little-endian)::

    8 bytes   magic  b"FLCKPT\\x00\\x01"
    8 bytes   payload length (uint64)
    4 bytes   CRC32C of the payload (uint32)
    payload   torch.save() of a dict: {"format": 1, "kind": "checkpoint" | "params", ...}

A file that is shorter than its header says, whose checksum does not match, or that is
not a feedline checkpoint raises :class:`~feedline.exceptions.CheckpointError`; so does
a checkpoint whose parameter names or shapes differ from the model's, naming each
difference. Payloads are read with ``torch.load(weights_only=True)``: loading never
runs code from the file.

Writes are atomic: the bytes go to a temporary file in the same directory, which is
flushed, ``fsync``-ed and renamed over the target (then the directory is ``fsync``-ed).
A crash at any moment leaves either the old file or the new one, never a mix; a
leftover temporary file (``.NAME.*.tmp``) is ignored by :func:`latest_checkpoint`.

>>> import os, tempfile, torch
>>> model = torch.nn.Linear(2, 1)
>>> path = os.path.join(tempfile.mkdtemp(), "linear.flp")
>>> save_params(path, model)
>>> fresh = torch.nn.Linear(2, 1)
>>> load_params(path, fresh)
>>> torch.equal(fresh.weight, model.weight)
True
>>> load_params(path, torch.nn.Linear(3, 1))  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
feedline.exceptions.CheckpointError: ...: the parameters do not match the model: shape of 'weight': file (1, 2), model (1, 3)
"""

from __future__ import annotations

import io
import os
import random
import re
import struct
from collections.abc import Mapping
from typing import Any, cast

import google_crc32c
import numpy as np
import torch

from feedline._internal.atomic import atomic_open
from feedline.exceptions import CheckpointError

__all__ = [
    "MAGIC",
    "FORMAT_VERSION",
    "save_checkpoint",
    "load_checkpoint",
    "read_checkpoint",
    "save_params",
    "load_params",
    "read_params",
    "latest_checkpoint",
    "list_checkpoints",
    "checkpoint_name",
    "capture_rng",
    "restore_rng",
    "check_params",
    "atomic_write",
]

MAGIC = b"FLCKPT\x00\x01"
FORMAT_VERSION = 1
_HEADER = struct.Struct("<8sQI")
_NAME = re.compile(r"^checkpoint-p(\d+)-s(\d+)\.flc$")


# ---------------------------------------------------------------------- bytes on disk

def _write_all(f: Any, data: bytes) -> None:
    """Write ``data`` to the open file ``f`` (a seam for failure-injection tests)."""
    f.write(data)


def atomic_write(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically and durably (temporary file, fsync, rename,
    fsync of the directory); the file gets the umask mode.

    On any error the temporary file is removed and ``path`` is left as it was.

    Args:
        path: the file to write; its directory is created when missing, and an
            existing file is replaced.
        data: the file's complete contents.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "state.bin")
    >>> atomic_write(path, b"v1"); atomic_write(path, b"v2")
    >>> open(path, "rb").read(), os.listdir(os.path.dirname(path))
    (b'v2', ['state.bin'])
    """
    path = os.fspath(path)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with atomic_open(path, durable=True) as f:
        _write_all(f, data)


def _encode(obj: dict) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    payload = buf.getvalue()
    return _HEADER.pack(MAGIC, len(payload), google_crc32c.value(payload)) + payload


def _decode(path: str | os.PathLike, expected_kind: str) -> dict:
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise
    if len(data) < _HEADER.size:
        raise CheckpointError(
            f"{path}: truncated: {len(data)} bytes, the header alone is {_HEADER.size} bytes"
        )
    magic, length, crc = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise CheckpointError(f"{path}: not a feedline checkpoint (magic {magic!r})")
    payload = memoryview(data)[_HEADER.size:]
    if len(payload) != length:
        raise CheckpointError(
            f"{path}: truncated: the header announces {length} payload bytes, the file holds "
            f"{len(payload)}"
        )
    actual = google_crc32c.value(bytes(payload))
    if actual != crc:
        raise CheckpointError(
            f"{path}: corrupt: CRC32C of the payload is {actual:#010x}, the header says {crc:#010x}"
        )
    try:
        obj = torch.load(io.BytesIO(payload), map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - any unpickling failure means a bad file
        raise CheckpointError(f"{path}: the payload does not load: {exc}") from exc
    if not isinstance(obj, dict) or obj.get("format") != FORMAT_VERSION:
        fmt = obj.get("format") if isinstance(obj, dict) else type(obj).__name__
        raise CheckpointError(f"{path}: unsupported checkpoint format {fmt!r} (expected {FORMAT_VERSION})")
    kind = obj.get("kind")
    if kind != expected_kind and not (expected_kind == "params" and kind == "checkpoint"):
        raise CheckpointError(f"{path}: this file holds {kind!r}, expected {expected_kind!r}")
    return obj


# ---------------------------------------------------------------------- random generators

def capture_rng() -> dict[str, Any]:
    """The state of Python's ``random``, numpy's global generator and torch's generators.

    >>> import random
    >>> import numpy as np, torch
    >>> state = capture_rng()
    >>> sorted(state)
    ['numpy', 'python', 'torch']
    >>> first = random.random(), np.random.rand(), torch.rand(1).item()
    >>> restore_rng(state)
    >>> (random.random(), np.random.rand(), torch.rand(1).item()) == first
    True
    """
    name, keys, pos, has_gauss, cached = cast(tuple, np.random.get_state())  # the legacy tuple
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": [name, keys.tolist(), int(pos), int(has_gauss), float(cached)],
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng(state: Mapping[str, Any]) -> None:
    """Set every generator captured by :func:`capture_rng`.

    Args:
        state: what :func:`capture_rng` returned; a missing or malformed ``python``,
            ``numpy`` or ``torch`` entry raises
            :class:`~feedline.exceptions.CheckpointError`. A ``cuda`` entry is
            restored only when CUDA is available.

    >>> import random
    >>> state = capture_rng()
    >>> a = [random.random() for _ in range(3)]
    >>> restore_rng(state)
    >>> [random.random() for _ in range(3)] == a
    True
    """
    try:
        version, internal, gauss = state["python"]
        random.setstate((version, tuple(internal), gauss))
        name, keys, pos, has_gauss, cached = state["numpy"]
        np.random.set_state((name, np.asarray(keys, dtype=np.uint32), pos, has_gauss, cached))
        torch.set_rng_state(state["torch"])
    except (KeyError, TypeError, ValueError, RuntimeError) as exc:
        raise CheckpointError(f"the random generator state does not restore: {exc}") from exc
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


# ---------------------------------------------------------------------- parameters

def check_params(expected: Mapping[str, Any], found: Mapping[str, Any], *, what: str = "file") -> None:
    """Raise :class:`CheckpointError` naming every difference between two state dicts:
    names missing from ``found``, names it has in excess, and shape or dtype changes.

    Args:
        expected: the model's ``state_dict`` (names to tensors).
        found: the state dict to check against it; an entry that is not a tensor is
            a difference too.
        what: how the message names ``found`` (``"missing from file: ..."``).

    >>> import torch
    >>> check_params({"w": torch.zeros(2)}, {"w": torch.zeros(3), "b": torch.zeros(1)})
    Traceback (most recent call last):
    ...
    feedline.exceptions.CheckpointError: the parameters do not match the model: unexpected in file: 'b'; shape of 'w': file (3,), model (2,)
    """
    problems = []
    missing = [k for k in expected if k not in found]
    extra = [k for k in found if k not in expected]
    if missing:
        problems.append(f"missing from {what}: " + ", ".join(map(repr, missing)))
    if extra:
        problems.append(f"unexpected in {what}: " + ", ".join(map(repr, extra)))
    for k, t in expected.items():
        if k not in found:
            continue
        f = found[k]
        if not isinstance(f, torch.Tensor):
            problems.append(f"{k!r} in {what} is a {type(f).__name__}, not a tensor")
        elif tuple(f.shape) != tuple(t.shape):
            problems.append(f"shape of {k!r}: {what} {tuple(f.shape)}, model {tuple(t.shape)}")
        elif f.dtype != t.dtype:
            problems.append(f"dtype of {k!r}: {what} {f.dtype}, model {t.dtype}")
    if problems:
        raise CheckpointError("the parameters do not match the model: " + "; ".join(problems))


def _module_of(model: Any) -> torch.nn.Module:
    module = getattr(model, "module", model)  # a Trainer, a DDP wrapper or a module
    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"`model` must be a torch.nn.Module, got {type(model).__name__}")
    return module


def save_params(path: str | os.PathLike, model: Any, *, metadata: Mapping[str, Any] | None = None) -> None:
    """Write ``model``'s parameters and buffers (its ``state_dict``) to ``path``, atomically.

    Args:
        path: the file to write (replaced atomically, see :func:`atomic_write`).
        model: a module, a ``DistributedDataParallel`` wrapper or anything with a
            ``module`` attribute (a :class:`~feedline.train.Trainer`); anything else
            raises ``TypeError``. Tensors are stored on the CPU.
        metadata: small extra values (str, numbers, lists, dicts) stored alongside.

    >>> import os, tempfile, torch
    >>> path = os.path.join(tempfile.mkdtemp(), "model.flp")
    >>> save_params(path, torch.nn.Linear(3, 2), metadata={"epoch": 4})
    >>> sorted(read_params(path))
    ['bias', 'weight']
    """
    module = _module_of(model)
    params = {k: v.detach().cpu() for k, v in module.state_dict().items()}
    atomic_write(path, _encode({"format": FORMAT_VERSION, "kind": "params", "params": params,
                                "metadata": dict(metadata or {})}))


def read_params(path: str | os.PathLike) -> dict[str, torch.Tensor]:
    """The parameters stored in a params export or a full checkpoint.

    Args:
        path: a file written by :func:`save_params` or :func:`save_checkpoint`; a
            truncated, corrupt or foreign file, or a checkpoint without model
            parameters, raises :class:`~feedline.exceptions.CheckpointError`.

    >>> import os, tempfile, torch
    >>> model = torch.nn.BatchNorm1d(2)
    >>> path = os.path.join(tempfile.mkdtemp(), "bn.flp")
    >>> save_params(path, model)
    >>> params = read_params(path)
    >>> sorted(params), torch.equal(params["running_var"], model.running_var)
    (['bias', 'num_batches_tracked', 'running_mean', 'running_var', 'weight'], True)
    """
    obj = _decode(path, "params")
    if obj["kind"] == "checkpoint":
        try:
            return obj["runner"]["model"]["params"]
        except (KeyError, TypeError):
            raise CheckpointError(f"{os.fspath(path)}: the checkpoint holds no model parameters") from None
    return obj["params"]


def load_params(path: str | os.PathLike, model: Any) -> None:
    """Load the parameters of ``path`` (a params export or a checkpoint) into ``model``.

    Names, shapes and dtypes must match exactly, else :class:`CheckpointError` names
    every difference.

    Args:
        path: a file written by :func:`save_params` or :func:`save_checkpoint`.
        model: a module, a ``DistributedDataParallel`` wrapper or anything with a
            ``module`` attribute (a :class:`~feedline.train.Trainer`); anything else
            raises ``TypeError``.

    >>> import os, tempfile, torch
    >>> path = os.path.join(tempfile.mkdtemp(), "m.flp")
    >>> save_params(path, torch.nn.Linear(2, 2))
    >>> load_params(path, torch.nn.Linear(2, 3))
    Traceback (most recent call last):
    ...
    feedline.exceptions.CheckpointError: ...
    """
    module = _module_of(model)
    params = read_params(path)
    try:
        check_params(module.state_dict(), params)
    except CheckpointError as exc:
        raise CheckpointError(f"{os.fspath(path)}: {exc}") from None
    module.load_state_dict(params)


# ---------------------------------------------------------------------- runner checkpoints

def gather_objects(obj: Any) -> list[Any] | None:
    """Every rank's ``obj`` when running distributed, else ``None``."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return None
    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


def _rank() -> int:
    import torch.distributed as dist

    return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0


def save_checkpoint(
    path: str | os.PathLike, runner: Any, *, metadata: Mapping[str, Any] | None = None
) -> None:
    """Write ``runner``'s complete state and every RNG to ``path``, atomically.

    Under ``torch.distributed`` every rank must call it (the per-rank random states are
    gathered); rank 0 writes the file.

    Args:
        path: the file to write (replaced atomically, see :func:`atomic_write`).
        runner: an initialized :class:`~feedline.train.Runner` (its ``state_dict()`` is
            stored).
        metadata: small extra values (str, numbers, lists, dicts) stored alongside;
            :func:`load_checkpoint` returns them.

    >>> import os, tempfile, torch
    >>> import numpy as np
    >>> from feedline import Dataset, data_type
    >>> from feedline.train import RunnerBuilder, network, SGD
    >>> xs = np.linspace(-1, 1, 16, dtype=np.float32).reshape(-1, 1)
    >>> def build():
    ...     net = network(inputs={"x": data_type.dense_vector(1), "y": data_type.dense_vector(1)},
    ...                   label="y", learning_rate=0.1, learning_method=SGD(),
    ...                   batch_size=4)(torch.nn.Linear(1, 1))
    ...     data = Dataset.from_arrays(xs, 2 * xs)
    ...     return RunnerBuilder(network=net, seed=0).with_std_local_trainer(data).build()
    >>> path = os.path.join(tempfile.mkdtemp(), "checkpoint-p0001-s000000004.flc")
    >>> with build() as runner:
    ...     _ = runner.run(1)
    ...     save_checkpoint(path, runner, metadata={"note": "after pass 0"})
    >>> sorted(read_checkpoint(path))
    ['format', 'kind', 'metadata', 'rng', 'runner']
    >>> with build() as again:
    ...     load_checkpoint(path, again), again.context.pass_id, again.context.global_step
    ({'note': 'after pass 0'}, 1, 4)
    """
    state = runner.state_dict()
    rng = capture_rng()
    ranks = gather_objects(rng)
    if _rank() != 0:
        return
    atomic_write(path, _encode({
        "format": FORMAT_VERSION,
        "kind": "checkpoint",
        "runner": state,
        "rng": rng if ranks is None else {"ranks": ranks},
        "metadata": dict(metadata or {}),
    }))


def read_checkpoint(path: str | os.PathLike) -> dict[str, Any]:
    """The dict stored by :func:`save_checkpoint` (validated framing, kind ``checkpoint``).

    Args:
        path: a file written by :func:`save_checkpoint`; a truncated, corrupt or
            foreign file, or a params export, raises
            :class:`~feedline.exceptions.CheckpointError`.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "bad.flc")
    >>> with open(path, "wb") as f: _ = f.write(b"not a checkpoint")
    >>> read_checkpoint(path)
    Traceback (most recent call last):
    ...
    feedline.exceptions.CheckpointError: ...
    """
    return _decode(path, "checkpoint")


def load_checkpoint(path: str | os.PathLike, runner: Any, *, strict: bool = True,
                    restore_random: bool = True) -> dict[str, Any]:
    """Restore ``runner`` (initialized, built like the one that saved) from ``path``.

    Returns the checkpoint's ``metadata``. Raises :class:`CheckpointError` for a
    truncated, corrupt or foreign file and for state that does not fit the runner
    (another model, other items, another world size).

    Args:
        path: a file written by :func:`save_checkpoint`.
        runner: the runner to restore (see :meth:`~feedline.train.Runner.load_state_dict`).
        strict: also fail on checkpoint entries no item of ``runner`` claims (``False``
            ignores them).
        restore_random: also set every random generator to its saved state (this
            rank's, when several processes wrote it); ``False`` leaves them as they are.

    >>> import os, tempfile, torch
    >>> from feedline.train import Runner, RunnerItem
    >>> path = os.path.join(tempfile.mkdtemp(), "params-only.flp")
    >>> save_params(path, torch.nn.Linear(1, 1))
    >>> with Runner([RunnerItem()]) as runner:
    ...     load_checkpoint(path, runner)         # a params export is not a checkpoint
    Traceback (most recent call last):
    ...
    feedline.exceptions.CheckpointError: ...
    """
    obj = read_checkpoint(path)
    try:
        runner.load_state_dict(obj["runner"], strict=strict)
    except CheckpointError as exc:
        raise CheckpointError(f"{os.fspath(path)}: {exc}") from None
    if restore_random:
        rng = obj["rng"]
        if "ranks" in rng:
            import torch.distributed as dist

            ranks = rng["ranks"]
            world = dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1
            if len(ranks) != world:
                raise CheckpointError(
                    f"{os.fspath(path)}: written by {len(ranks)} processes, this job has {world}"
                )
            rng = ranks[_rank()]
        restore_rng(rng)
    return obj.get("metadata", {})


def checkpoint_name(pass_id: int, global_step: int) -> str:
    """File name of the checkpoint taken at ``(pass_id, global_step)``.

    Args:
        pass_id: the pass, written with at least 4 digits.
        global_step: the batches finished so far, written with at least 9 digits.

    >>> checkpoint_name(2, 130)
    'checkpoint-p0002-s000000130.flc'
    """
    return f"checkpoint-p{pass_id:04d}-s{global_step:09d}.flc"


def list_checkpoints(directory: str | os.PathLike) -> list[str]:
    """Checkpoint files of ``directory``, oldest first (by global step, then pass).

    Args:
        directory: where to look; only names :func:`checkpoint_name` makes count, and a
            missing directory gives ``[]``.

    >>> import os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> for name in ("checkpoint-p0001-s000000020.flc", "checkpoint-p0000-s000000010.flc", "notes.txt"):
    ...     open(os.path.join(d, name), "w").close()
    >>> [os.path.basename(p) for p in list_checkpoints(d)]
    ['checkpoint-p0000-s000000010.flc', 'checkpoint-p0001-s000000020.flc']
    """
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    found = []
    for name in names:
        m = _NAME.match(name)
        if m:
            found.append(((int(m.group(2)), int(m.group(1))), os.path.join(os.fspath(directory), name)))
    return [p for _, p in sorted(found)]


def latest_checkpoint(directory: str | os.PathLike) -> str | None:
    """The newest checkpoint file in ``directory``, or ``None``.

    Args:
        directory: where to look (see :func:`list_checkpoints`); a missing directory
            gives ``None``.

    >>> import os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> latest_checkpoint(d) is None
    True
    >>> for name in ("checkpoint-p0000-s000000010.flc", "checkpoint-p0001-s000000020.flc"):
    ...     open(os.path.join(d, name), "w").close()
    >>> os.path.basename(latest_checkpoint(d))
    'checkpoint-p0001-s000000020.flc'
    """
    found = list_checkpoints(directory)
    return found[-1] if found else None
