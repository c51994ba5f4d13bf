"""Storage: opening bytes. Local files and fsspec URLs (:mod:`.fs`), and whole-stream
GZIP/ZLIB compression with detection (:mod:`.compression`).

>>> from feedline.storage import is_remote
>>> is_remote("s3://bucket/a.tfrecord"), is_remote("/data/a.tfrecord")
(True, False)
"""

from feedline.storage.fs import expand, file_size, is_remote, open_file, strip_file_scheme

__all__ = ["is_remote", "open_file", "expand", "file_size", "strip_file_scheme"]
