"""Plain text files, one record per line, read as ``tf.data.TextLineDataset`` reads them.

:func:`read_lines` yields each line without its line ending (``\\n`` or ``\\r\\n``); a last
line without a newline is yielded too, and a final newline does not make an extra empty
line. Lines are ``bytes`` (as TensorFlow's strings are) unless ``encoding`` is given.
GZIP and ZLIB files are read through (``compression="auto"`` detects them; a file that
merely starts with bytes that look like a gzip or zlib header but does not decompress
is read as plain text, unless its name ends in ``.gz``, ``.zlib`` and the like). :func:`write_lines` writes them. Local paths and fsspec URLs
(``s3://``, ``gs://``, ``memory://``, ``file://``, with ``storage_options``) are read
alike; the file is opened on the first read.

The reader is a :class:`~feedline.dataset.iterator.DatasetIterator`: ``get_state()``
returns ``{"type": "text", "offset": byte offset of the next line (in the uncompressed
stream), "line": number of lines already read}``; for a compressed file ``set_state``
decompresses again from the start and skips.

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "a.txt")
>>> _ = open(path, "wb").write(b"first\\r\\nsecond\\n\\nlast")
>>> list(read_lines(path))
[b'first', b'second', b'', b'last']
>>> it = read_lines(path, encoding="utf-8"); next(it); it.get_state()
'first'
{'type': 'text', 'offset': 7, 'line': 1}
"""

from feedline.formats.text import *  # noqa: F403 - the public names, defined there
from feedline.formats.text import __all__ as __all__
