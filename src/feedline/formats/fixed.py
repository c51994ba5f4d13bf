"""The implementation of :mod:`feedline.fixed`, whose page documents it: import the
public names from ``feedline.fixed``."""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from feedline._internal.on_error import check_on_error, report
from feedline._internal.signature import takes_arguments_of
from feedline._internal.state import state_int
from feedline._internal.validate import non_negative_int, positive_int, record_index
from feedline.dataset.iterator import DatasetIterator, TransformIterator, check_state
from feedline.exceptions import CorruptRecordError, StateError
from feedline.storage.compression import local_path
from feedline.storage.fs import file_size, open_file

__all__ = [
    "FixedLengthRecords",
    "FixedLengthIterator",
    "read_fixed",
    "read_cifar10",
    "read_cifar100",
    "CIFAR_IMAGE_BYTES",
]

CIFAR_IMAGE_BYTES = 3 * 32 * 32
"""Pixel bytes of one CIFAR image (three 32x32 planes)."""

_CHUNK = 1 << 20


def _as_paths(paths: Any) -> list[str]:
    if isinstance(paths, (str, os.PathLike)):
        return [os.fspath(paths)]
    if isinstance(paths, Sequence) and not isinstance(paths, (bytes, bytearray)):
        return [os.fspath(p) for p in paths]
    raise TypeError(f"`paths` must be a path or a list of paths, got {paths!r}")


class _Layout:
    """Where the records of one file are: ``count`` complete ones from ``first``, and
    the offset of a partial trailing record (``None`` if there is none)."""

    __slots__ = ("path", "size", "first", "count", "partial_at", "problem")

    def __init__(
        self,
        path: str,
        record_bytes: int,
        header: int,
        footer: int,
        storage_options: dict | None = None,
    ) -> None:
        self.path = path
        self.size = file_size(path, storage_options=storage_options)
        self.first = header
        body = self.size - header - footer
        self.partial_at: int | None = None
        self.problem = ""
        if body < 0:
            self.count = 0
            self.partial_at = min(header, self.size)
            self.problem = (
                f"file of {self.size} bytes is shorter than header_bytes ({header}) + "
                f"footer_bytes ({footer})"
            )
        else:
            self.count, rest = divmod(body, record_bytes)
            if rest:
                self.partial_at = header + self.count * record_bytes
                self.problem = (
                    f"partial record of {rest} bytes: excluding the header ({header} bytes) "
                    f"and footer ({footer} bytes) the file has {body} bytes, not a multiple "
                    f"of record_bytes ({record_bytes})"
                )

    def error(self, index: int) -> CorruptRecordError:
        return CorruptRecordError(
            self.problem, path=self.path, index=index + self.count, offset=self.partial_at
        )


class _FixedOptions:
    """The options :class:`FixedLengthRecords` and :class:`FixedLengthIterator` share,
    validated at construction; subclasses extend :meth:`_start`."""

    paths: list[str]
    record_bytes: int
    header_bytes: int
    footer_bytes: int
    on_error: str
    storage_options: dict | None

    def __init__(
        self,
        paths: Any,
        record_bytes: int,
        *,
        header_bytes: int = 0,
        footer_bytes: int = 0,
        on_error: str = "raise",
        storage_options: dict | None = None,
    ) -> None:
        self.paths = _as_paths(paths)
        self.record_bytes = positive_int("record_bytes", record_bytes)
        self.header_bytes = non_negative_int("header_bytes", header_bytes)
        self.footer_bytes = non_negative_int("footer_bytes", footer_bytes)
        self.on_error = check_on_error(on_error)
        self.storage_options = storage_options
        self._start()

    def _start(self) -> None:
        """Set the state that is not an option (called at the end of construction)."""


