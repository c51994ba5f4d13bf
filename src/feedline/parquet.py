"""Parquet, Arrow IPC and saved Hugging Face datasets (``pip install 'feedline[parquet]'``).

Read (:func:`read_rows`, :func:`read_batches`, :func:`read_fragments`,
:func:`load_from_disk`), re-cut fragment streams (:func:`rebatch`) and write
(:class:`ParquetWriter`, :func:`write_parquet`). Also importable as ``feedline.parquet``. See
:mod:`feedline.formats.parquet.reader` for the semantics, and
:mod:`feedline.formats.parquet.arrow` for formats and damage.

>>> import os, tempfile
>>> from feedline import Dataset, parquet
>>> path = os.path.join(tempfile.mkdtemp(), "t.parquet")
>>> parquet.write_parquet(Dataset.range(5).map(lambda i: {"x": i}), path, row_group_size=2)
5
>>> it = parquet.read_batches(path, batch_size=2).iterator()
>>> next(it)["x"].tolist()
[0, 1]
>>> [b["x"].tolist() for b in parquet.read_batches(path, batch_size=2).iterator(it.get_state())]
[[2, 3], [4]]
"""

from feedline.formats.parquet import *  # noqa: F403 - the public names, defined there
from feedline.formats.parquet import __all__ as __all__
