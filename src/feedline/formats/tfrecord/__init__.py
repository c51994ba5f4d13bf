"""The implementation of :mod:`feedline.tfrecord`, whose page documents it: import the
public names from ``feedline.tfrecord``."""

from feedline.formats.tfrecord.index import TFRecordIndex
from feedline.formats.tfrecord.random_access import TFRecordFile
from feedline.formats.tfrecord.reader import (
    TFRecordBatchReader,
    TFRecordReader,
    build_index,
    detect_compression,
    read,
    read_batches,
)
from feedline.formats.tfrecord.scan import masked_crc
from feedline.formats.tfrecord.writer import TFRecordWriter, write

__all__ = [
    "masked_crc",
    "detect_compression",
    "TFRecordWriter",
    "write",
    "TFRecordReader",
    "read",
    "TFRecordBatchReader",
    "read_batches",
    "TFRecordIndex",
    "build_index",
    "TFRecordFile",
]