class FixedLengthRecords(_FixedOptions):
    """Random access to the fixed-length records of one or more files.

    ``len()`` counts complete records over all files; ``records[i]`` reads record ``i``
    with one positional read (thread-safe; negative ``i`` counts from the end).
    Iterating (or :meth:`iterator`) streams the records through a
    :class:`FixedLengthIterator`.

    Args:
        paths: one path or a list of paths. Indexing needs local files (positional
            reads; a URL raises ``ValueError`` there); ``len()`` and iterating also work
            on fsspec URLs. Anything else raises ``TypeError``.
        record_bytes: the length of every record, a positive int.
        header_bytes: bytes to skip at the start of each file (default 0).
        footer_bytes: bytes to ignore at the end of each file (default 0).
        on_error: what a partial trailing record does: ``"raise"`` (the default) raises
            :class:`~feedline.exceptions.CorruptRecordError` when the files are first
            measured (``len()`` or indexing); ``"skip"``/``"warn"`` leave it out.
        storage_options: passed to fsspec for URLs.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "f.bin")
    >>> with open(path, "wb") as f: _ = f.write(b"HDR" + b"aabbcc" + b"F")
    >>> records = FixedLengthRecords(path, 2, header_bytes=3, footer_bytes=1)
    >>> len(records), records[1], records[-1], list(records)
    (3, b'bb', b'cc', [b'aa', b'bb', b'cc'])
    """

    def _start(self) -> None:
        self._layouts: list[_Layout] | None = None

    def _layout(self) -> list[_Layout]:
        if self._layouts is None:
            layouts = [
                _Layout(
                    p, self.record_bytes, self.header_bytes, self.footer_bytes,
                    self.storage_options,
                )
                for p in self.paths
            ]
            before = 0
            for lay in layouts:
                if lay.partial_at is not None:
                    report(lay.error(before), self.on_error, stacklevel=3)
                before += lay.count
            self._layouts = layouts
            self._starts = np.cumsum([0] + [lay.count for lay in layouts]).tolist()
        return self._layouts

    def __len__(self) -> int:
        self._layout()
        return self._starts[-1]

    def __getitem__(self, index: int) -> bytes:
        layouts = self._layout()
        n = self._starts[-1]
        index = record_index("index", index, n)
        k = int(np.searchsorted(self._starts, index, side="right")) - 1
        lay = layouts[k]
        offset = lay.first + (index - self._starts[k]) * self.record_bytes
        path = local_path(lay.path, "FixedLengthRecords", "feedline.fixed.read_fixed")
        fd = os.open(path, os.O_RDONLY)
        try:
            data = os.pread(fd, self.record_bytes, offset)
        finally:
            os.close(fd)
        if len(data) != self.record_bytes:
            raise CorruptRecordError(
                f"file shrank: read {len(data)} of {self.record_bytes} bytes",
                path=lay.path, index=index, offset=offset,
            )
        return data

    def iterator(self, state: dict[str, Any] | None = None) -> FixedLengthIterator:
        """A :class:`FixedLengthIterator` over the records, with the same options.

        Args:
            state: a state from :meth:`FixedLengthIterator.get_state` to resume at;
                ``None`` (the default) starts at the first record.
        """
        it = FixedLengthIterator(
            self.paths,
            self.record_bytes,
            header_bytes=self.header_bytes,
            footer_bytes=self.footer_bytes,
            on_error=self.on_error,
            storage_options=self.storage_options,
        )
        if state is not None:
            it.set_state(state)
        return it

    def __iter__(self) -> FixedLengthIterator:
        return self.iterator()


