"""MNIST IDX files: read and write n-dimensional arrays, gzipped or not.

Layout (all integers big-endian)::

    0x00 0x00 <type code> <ndim>        magic: two zero bytes, element type, dimensions
    ndim x uint32                        the size of each dimension
    the elements, big-endian, row-major

Type codes: ``0x08`` uint8, ``0x09`` int8, ``0x0B`` int16, ``0x0C`` int32, ``0x0D``
float32, ``0x0E`` float64. Files starting with the gzip magic ``1f 8b`` (such as the
distributed ``train-images-idx3-ubyte.gz``) are decompressed transparently.

Damaged files raise :class:`~feedline.exceptions.CorruptRecordError` naming the path
and the byte offset (in the decompressed stream for gzipped files): a bad magic, an
unknown type code, a header or data cut short, or bytes after the data.

>>> import os, tempfile, numpy as np
>>> path = os.path.join(tempfile.mkdtemp(), "labels-idx1-ubyte.gz")
>>> write_idx(path, np.array([5, 0, 4], dtype=np.uint8))
>>> read_idx(path)
array([5, 0, 4], dtype=uint8)
>>> encode_idx(np.array([[1, 2]], dtype=">i2")).hex()
'00000b02000000010000000200010002'
"""

from feedline.formats.idx import *  # noqa: F403 - the public names, defined there
from feedline.formats.idx import __all__ as __all__
