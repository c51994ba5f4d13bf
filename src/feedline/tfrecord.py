"""TFRecord files: read and write them exactly as TensorFlow does.

This package holds :mod:`.reader` (sequential reading, index building), :mod:`.writer`,
:mod:`.index` (the sidecar index file), :mod:`.random_access` (:class:`TFRecordFile`) and
:mod:`.scan` (frame parsing and CRCs); its public names are re-exported here and as
``feedline.tfrecord``.

Format
------
A TFRecord file is a sequence of frames, little-endian::

    uint64 length
    uint32 masked_crc32c(the 8 length bytes)
    length bytes of data
    uint32 masked_crc32c(data)

where ``masked_crc32c(x) = ((c >> 15 | c << 17) + 0xa282ead8) mod 2**32`` with ``c`` the
CRC-32C (Castagnoli) of ``x``. A GZIP or ZLIB file is this byte stream compressed as a
whole. :class:`TFRecordWriter` writes uncompressed files byte-identical to TensorFlow's
``tf.io.TFRecordWriter``.

Reading
-------
:func:`read` returns a :class:`TFRecordReader`, an iterator of ``bytes`` that verifies
both CRCs by default, detects the compression from the first bytes
(``compression="auto"``), and can report and restore its position (``get_state`` /
``set_state``, the :class:`~feedline.dataset.iterator.DatasetIterator` protocol; for a
compressed file, restoring decompresses again from the start and skips).
:func:`read_batches` yields lists of ``batch_size`` records through the same reader; this
is the fast path for small records: the reader fills a reusable 4 MiB buffer with one
``readinto`` and walks the frames in it, handling runs of equal-length frames with numpy
instead of one Python step per frame. Payloads of 32 KiB or more in an uncompressed local
file skip that buffer: each is read with one ``os.pread`` straight into its ``bytes`` and
checked there (one copy of the data instead of two).

Both read local paths and fsspec URLs (``s3://``, ``gs://``, ``memory://``,
``file://``; ``storage_options`` go to fsspec, see :mod:`feedline.storage.fs`), opening the
file on the first read. Random access (:class:`TFRecordFile`) needs a local file.

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "a.tfrecord")
>>> with TFRecordWriter(path) as w:
...     for payload in [b"first", b"", b"third"]:
...         w.write(payload)
>>> list(read(path))
[b'first', b'', b'third']
>>> it = read(path); _ = next(it); state = it.get_state(); state
{'type': 'tfrecord', 'offset': 21, 'index': 1, 'skipped': 0, 'skipped_bytes': 0}
>>> it2 = read(path); it2.set_state(state); list(it2)
[b'', b'third']
>>> list(read_batches(path, 2))
[[b'first', b''], [b'third']]

Damage
------
A length CRC mismatch, a data CRC mismatch or a file that ends inside a frame raises
:class:`~feedline.exceptions.CorruptRecordError` naming the path, the record index and
the byte offset of the damaged frame (TensorFlow's own message gives the offset of the
data for a data CRC mismatch; feedline names both). The records before the damage are
yielded first, as TensorFlow does. With ``on_error="skip"`` (or ``"warn"``, which also
issues a ``RuntimeWarning``) the reader goes on: past a frame whose data CRC fails (its
length is trustworthy), to the next indexed record when a sidecar index exists
(:func:`build_index`), else to the next position whose 12 bytes form a header with a
valid length CRC and whose whole frame follows with a valid data CRC (also after a
length that runs past the end of the file, which may be the damaged field itself). ``skipped`` counts the damaged stretches skipped (with an index: the
indexed records passed over) and ``skipped_bytes`` their bytes. Record indices after a
resynchronisation by scanning count the damaged stretch as one record.

Sidecar index
-------------
:func:`build_index` writes ``<path>.index``; :class:`TFRecordFile` uses it for
``len()`` and random access. The index file is little-endian binary::

    offset  size  field
    0       8     magic b"FLTFRIDX"
    8       4     uint32 version = 1
    12      4     uint32 compression of the indexed file: 0 none, 1 GZIP, 2 ZLIB
    16      8     uint64 N, the number of records
    24      8     uint64 size in bytes of the indexed file (to detect a stale index)
    32      8*N   uint64 offset of each record's frame (in the uncompressed stream)
    32+8N   8*N   uint64 data length of each record

so ``numpy.fromfile(p, "<u8", offset=32)`` reads the two arrays back.
"""

from feedline.formats.tfrecord import *  # noqa: F403 - the public names, defined there
from feedline.formats.tfrecord import __all__ as __all__