class FixedLengthIterator(_FixedOptions, DatasetIterator[bytes]):
    """Streams fixed-length records file after file.

    State: ``{"type": "fixed", "file": f, "offset": o, "index": i, "skipped": s}`` —
    the next record is at byte ``o`` of file ``f`` and is record ``i`` overall. Each file
    is opened when the iterator reaches it.

    Args:
        paths: one path or a list of paths; fsspec URLs (``s3://``, ``gs://``,
            ``memory://``, ``file://``) are read through fsspec.
        record_bytes: the length of every record, a positive int.
        header_bytes: bytes to skip at the start of each file (default 0).
        footer_bytes: bytes to ignore at the end of each file (default 0).
        on_error: what a partial trailing record does: ``"raise"`` (the default) raises
            :class:`~feedline.exceptions.CorruptRecordError` when reached;
            ``"skip"``/``"warn"`` leave it out and count it in ``skipped``.
        storage_options: passed to fsspec for URLs (construction arguments, not state).

    >>> import os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> paths = [os.path.join(d, n) for n in ("a.bin", "b.bin")]
    >>> for p, data in zip(paths, (b"0011", b"22")):
    ...     with open(p, "wb") as f: _ = f.write(data)
    >>> it = FixedLengthIterator(paths, 2)
    >>> next(it), next(it)
    (b'00', b'11')
    >>> state = it.get_state()
    >>> {k: state[k] for k in ("file", "offset", "index")}
    {'file': 0, 'offset': 4, 'index': 2}
    >>> it2 = FixedLengthIterator(paths, 2); it2.set_state(state); list(it2)
    [b'22']
    """

    def _start(self) -> None:
        self.skipped = 0
        self._file = 0
        self._offset: int | None = None  # None: the file has not been opened yet
        self._index = 0
        self._f: Any = None
        self._lay: _Layout | None = None
        self._buf = b""
        self._pos = 0
        self._limit = 0

    def _open(self) -> bool:
        """Open file ``self._file`` at ``self._offset``; False when all files are done."""
        while self._file < len(self.paths):
            lay = _Layout(
                self.paths[self._file], self.record_bytes, self.header_bytes, self.footer_bytes,
                self.storage_options,
            )
            fresh = self._offset is None
            if fresh:
                if lay.partial_at is not None:
                    report(lay.error(self._index), self.on_error, stacklevel=3)
                    self.skipped += 1
                self._offset = lay.first
            assert self._offset is not None  # set just above when the file is fresh
            self._limit = lay.first + lay.count * self.record_bytes
            if self._offset >= self._limit:
                self._file += 1
                self._offset = None
                continue
            self._lay = lay
            self._f = open_file(lay.path, "rb", storage_options=self.storage_options)
            self._f.seek(self._offset)
            self._buf, self._pos = b"", 0
            return True
        return False

    def __next__(self) -> bytes:
        rb = self.record_bytes
        if self._pos + rb > len(self._buf):
            if self._f is None and not self._open():
                raise StopIteration
            while True:
                assert self._offset is not None  # a file is open (_open returned True)
                left = self._limit - self._offset
                if left <= 0:
                    self._close_file()
                    self._file += 1
                    self._offset = None
                    if not self._open():
                        raise StopIteration
                    continue
                want = min(left, max(rb, _CHUNK // rb * rb))
                data = self._f.read(want)
                if len(data) < rb:
                    assert self._lay is not None  # set by _open with the file
                    raise CorruptRecordError(
                        f"file shrank while reading: got {len(data)} of {rb} bytes",
                        path=self._lay.path, index=self._index, offset=self._offset,
                    )
                self._buf, self._pos = data, 0
                break
        record = self._buf[self._pos : self._pos + rb]
        self._pos += rb
        assert self._offset is not None  # a record was buffered from an open file
        self._offset += rb
        self._index += 1
        return record

    def get_state(self) -> dict[str, Any]:
        return {
            "type": "fixed",
            "file": self._file,
            "offset": self._offset,
            "index": self._index,
            "skipped": self.skipped,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        """Resume at a position :meth:`get_state` returned.

        Args:
            state: a ``{"type": "fixed", ...}`` dict from :meth:`get_state`; another
                type, a file number out of range or an offset off a record boundary
                raises :class:`~feedline.exceptions.StateError`.
        """
        check_state(state, "fixed", ("file", "offset", "index"))
        file, offset = state["file"], state["offset"]
        if not (isinstance(file, int) and 0 <= file <= len(self.paths)):
            raise StateError(f"state file number {file!r} is not one of {len(self.paths)} files")
        if offset is not None and (
            not isinstance(offset, int)
            or offset < self.header_bytes
            or (offset - self.header_bytes) % self.record_bytes
        ):
            raise StateError(f"state offset {offset!r} is not at a record boundary")
        index = state_int(state, "index", "fixed")
        skipped = state_int({"skipped": 0, **state}, "skipped", "fixed")
        self.close()
        self._file, self._offset, self._index = file, offset, index
        self.skipped = skipped

    def _close_file(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None
        self._buf, self._pos = b"", 0

    def close(self) -> None:
        if getattr(self, "_f", None) is not None:
            self._close_file()


@takes_arguments_of(FixedLengthIterator)
def read_fixed(*args: Any, **kwargs: Any) -> FixedLengthIterator:
    """Iterate over the ``record_bytes``-long records of one file or a list of files
    (``FixedLengthRecordDataset`` semantics; see the module docstring).

    Returns a :class:`FixedLengthIterator`, whose options these are.

    Args:
        paths: one path or a list of paths (local or fsspec URLs).
        record_bytes: the length of every record, a positive int.
        header_bytes: bytes to skip at the start of each file (default 0).
        footer_bytes: bytes to ignore at the end of each file (default 0).
        on_error: what a partial trailing record does: ``"raise"`` (the default),
            ``"skip"`` or ``"warn"``.
        storage_options: passed to fsspec for URLs.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "f.bin")
    >>> with open(path, "wb") as f: _ = f.write(bytes(range(6)))
    >>> [list(r) for r in read_fixed(path, 3)]
    [[0, 1, 2], [3, 4, 5]]
    >>> list(read_fixed(path, 4))
    Traceback (most recent call last):
    ...
    feedline.exceptions.CorruptRecordError: ...
    """
    return FixedLengthIterator(*args, **kwargs)


def _cifar_image(record: bytes, label_bytes: int) -> np.ndarray:
    planes = np.frombuffer(record, dtype=np.uint8, offset=label_bytes)
    return np.ascontiguousarray(planes.reshape(3, 32, 32).transpose(1, 2, 0))


def _cifar10(record: bytes) -> tuple[int, np.ndarray]:
    return record[0], _cifar_image(record, 1)


def _cifar100(record: bytes) -> tuple[tuple[int, int], np.ndarray]:
    return (record[0], record[1]), _cifar_image(record, 2)


def read_cifar10(
    paths: Any, *, on_error: str = "raise", storage_options: dict | None = None
) -> DatasetIterator:
    """Yield ``(label, image)`` from CIFAR-10 binary files (``data_batch_*.bin``):
    ``label`` an int 0-9, ``image`` a ``32x32x3`` (HWC, RGB) uint8 array.

    Args:
        paths: one path or a list of paths (local or fsspec URLs).
        on_error: what a partial trailing record does: ``"raise"`` (the default),
            ``"skip"`` or ``"warn"``.
        storage_options: passed to fsspec for URLs.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "c.bin")
    >>> planes = bytes([10]) * 1024 + bytes([20]) * 1024 + bytes([30]) * 1024  # R, G, B
    >>> _ = open(path, "wb").write(bytes([7]) + planes)
    >>> label, image = next(read_cifar10(path))
    >>> label, image.shape, image[5, 9].tolist()
    (7, (32, 32, 3), [10, 20, 30])
    """
    records = read_fixed(
        paths, 1 + CIFAR_IMAGE_BYTES, on_error=on_error, storage_options=storage_options
    )
    return TransformIterator(records, functools.partial(map, _cifar10))


def read_cifar100(
    paths: Any, *, on_error: str = "raise", storage_options: dict | None = None
) -> DatasetIterator:
    """Yield ``((coarse_label, fine_label), image)`` from CIFAR-100 binary files
    (``train.bin``, ``test.bin``); ``image`` is ``32x32x3`` (HWC, RGB) uint8.

    Args:
        paths: one path or a list of paths (local or fsspec URLs).
        on_error: what a partial trailing record does: ``"raise"`` (the default),
            ``"skip"`` or ``"warn"``.
        storage_options: passed to fsspec for URLs.

    >>> import os, tempfile
    >>> import numpy as np
    >>> path = os.path.join(tempfile.mkdtemp(), "test.bin")
    >>> record = bytes([3, 42]) + bytes([1]) * 1024 + bytes([2]) * 1024 + bytes([3]) * 1024
    >>> with open(path, "wb") as f: _ = f.write(record)
    >>> (coarse, fine), image = next(iter(read_cifar100(path)))
    >>> (coarse, fine), image.shape, image.dtype, image[0, 1].tolist()   # R, G, B planes
    ((3, 42), (32, 32, 3), dtype('uint8'), [1, 2, 3])
    """
    records = read_fixed(
        paths, 2 + CIFAR_IMAGE_BYTES, on_error=on_error, storage_options=storage_options
    )
    return TransformIterator(records, functools.partial(map, _cifar100))
