"""The implementation of :mod:`feedline.recordio`, whose page documents it: import the
public names from ``feedline.recordio``."""

from __future__ import annotations

from feedline.formats.recordio.image import IRHeader, pack, pack_img, unpack, unpack_img
from feedline.formats.recordio.index import (
    IndexedRecordIO,
    build_index,
    default_idx_path,
    read_index,
)
from feedline.formats.recordio.stream import MAGIC, RecordIOReader, RecordIOWriter, encode, read

__all__ = [
    "MAGIC",
    "encode",
    "RecordIOWriter",
    "RecordIOReader",
    "read",
    "IndexedRecordIO",
    "read_index",
    "build_index",
    "default_idx_path",
    "IRHeader",
    "pack",
    "unpack",
    "pack_img",
    "unpack_img",
]
