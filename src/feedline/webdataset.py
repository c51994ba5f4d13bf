"""WebDataset tar shards (LAION, DataComp, most large image-text sets); also importable as
``feedline.webdataset``. The package holds ``reader``, ``writer``, ``index`` (sample offsets)
and ``decode`` (field decoding).

* :func:`read` — samples ``{"__key__", "__url__", ext: bytes}`` grouped as the webdataset
  package groups them, from brace-expanded shard lists (local or ``s3://``), sharded over
  ranks and workers, optionally decoded, resumable, with an optional local shard cache
  and read-ahead;
* :class:`IndexedTarShards` — random access by sample index through sidecar indexes
  (:func:`build_index`), for ``global_shuffle`` and equal per-rank counts;
* :class:`TarWriter`, :class:`ShardWriter` — atomic, deterministic shard writing with
  ``maxcount``/``maxsize``;
* :func:`decode_sample` — ``.json``/``.cls``/``.txt``/``.npy`` and images.

>>> import os, tempfile
>>> d = tempfile.mkdtemp()
>>> with ShardWriter(os.path.join(d, "train-%06d.tar"), maxcount=2, index=True) as w:
...     for i in range(4):
...         _ = w.write({"__key__": f"{i:05d}", "txt": f"caption {i}", "cls": i % 2})
>>> ds = read(os.path.join(d, "train-{000000..000001}.tar"), decode=True)
>>> [(s["__key__"], s["txt"], s["cls"]) for s in ds][:2]
[('00000', 'caption 0', 0), ('00001', 'caption 1', 1)]
>>> idx = IndexedTarShards(expand_urls(os.path.join(d, "train-{000000..000001}.tar")))
>>> len(idx), sorted(s["__key__"] for s in idx.global_shuffle(seed=0))
(4, ['00000', '00001', '00002', '00003'])
"""

from feedline.formats.webdataset import *  # noqa: F403 - the public names, defined there
from feedline.formats.webdataset import __all__ as __all__
