"""Open a folder written by ``datasets.Dataset.save_to_disk`` (or
``DatasetDict.save_to_disk``) without the ``datasets`` package.

A saved dataset folder holds ``state.json`` (its ``_data_files`` list the Arrow IPC
stream files, ``data-00000-of-0000N.arrow``, in order), ``dataset_info.json`` and the
files themselves. A saved ``DatasetDict`` holds ``dataset_dict.json`` (``{"splits":
[...]}``) and one such folder per split.

Values are the stored Arrow values: features that ``datasets`` decodes on access
(``Image``, ``Audio``) come as their stored struct (``{"bytes": ..., "path": ...}``),
``ClassLabel`` as its integer.

>>> import os, tempfile, json, pyarrow as pa
>>> d = tempfile.mkdtemp()
>>> with pa.OSFile(os.path.join(d, "data-00000-of-00001.arrow"), "wb") as f:
...     with pa.ipc.new_stream(f, pa.schema([("a", pa.int64())])) as w:
...         w.write_table(pa.table({"a": [1, 2]}))
>>> with open(os.path.join(d, "state.json"), "w") as f:
...     json.dump({"_data_files": [{"filename": "data-00000-of-00001.arrow"}]}, f)
>>> load_from_disk(d).to_list()
[{'a': 1}, {'a': 2}]
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

from feedline._internal.validate import UNSET, positive_int, renamed_option
from feedline.exceptions import CorruptRecordError
from feedline.formats.parquet.reader import (
    BatchesDataset,
    RowsDataset,
    read_batches,
    read_rows,
)
from feedline.storage.fs import is_remote, open_file

__all__ = ["load_from_disk"]


def _join(base: str, name: str) -> str:
    if is_remote(base):
        return base.rstrip("/") + "/" + name
    return os.path.join(base, name)


def _read_json(path: str, storage_options: dict | None) -> Any:
    try:
        with open_file(path, "rb", storage_options=storage_options) as f:
            data = f.read()
    except FileNotFoundError:
        return None
    try:
        return json.loads(data.decode("utf-8"))
    except ValueError as exc:  # not UTF-8, not JSON
        raise CorruptRecordError(f"not a JSON file: {exc}", path=path, offset=0) from exc


def _plain_name(name: Any) -> bool:
    return (isinstance(name, str) and name not in ("", ".", "..") and "/" not in name
            and os.sep not in name)


def _data_files(path: str, state: Any) -> list[str]:
    """The file names ``state.json`` lists, each a plain name inside the folder."""
    where = _join(path, "state.json")
    entries = state.get("_data_files", []) if isinstance(state, dict) else None
    if not isinstance(entries, list):
        raise CorruptRecordError("`_data_files` is not a list", path=where)
    names: list[str] = []
    for i, entry in enumerate(entries):
        name = entry.get("filename") if isinstance(entry, dict) else None
        if not _plain_name(name):
            raise CorruptRecordError(f"`_data_files[{i}]` is not a file name inside the "
                                     f"folder: {entry!r}", path=where, index=i)
        names.append(str(name))
    return names


def load_from_disk(path: str | os.PathLike, *, split: str | None = None,
                   columns: Sequence[str] | None = None, batch_size: int | None = None,
                   drop_remainder: bool = False, cache_fragments: int = 2,
                   min_fragment_rows: int = 1, storage_options: dict | None = None,
                   drop_last: Any = UNSET
                   ) -> RowsDataset | BatchesDataset | dict[str, RowsDataset | BatchesDataset]:
    """The saved Hugging Face dataset in folder ``path``.

    A ``Dataset`` folder gives :func:`~feedline.formats.parquet.reader.read_rows` over its
    Arrow files (rows in the saved order) or, with ``batch_size``,
    :func:`~feedline.formats.parquet.reader.read_batches`. A ``DatasetDict`` folder gives
    a ``dict`` from split name to such a dataset, in the saved order of the splits.

    Args:
        path: the folder, local or a URL. One with neither ``state.json`` nor
            ``dataset_dict.json`` raises ``FileNotFoundError``.
        split: for a ``DatasetDict`` folder, the one split to return (e.g. ``"train"``;
            ``KeyError`` listing the splits if there is no such split); ``None`` (the
            default) returns all. Given for a single-dataset folder it raises
            ``ValueError``.
        columns: the columns to read; ``None`` (the default) reads all.
        batch_size: ``None`` (the default) gives rows; a positive int gives batches of
            that many rows.
        drop_remainder: with ``batch_size``, true leaves out a shorter last batch.
        cache_fragments: how many decoded fragments to keep (default 2).
        min_fragment_rows: e.g. 65536 joins the 1,000-row record batches that
            ``save_to_disk`` writes for faster reading in order (see
            :class:`~feedline.formats.parquet.arrow.TableFiles`); default 1.
        storage_options: passed to fsspec for a URL.
        drop_last: the deprecated old name of ``drop_remainder`` (a
            ``DeprecationWarning``).

    >>> import os, tempfile, json, pyarrow as pa
    >>> d = tempfile.mkdtemp()                       # a DatasetDict folder with one split
    >>> os.mkdir(os.path.join(d, "train"))
    >>> with pa.OSFile(os.path.join(d, "train", "data-00000-of-00001.arrow"), "wb") as f:
    ...     with pa.ipc.new_stream(f, pa.schema([("t", pa.string()), ("l", pa.int64())])) as w:
    ...         w.write_table(pa.table({"t": ["x", "y", "z"], "l": [0, 1, 0]}))
    >>> with open(os.path.join(d, "train", "state.json"), "w") as f:
    ...     json.dump({"_data_files": [{"filename": "data-00000-of-00001.arrow"}]}, f)
    >>> with open(os.path.join(d, "dataset_dict.json"), "w") as f:
    ...     json.dump({"splits": ["train"]}, f)
    >>> splits = load_from_disk(d)
    >>> list(splits), splits["train"].to_list()[0]
    (['train'], {'t': 'x', 'l': 0})
    >>> [b["l"].tolist() for b in load_from_disk(d, split="train", batch_size=2, columns=["l"])]
    [[0, 1], [0]]
    >>> load_from_disk(d, split="test")
    Traceback (most recent call last):
    ...
    KeyError: ...
    """
    path = os.fspath(path)
    if batch_size is not None:
        positive_int("batch_size", batch_size)
    splits = _read_json(_join(path, "dataset_dict.json"), storage_options)
    if splits is not None:
        names = splits.get("splits", []) if isinstance(splits, dict) else None
        if not isinstance(names, list) or not all(_plain_name(n) for n in names):
            raise CorruptRecordError(f"`splits` is not a list of folder names: {names!r}",
                                     path=_join(path, "dataset_dict.json"))
        if split is not None:
            if split not in names:
                raise KeyError(f"{path} has no split {split!r}; its splits are {names}")
            names = [split]
        out = {name: load_from_disk(_join(path, name), columns=columns, batch_size=batch_size,
                                    drop_remainder=drop_remainder, drop_last=drop_last,
                                    cache_fragments=cache_fragments,
                                    min_fragment_rows=min_fragment_rows,
                                    storage_options=storage_options) for name in names}
        return out[split] if split is not None else out  # type: ignore[return-value]
    state = _read_json(_join(path, "state.json"), storage_options)
    if state is None:
        raise FileNotFoundError(
            f"{path} is not a saved Hugging Face dataset: it has neither state.json nor "
            "dataset_dict.json (datasets.Dataset.save_to_disk writes them)")
    if split is not None:
        raise ValueError(f"`split` is for DatasetDict folders; {path} holds a single dataset")
    files = [_join(path, name) for name in _data_files(path, state)]
    if not files:
        raise FileNotFoundError(f"{path}/state.json lists no data files")
    if batch_size is None:
        return read_rows(files, columns=columns, format="arrow", cache_fragments=cache_fragments,
                         min_fragment_rows=min_fragment_rows, storage_options=storage_options)
    drop = renamed_option("drop_last", "drop_remainder", drop_last, drop_remainder, False)
    return read_batches(files, batch_size=batch_size, drop_remainder=drop, columns=columns,
                        format="arrow", cache_fragments=cache_fragments,
                        min_fragment_rows=min_fragment_rows, storage_options=storage_options)
