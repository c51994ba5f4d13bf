"""The implementation of :mod:`feedline.webdataset`, whose page documents it: import the
public names from ``feedline.webdataset``."""

from feedline.formats.webdataset.decode import DecodeOptions, decode_sample
from feedline.formats.webdataset.index import IndexedTarShards, build_index, read_index
from feedline.formats.webdataset.reader import TarShards, expand_urls, read
from feedline.formats.webdataset.writer import ShardWriter, TarWriter

__all__ = ["read", "expand_urls", "TarShards", "TarWriter", "ShardWriter", "build_index",
           "read_index", "IndexedTarShards", "decode_sample", "DecodeOptions"]
