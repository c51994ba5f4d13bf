"""The implementation of :mod:`feedline.parquet`, whose page documents it: import the
public names from ``feedline.parquet``."""

from feedline.formats.parquet.arrow import TableFiles, detect_table_format
from feedline.formats.parquet.huggingface import load_from_disk
from feedline.formats.parquet.reader import (
    BatchesDataset,
    FragmentsDataset,
    RebatchDataset,
    RowsDataset,
    read_batches,
    read_fragments,
    read_rows,
    rebatch,
)
from feedline.formats.parquet.writer import ParquetWriter, write_parquet

__all__ = [
    "read_rows",
    "read_batches",
    "read_fragments",
    "rebatch",
    "load_from_disk",
    "ParquetWriter",
    "write_parquet",
    "TableFiles",
    "detect_table_format",
    "RowsDataset",
    "BatchesDataset",
    "FragmentsDataset",
    "RebatchDataset",
]
