"""MXNet RecordIO: read and write ``.rec`` files byte-identical to MXNet 1.9.1.

This package holds :mod:`.stream` (sequential reading and writing), :mod:`.index` (the
``.idx`` file and random access) and :mod:`.image` (``IRHeader`` image records); also
importable as ``feedline.recordio``.

Format
------
A file is a sequence of records. Each record is one or more *parts*; a part is::

    uint32 magic   = 0xced7230a                     (little-endian, at a 4-aligned offset)
    uint32 lrecord = (cflag << 29) | length         (length < 2**29)
    length bytes of data, then zero bytes up to the next multiple of 4

A payload that contains the magic word at a 4-byte aligned position (relative to the
payload start) cannot be stored in one part, or a reader that resynchronises on the
magic word would stop inside it. The writer therefore cuts the payload at every such
word and drops the word: the first part has ``cflag`` 1, middle parts 2, the last part
3; a payload without the word is one part with ``cflag`` 0. Readers join the parts
with the magic word between them. Only the last part is padded (the others have
lengths that are multiples of 4 by construction). This is exactly what MXNet's
``MXRecordIO`` (dmlc-core ``RecordIOWriter``) writes, so files are interchangeable.

``.idx`` files, written by ``MXIndexedRecordIO`` and ``im2rec``, hold one line per
record: ``key<TAB>byte offset<LF>``.

Image records (``mxnet.recordio.pack``) start with a 24-byte ``IRHeader``
(``<IfQQ``: flag, label, id, id2); when ``flag > 0`` the header's label field is 0 and
``flag`` float32 labels follow the header.

Reading
-------
>>> import os, tempfile
>>> from feedline import recordio
>>> path = os.path.join(tempfile.mkdtemp(), "a.rec")
>>> with recordio.RecordIOWriter(path) as w:
...     for payload in [b"first", b"", recordio.MAGIC.to_bytes(4, "little") * 2]:
...         _ = w.write(payload)
>>> [len(p) for p in recordio.read(path)]
[5, 0, 8]
>>> it = recordio.read(path); _ = next(it); state = it.get_state(); state
{'type': 'recordio', 'offset': 16, 'index': 1, 'skipped': 0}
>>> it2 = recordio.read(path); it2.set_state(state); [len(p) for p in it2]
[0, 8]

Damaged data raises :class:`~feedline.exceptions.CorruptRecordError` naming the path,
the record index and the byte offset; with ``on_error="skip"`` (or ``"warn"``, which
also issues a ``RuntimeWarning``) the reader resynchronises on the next magic word at a
4-byte aligned offset whose ``cflag`` is 0 or 1 — where MXNet's InputSplit would — and
counts the damaged stretches in ``skipped`` and their bytes in ``skipped_bytes``.
"""

from feedline.formats.recordio import *  # noqa: F403 - the public names, defined there
from feedline.formats.recordio import __all__ as __all__
