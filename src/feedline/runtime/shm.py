"""Shared-memory transport between the consumer and worker processes.

A :class:`Channel` carries Python objects one way over a pipe. Numpy arrays (and any other
object that pickles its data out of band with pickle protocol 5) travel through a *ring*
of shared-memory blocks instead of the pipe:

* the writer pickles the object with ``buffer_callback``; every buffer of at least
  :data:`OUT_OF_BAND_MIN` bytes is copied once into the ring block for this message, the
  rest of the pickle (small Python objects) goes into the pipe message — or into the
  block as well when it is larger than :data:`INLINE_MAX`, so pipe messages stay small;
* the reader copies each buffer out of the block (the one copy) into memory of its own,
  so the arrays it rebuilds are ordinary writable numpy arrays that stay valid after the
  block is reused. Buffers of :data:`RECYCLE_MIN` bytes or more are copied into
  recycled, already-mapped memory (:class:`BufferRecycler`), which saves the page faults
  of fresh allocations — most of the cost of receiving a large array;
* message ``k`` uses block ``k % len(ring)``; the caller guarantees that at most
  ``len(ring)`` messages are unread (the reader has decoded message ``k - len(ring)``
  before message ``k`` is written), so blocks are reused without further handshakes.

Blocks are files in ``/dev/shm`` named ``feedline-<pid>-<hex>``; each is unlinked right
after it is created and lives on as an open file descriptor shared with the workers
(inherited with ``fork``, passed with ``spawn``/``forkserver``). Nothing is left in
``/dev/shm`` whatever happens to the processes, even ``SIGKILL`` of all of them, and
there is nothing for an ``atexit`` hook to unlink. Blocks grow on demand with
``posix_fallocate``, which reports a full ``/dev/shm`` as :class:`SharedMemoryError`
instead of the ``SIGBUS`` ("Bus error") that writing into an over-committed mapping gives.

Without a ring (``ring=None``) a channel pickles whole objects through the pipe: the
fallback when ``/dev/shm`` is missing or too small.

>>> import numpy as np
>>> from multiprocessing import Pipe
>>> r, w = Pipe(duplex=False)
>>> ring_w = Ring.create(2, 1 << 16)
>>> ring_r = Ring.from_fds(ring_w.fd_handles(), dup=True)  # a worker inherits them instead
>>> tx, rx = Channel(w, ring_w), Channel(r, ring_r)
>>> tx.send({"x": np.arange(100_000, dtype=np.float32), "label": 3})
>>> got = rx.recv()
>>> float(got["x"][-1]), got["label"], got["x"].flags.writeable
(99999.0, 3, True)
>>> for c in (tx, rx): c.close()
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
import pickle
import secrets
import struct
import threading
import weakref
from collections.abc import Sequence
from typing import Any

from feedline.exceptions import SharedMemoryError

__all__ = [
    "SHM_DIR",
    "OUT_OF_BAND_MIN",
    "INLINE_MAX",
    "shm_free_bytes",
    "check_shm_space",
    "RECYCLE_MIN",
    "FdHandle",
    "BufferRecycler",
    "Block",
    "Ring",
    "Channel",
]

#: Where shared-memory blocks are created.
SHM_DIR = "/dev/shm"
#: Buffers smaller than this are pickled into the message instead of the ring.
OUT_OF_BAND_MIN = 4096
#: Pickle streams larger than this go into the ring block too (pipe messages stay small).
INLINE_MAX = 8192
#: Received buffers at least this large go into recycled memory (:class:`BufferRecycler`).
RECYCLE_MIN = 1 << 18

_ALIGN = 64
_GRAIN = 1 << 16  # blocks grow in multiples of 64 KiB
_PIPE, _RING = 0, 1
_HEAD = struct.Struct("<BQIQQ")  # kind, block size, n buffers, payload offset, payload length
_SPAN = struct.Struct("<QQ")  # offset, length of one buffer in the block
_NOT_IN_BLOCK = (1 << 64) - 1


def shm_free_bytes(path: str = SHM_DIR) -> int | None:
    """Bytes available to this user in ``path`` (``statvfs``), or ``None`` if it is missing.

    Args:
        path: the directory whose file system is asked (any ``OSError`` gives ``None``).

    >>> free = shm_free_bytes()
    >>> free is None or free >= 0, shm_free_bytes("/no/such/dir")
    (True, None)
    """
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def check_shm_space(required: int, *, path: str = SHM_DIR, what: str = "the shared-memory ring") -> None:
    """Raise :class:`SharedMemoryError` unless ``path`` exists and has ``required`` bytes free.

    Args:
        required: bytes that must be free.
        path: the shared-memory directory to check.
        what: what needs the space, named in the error message.

    >>> check_shm_space(1)
    >>> check_shm_space(1, path="/no/such/dir")
    Traceback (most recent call last):
    ...
    feedline.exceptions.SharedMemoryError: shared memory is not available: /no/such/dir does not exist
    """
    free = shm_free_bytes(path)
    if free is None:
        raise SharedMemoryError(f"shared memory is not available: {path} does not exist")
    if free < required:
        raise SharedMemoryError(
            f"{path} is too small: {what} needs {_fmt_bytes(required)} but only "
            f"{_fmt_bytes(free)} are free; enlarge it (e.g. `docker run --shm-size=2g`), use "
            "fewer workers or smaller items"
        )


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"  # pragma: no cover


class FdHandle:
    """A file descriptor that survives being handed to a worker process.

    With ``fork`` the worker inherits the descriptor and this object as they are; when
    pickled for ``spawn``/``forkserver`` it goes through :mod:`multiprocessing`'s
    descriptor passing and is rebuilt around the worker's own copy.

    Args:
        fd: the open file descriptor to carry.

    >>> ring = Ring.create(1, 1 << 16)
    >>> handle, size = ring.fd_handles()[0]
    >>> isinstance(handle, FdHandle), handle.fd == ring.blocks[0].fd, size
    (True, True, 65536)
    >>> ring.close()
    """

    __slots__ = ("fd",)

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __reduce__(self):
        from multiprocessing import reduction

        return (_rebuild_fd, (reduction.DupFd(self.fd),))


def _rebuild_fd(dup: Any) -> FdHandle:
    return FdHandle(dup.detach())


def _reserve(fd: int, size: int) -> None:
    """Give the file behind ``fd`` ``size`` bytes of real /dev/shm space (or raise)."""
    try:
        os.posix_fallocate(fd, 0, size)
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.ENOMEM, errno.EFBIG):
            free = shm_free_bytes()
            raise SharedMemoryError(
                f"{SHM_DIR} is full: a shared-memory block of {_fmt_bytes(size)} does not fit"
                + ("" if free is None else f" ({_fmt_bytes(free)} free)")
                + "; enlarge it (e.g. `docker run --shm-size=2g`), use fewer workers or smaller "
                "items, or set FEEDLINE_TRANSPORT=pipe"
            ) from exc
        if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
            raise
        os.ftruncate(fd, size)  # file system without fallocate


class BufferRecycler:
    """Receive buffers that are reused once every array viewing them is gone.

    :meth:`copy` returns a ``ctypes`` char array holding a copy of ``src``, carved from an
    anonymous memory mapping. Numpy arrays rebuilt on it (and their views, and tensors
    made with ``torch.from_numpy``) keep it alive; when the last of them goes, a weak
    reference puts the mapping on a free list (up to ``keep_bytes`` in all), already
    faulted in and ready for the next buffer of the same size class. Buffers smaller than
    :data:`RECYCLE_MIN` are plain ``bytearray`` copies.

    Args:
        keep_bytes: most bytes of free mappings kept for reuse; a mapping given back
            beyond it is dropped.

    >>> import numpy as np
    >>> rec = BufferRecycler()
    >>> buf = rec.copy(memoryview(np.arange(100_000, dtype=np.float32)).cast("B"))
    >>> a = np.frombuffer(buf, np.float32)
    >>> float(a[-1]), rec.free_bytes
    (99999.0, 0)
    >>> del a, buf
    >>> rec.free_bytes > 0
    True
    """

    def __init__(self, keep_bytes: int = 64 << 20) -> None:
        self._keep = keep_bytes
        self._free: dict[int, list[mmap.mmap]] = {}
        self._types: dict[int, type[ctypes.Array[ctypes.c_char]]] = {}
        self._lock = threading.Lock()
        self.free_bytes = 0

    @staticmethod
    def _size_class(n: int) -> int:
        grain = max(4096, 1 << (n.bit_length() - 3))
        return _round_up(n, grain)

    def copy(self, src: memoryview) -> Any:
        """A buffer object holding a copy of the bytes of ``src``.

        Args:
            src: the bytes to copy (a byte-format view); below :data:`RECYCLE_MIN` bytes the
                copy is a plain ``bytearray``.
        """
        n = src.nbytes
        if n < RECYCLE_MIN:
            return bytearray(src)
        size = self._size_class(n)
        with self._lock:
            free = self._free.get(size)
            mm = free.pop() if free else None
            if mm is not None:
                self.free_bytes -= size
            ctype = self._types.get(n)
            if ctype is None:
                if len(self._types) > 64:
                    self._types.clear()
                ctype = self._types[n] = ctypes.c_char * n
        if mm is None:
            mm = mmap.mmap(-1, size)
        mm[0:n] = src
        buf = ctype.from_buffer(mm)
        weakref.finalize(buf, self._give_back, mm, size).atexit = False
        return buf

    def _give_back(self, mm: mmap.mmap, size: int) -> None:
        with self._lock:
            if self.free_bytes + size <= self._keep:
                self._free.setdefault(size, []).append(mm)
                self.free_bytes += size
        # else: dropped; unmapped once the dying buffer releases it

    def clear(self) -> None:
        """Forget the free mappings (buffers still in use are not affected)."""
        with self._lock:
            self._free.clear()
            self.free_bytes = 0


class Block:
    """One growable shared-memory block: an unlinked ``/dev/shm`` file and its mapping.

    Args:
        fd: the open descriptor of the block's file (the block owns it: :meth:`close`
            closes it).
        size: bytes of the file to map; the file must be at least that long.

    >>> block = Block.create(4096)                 # rounded up to the 64 KiB minimum
    >>> block.size, len(block.view)
    (65536, 65536)
    >>> block.view[:3] = b"abc"
    >>> block.grow(200_000)                        # grows in place, keeping the bytes
    >>> block.size >= 200_000, bytes(block.view[:3])
    (True, b'abc')
    >>> block.close()
    """

    __slots__ = ("fd", "size", "_mm", "_view")

    def __init__(self, fd: int, size: int) -> None:
        self.fd = fd
        self.size = 0
        self._mm: mmap.mmap | None = None
        self._view: memoryview | None = None
        self._map(size)

    @classmethod
    def create(cls, size: int) -> Block:
        """Create, unlink and reserve a new block of ``size`` bytes.

        Args:
            size: the bytes wanted, rounded up to a multiple of 64 KiB (at least 64 KiB).
                :class:`SharedMemoryError` when ``/dev/shm`` is missing or full.
        """
        size = _round_up(max(size, _GRAIN), _GRAIN)
        path = os.path.join(SHM_DIR, f"feedline-{os.getpid()}-{secrets.token_hex(6)}")
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        except FileNotFoundError as exc:
            raise SharedMemoryError(f"shared memory is not available: {SHM_DIR} does not exist") from exc
        try:
            os.unlink(path)
            _reserve(fd, size)
            return cls(fd, size)
        except BaseException:
            os.close(fd)
            raise

    def _map(self, size: int) -> None:
        self.release_map()
        self._mm = mmap.mmap(self.fd, size)
        self._view = memoryview(self._mm)
        self.size = size

    def release_map(self) -> None:
        if self._view is not None:
            self._view.release()
            self._view = None
        if self._mm is not None:
            self._mm.close()
            self._mm = None

    def grow(self, needed: int) -> None:
        """Writer side: make the block at least ``needed`` bytes (doubling), reserving space.

        Args:
            needed: the bytes the next message needs; nothing happens when the block is
                that large already. :class:`SharedMemoryError` when ``/dev/shm`` is full.
        """
        if needed <= self.size:
            return
        size = _round_up(max(needed, 2 * self.size), _GRAIN)
        _reserve(self.fd, size)
        self._map(size)

    def follow(self, size: int) -> None:
        """Reader side: map ``size`` bytes after the writer grew the block.

        Args:
            size: the block's size as the writer sent it; no-op unless larger than mapped.
        """
        if size > self.size:
            self._map(size)

    @property
    def view(self) -> memoryview:
        assert self._view is not None
        return self._view

    def close(self) -> None:
        self.release_map()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def _round_up(n: int, k: int) -> int:
    return -(-n // k) * k


class Ring:
    """The blocks of one channel, used round robin: message ``k`` goes to block ``k % n``.

    >>> ring = Ring.create(2, 1 << 16)
    >>> len(ring.fd_handles()), ring.nbytes
    (2, 131072)
    >>> reader = Ring.from_fds(ring.fd_handles(), dup=True)     # the other end's view of the blocks
    >>> ring.blocks[1].view[:2] = b"hi"; bytes(reader.blocks[1].view[:2])
    b'hi'
    >>> ring.close(); reader.close()

    Args:
        blocks: the ring's blocks, in order.
    """

    def __init__(self, blocks: Sequence[Block]) -> None:
        self.blocks = list(blocks)

    @classmethod
    def create(cls, count: int, size: int) -> Ring:
        """A ring of new blocks (:meth:`Block.create`); on failure the blocks made so far
        are closed.

        Args:
            count: how many blocks.
            size: each block's initial size in bytes.
        """
        blocks: list[Block] = []
        try:
            for _ in range(count):
                blocks.append(Block.create(size))
        except BaseException:
            for b in blocks:
                b.close()
            raise
        return cls(blocks)

    @classmethod
    def from_fds(cls, handles: Sequence[tuple[FdHandle, int]], *, dup: bool = False) -> Ring:
        """The other end of a ring, from :meth:`fd_handles` (inherited or passed).

        Args:
            handles: ``(handle, size)`` per block, as :meth:`fd_handles` gives them.
            dup: duplicate the descriptors (both ends in one process) instead of taking
                them over.
        """
        return cls([Block(os.dup(h.fd) if dup else h.fd, size) for h, size in handles])

    def fd_handles(self) -> list[tuple[FdHandle, int]]:
        return [(FdHandle(b.fd), b.size) for b in self.blocks]

    @property
    def nbytes(self) -> int:
        return sum(b.size for b in self.blocks)

    def close(self) -> None:
        for b in self.blocks:
            b.close()


class Channel:
    """One direction of a worker link: ``send`` on one end, ``recv`` on the other.

    See the module docstring for the reuse rule the caller must respect.

    Args:
        conn: a :class:`multiprocessing.connection.Connection`, this end of the pipe.
        ring: the shared blocks (``None``: everything is pickled through the pipe).
        recycler: where ``recv`` copies large buffers (``None``: fresh ``bytearray``
            objects).

    >>> from multiprocessing import Pipe
    >>> r, w = Pipe(duplex=False)
    >>> tx, rx = Channel(w, None), Channel(r, None)      # no ring: everything through the pipe
    >>> tx.send({"ids": np.arange(3)}); rx.poll(1.0)
    True
    >>> rx.recv()["ids"].tolist()
    [0, 1, 2]
    >>> tx.close(); rx.close()
    """

    def __init__(self, conn: Any, ring: Ring | None, recycler: BufferRecycler | None = None) -> None:
        self.conn = conn
        self.ring = ring
        self.recycler = recycler
        self._seq = 0
        self.last_nbytes = 0  # size of the last message's data (pickle + buffers)

    def fileno(self) -> int:
        return self.conn.fileno()

    def poll(self, timeout: float = 0.0) -> bool:
        """Whether a message is waiting to be received.

        Args:
            timeout: seconds to wait for one; ``None`` waits without limit.
        """
        return self.conn.poll(timeout)

    def send(self, obj: Any) -> None:
        """Send ``obj``; raises :class:`SharedMemoryError` if the block cannot grow.

        Args:
            obj: any picklable object; buffers of :data:`OUT_OF_BAND_MIN` bytes or more go
                through the ring when there is one.
        """
        ring = self.ring
        if ring is None:
            data = pickle.dumps(obj, pickle.HIGHEST_PROTOCOL)
            self.last_nbytes = len(data)
            self.conn.send_bytes(data)
            return
        buffers: list[memoryview] = []

        def out_of_band(buf: pickle.PickleBuffer) -> bool:
            raw = buf.raw()
            if raw.nbytes < OUT_OF_BAND_MIN:
                return True
            buffers.append(raw)
            return False

        payload = pickle.dumps(obj, 5, buffer_callback=out_of_band)
        spans = []
        end = 0
        for raw in buffers:
            spans.append((end, raw.nbytes))
            end = _round_up(end + raw.nbytes, _ALIGN)
        in_block = len(payload) > INLINE_MAX
        pay_off = end if in_block else _NOT_IN_BLOCK
        if in_block:
            end += len(payload)
        block = ring.blocks[self._seq % len(ring.blocks)]
        if end:
            block.grow(end)
            view = block.view
            for (off, n), raw in zip(spans, buffers):
                view[off:off + n] = raw
            if in_block:
                view[pay_off:pay_off + len(payload)] = payload
        head = [_HEAD.pack(_RING, block.size, len(spans), pay_off, len(payload))]
        head.extend(_SPAN.pack(off, n) for off, n in spans)
        if not in_block:
            head.append(payload)
        self.last_nbytes = end if in_block else end + len(payload)
        self._seq += 1
        self.conn.send_bytes(b"".join(head))

    def recv(self) -> Any:
        """Receive one object (blocks); ``EOFError`` when the other end is gone."""
        data = self.conn.recv_bytes()
        if self.ring is None:
            self.last_nbytes = len(data)
            return pickle.loads(data)
        kind, size, count, pay_off, pay_len = _HEAD.unpack_from(data, 0)
        block = self.ring.blocks[self._seq % len(self.ring.blocks)]
        self._seq += 1
        block.follow(size)
        view = block.view
        pos = _HEAD.size
        buffers = []
        total = 0
        copy = bytearray if self.recycler is None else self.recycler.copy
        for _ in range(count):
            off, n = _SPAN.unpack_from(data, pos)
            pos += _SPAN.size
            buffers.append(copy(view[off:off + n]))
            total += n
        if pay_off == _NOT_IN_BLOCK:
            payload: Any = memoryview(data)[pos:]
        else:
            payload = view[pay_off:pay_off + pay_len]
        self.last_nbytes = total + pay_len
        try:
            return pickle.loads(payload, buffers=buffers)
        finally:
            if isinstance(payload, memoryview):
                payload.release()

    def close(self) -> None:
        try:
            self.conn.close()
        finally:
            if self.ring is not None:
                self.ring.close()
