"""feedline on Ray: its formats as Ray Data datasources, and Ray Data datasets as feedline sources.

Ray Data reads Parquet, images and (with TensorFlow installed) TFRecord, but has no
RecordIO reader at all, and no WebDataset or TFRecord reader that works without
TensorFlow. These functions read each format with feedline's own reader inside Ray
Data's read tasks (one task per file; Ray spreads the files over the cluster):

* :func:`read_recordio` — MXNet RecordIO (``.rec``; with ``parallelism`` above the file
  count, InputSplit byte-range parts): one row ``{"record": bytes}`` per
  record; ``images=True`` splits the image header as MXNet's ``unpack`` does:
  ``{"label": [float, ...], "id": int, "image": bytes}`` (the label always a list: one
  value, or all of a multi-label record).
* :func:`read_tfrecord` — TFRecord (any compression feedline reads): ``{"record":
  bytes}`` per record, or with ``parse_examples=True`` one column per feature of each
  ``tf.train.Example`` (feedline's decoder: int64/float32 lists, lists of bytes).
* :func:`read_webdataset` — WebDataset tar shards: one row per sample, ``"__key__"`` and
  one ``bytes`` column per extension.
* :func:`read_parquet` — Parquet/Arrow files read with feedline's table reader (the
  rows feedline's own pipelines see).

:func:`from_ray` turns a Ray Data dataset into a feedline :class:`~feedline.Dataset`
(a stream whose state is the number of rows consumed: resumable when the Ray dataset
yields its rows in a deterministic order, so set
``DataContext.get_current().execution_options.preserve_order = True``).

Paths: local paths or paths on a file system every node sees (a shared mount); a
directory or glob is expanded on the driver. Without Ray installed every function raises
``ImportError`` naming ``pip install 'feedline[ray]'``. ``map(fn, num_workers=N,
backend="ray")`` (:mod:`feedline.runtime.ray_executor`) is the other half: feedline's
own pipelines with their worker stages on a cluster.

>>> import feedline.ray as fr
>>> sorted(fr.__all__)
['from_ray', 'read_parquet', 'read_recordio', 'read_tfrecord', 'read_webdataset']
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from feedline._internal.optional import require
from feedline.dataset.base import Dataset
from feedline.dataset.iterator import DatasetIterator, check_state

__all__ = ["read_recordio", "read_tfrecord", "read_webdataset", "read_parquet", "from_ray"]

_ROWS_PER_BLOCK = 1024


def _ray() -> Any:
    return require("ray", extra="ray")


def _files(paths: str | os.PathLike | Sequence[str | os.PathLike]) -> list[str]:
    """``paths`` expanded: a directory's files and a glob's matches, sorted."""
    items = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    out: list[str] = []
    for item in (os.fspath(i) for i in items):
        if os.path.isdir(item):
            out.extend(sorted(os.path.join(item, n) for n in os.listdir(item)
                              if os.path.isfile(os.path.join(item, n))))
        elif glob.has_magic(item):
            out.extend(sorted(glob.glob(item)))
        else:
            out.append(item)
    if not out:
        raise FileNotFoundError(f"no files match {paths!r}")
    return out


def _blocks(rows: Iterator[dict]) -> Iterator[Any]:
    """Rows grouped into pyarrow tables of up to ``_ROWS_PER_BLOCK`` rows."""
    import pyarrow as pa

    chunk: list[dict] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) >= _ROWS_PER_BLOCK:
            yield pa.Table.from_pylist(chunk)
            chunk = []
    if chunk:
        yield pa.Table.from_pylist(chunk)


def _recordio_rows(path: Any, images: bool) -> Iterator[dict]:
    """Rows of one file, or of one byte-range part ``(files, r, n)`` of a file set."""
    from feedline.formats.recordio import read, unpack
    from feedline.io.input_split import InputSplit

    records = InputSplit(path[0], path[1], path[2]) if isinstance(path, tuple) else read(path)
    for record in records:
        if not images:
            yield {"record": record}
            continue
        header, payload = unpack(record)
        yield {"label": np.atleast_1d(np.asarray(header.label, np.float32)).tolist(),
               "id": int(header.id), "image": payload}


def _tfrecord_rows(path: str, parse: bool) -> Iterator[dict]:
    from feedline.formats.example import decode_example
    from feedline.formats.tfrecord import read

    for i, record in enumerate(read(path)):
        if not parse:
            yield {"record": record}
            continue
        row = decode_example(record, index=i)
        yield {k: (v.tolist() if hasattr(v, "tolist") else v) for k, v in row.items()}


def _webdataset_rows(path: str) -> Iterator[dict]:
    from feedline.formats.webdataset import read

    for sample in read([path], rank=0, world_size=1):
        yield dict(sample)


def _parquet_rows(path: str, columns: Sequence[str] | None) -> Iterator[dict]:
    from feedline.formats.parquet import read_rows

    yield from read_rows(path, columns=columns)


def _read(kind: str, files: list[str], option: Any, parallelism: int) -> Any:
    """A Ray dataset with one read task per file, each reading with ``kind``'s reader
    (RecordIO with ``parallelism`` above the file count: one task per byte-range part)."""
    ray = _ray()
    from ray.data import ReadTask
    from ray.data.block import BlockMetadata
    from ray.data.datasource import Datasource

    readers = {"recordio": _recordio_rows, "tfrecord": _tfrecord_rows,
               "webdataset": lambda p, _opt: _webdataset_rows(p), "parquet": _parquet_rows}
    make_rows = readers[kind]
    parts = max(parallelism, 1)

    class FeedlineDatasource(Datasource):
        def get_name(self) -> str:
            return f"feedline.{kind}"

        def estimate_inmemory_data_size(self) -> int | None:
            return sum(os.path.getsize(f) for f in files)

        def get_read_tasks(self, parallelism: int, per_task_row_limit: int | None = None,
                           data_context: Any = None) -> list:
            units: list[Any] = list(files)
            size = {f: os.path.getsize(f) for f in files}
            if kind == "recordio" and parts > len(files):
                units = [(files, r, parts) for r in range(parts)]
            tasks = []
            for unit in units:
                nbytes = sum(size.values()) // parts if isinstance(unit, tuple) else size[unit]
                meta = BlockMetadata(num_rows=None, size_bytes=nbytes, input_files=tuple(files)
                                     if isinstance(unit, tuple) else (unit,), exec_stats=None)

                def read(unit: Any = unit) -> Iterator[Any]:
                    return _blocks(make_rows(unit, option))

                tasks.append(ReadTask(read, meta))
            return tasks

    return ray.data.read_datasource(FeedlineDatasource(), override_num_blocks=parallelism
                                    if parallelism > 0 else None)


def read_recordio(paths: Any, *, images: bool = False, parallelism: int = -1) -> Any:
    """A Ray dataset of the records of RecordIO files; see the module docstring.

    Args:
        paths: a path, a directory (its files, not recursive), a glob, or a list of
            them, expanded and sorted on the driver; local or on a file system every
            node sees. Nothing matching raises ``FileNotFoundError``.
        images: split each record's image header as MXNet's ``unpack`` does, into rows
            ``{"label": [float, ...], "id": int, "image": bytes}``; ``False`` (the
            default) gives rows ``{"record": bytes}``.
        parallelism: the number of output blocks Ray Data is asked for
            (``override_num_blocks``); ``-1`` (the default) or any value below 1 lets
            Ray choose, one read task per file. Above the number of files, the files,
            read as one byte range, are split into that many parts exactly as MXNet's
            InputSplit does (:class:`feedline.io.InputSplit`): one read task per part,
            every record in exactly one.

    Needs Ray and a running (or local) cluster, so the example is not run by the tests:

    >>> import feedline.ray as fr                                   # doctest: +SKIP
    >>> fr.read_recordio("data/train.rec", images=True).take(1)[0]["label"]  # doctest: +SKIP
    [3.0]
    """
    return _read("recordio", _files(paths), images, parallelism)


def read_tfrecord(paths: Any, *, parse_examples: bool = False, parallelism: int = -1) -> Any:
    """A Ray dataset of the records (or parsed Examples) of TFRecord files.

    Args:
        paths: a path, a directory (its files, not recursive), a glob, or a list of
            them, expanded and sorted on the driver; local or on a file system every
            node sees. Nothing matching raises ``FileNotFoundError``.
        parse_examples: decode each record as a ``tf.train.Example`` with feedline's
            decoder, one column per feature; ``False`` (the default) gives rows
            ``{"record": bytes}``.
        parallelism: the number of output blocks Ray Data is asked for
            (``override_num_blocks``); ``-1`` (the default) or any value below 1 lets
            Ray choose. There is one read task per file.

    Needs Ray and a running (or local) cluster, so the example is not run by the tests:

    >>> import feedline.ray as fr                                    # doctest: +SKIP
    >>> fr.read_tfrecord("data/train-*.tfrecord", parse_examples=True).columns()  # doctest: +SKIP
    ['image', 'label']
    """
    return _read("tfrecord", _files(paths), parse_examples, parallelism)


def read_webdataset(paths: Any, *, parallelism: int = -1) -> Any:
    """A Ray dataset of the samples of WebDataset tar shards.

    One row per sample: ``"__key__"`` and one ``bytes`` column per extension.

    Args:
        paths: a path, a directory (its files, not recursive), a glob, or a list of
            them, expanded and sorted on the driver; local or on a file system every
            node sees. Nothing matching raises ``FileNotFoundError``.
        parallelism: the number of output blocks Ray Data is asked for
            (``override_num_blocks``); ``-1`` (the default) or any value below 1 lets
            Ray choose. There is one read task per file.

    Needs Ray and a running (or local) cluster, so the example is not run by the tests:

    >>> import feedline.ray as fr                                        # doctest: +SKIP
    >>> sorted(fr.read_webdataset("data/shards/*.tar").take(1)[0])       # doctest: +SKIP
    ['__key__', 'cls', 'jpg']
    """
    return _read("webdataset", _files(paths), None, parallelism)


def read_parquet(paths: Any, *, columns: Sequence[str] | None = None,
                 parallelism: int = -1) -> Any:
    """A Ray dataset of the rows of Parquet/Arrow files, read by feedline.

    Args:
        paths: a path, a directory (its files, not recursive), a glob, or a list of
            them, expanded and sorted on the driver; local or on a file system every
            node sees. Nothing matching raises ``FileNotFoundError``.
        columns: the columns to read; ``None`` (the default) reads all.
        parallelism: the number of output blocks Ray Data is asked for
            (``override_num_blocks``); ``-1`` (the default) or any value below 1 lets
            Ray choose. There is one read task per file.

    Needs Ray and a running (or local) cluster, so the example is not run by the tests:

    >>> import feedline.ray as fr                                             # doctest: +SKIP
    >>> fr.read_parquet("data/rows.parquet", columns=["y"]).take(2)           # doctest: +SKIP
    [{'y': 0}, {'y': 1}]
    """
    return _read("parquet", _files(paths), columns, parallelism)


class _RayRows(DatasetIterator):
    """The rows of a Ray dataset; state: how many were consumed."""

    def __init__(self, ds: Any) -> None:
        self._ds = ds
        self._count = 0
        self._rows: Iterator[Any] | None = None

    def __next__(self) -> Any:
        if self._rows is None:
            self._rows = iter(self._ds.iter_rows())
            for _ in range(self._count):
                next(self._rows)
        row = next(self._rows)
        self._count += 1
        return row

    def get_state(self) -> dict[str, Any]:
        return {"type": "ray_rows", "count": self._count}

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, "ray_rows", ("count",))
        self._count = int(state["count"])
        self._rows = None


def from_ray(ds: Any) -> Dataset:
    """A feedline stream of the rows of the Ray Data dataset ``ds``; see the module
    docstring (resuming skips the rows already consumed).

    Args:
        ds: a Ray Data dataset; its rows are read with ``ds.iter_rows()`` on every
            iteration. Resuming is exact only when it yields its rows in a deterministic
            order.

    Needs Ray and a running (or local) cluster, so the example is not run by the tests:

    >>> import ray                                                      # doctest: +SKIP
    >>> import feedline.ray as fr                                       # doctest: +SKIP
    >>> fr.from_ray(ray.data.range(5)).batch(2).to_list()               # doctest: +SKIP
    [[{'id': 0}, {'id': 1}], [{'id': 2}, {'id': 3}], [{'id': 4}]]
    """
    _ray()
    return Dataset.from_source(lambda: _RayRows(ds), name="from_ray")
