"""Write records spread over ``N`` shard files, all-or-nothing.

``ShardedWriter(prefix, num_shards, format=...)`` opens ``num_shards`` files named
``<prefix>-00000-of-00008<suffix>`` … (five digits or more, TensorFlow's convention),
sends each record to one of them — round robin, or by ``key`` — and on success renames
them into place. Until then every shard lives under a hidden temporary name
(``.<name>.tmp-<random>`` in the same directory), so an interrupted job (an exception in
the ``with`` block, a crash, a killed process) never leaves a file with a final name
that looks complete; leaving the ``with`` block by an exception deletes the temporary
files. Shards that received no record are still written (empty), so that the
``-of-N`` in their names stays true.

``format="tfrecord"`` writes through :class:`feedline.tfrecord.TFRecordWriter`
(``compression`` is passed on); ``format="recordio"`` writes MXNet RecordIO through
:class:`feedline.recordio.IndexedRecordIO`, each ``.rec`` with its ``.idx`` (the index
is renamed first, so a final-named ``.rec`` always has its index). An ``.idx`` key is
the record's ``key`` when one is given (an int or a str; open the shard with
``IndexedRecordIO(..., key_type=str)`` for str keys), else its number in write order
(0, 1, 2, … over all shards).

Commit, step by step (``close()``): the shard writers are flushed and closed; a *pending*
manifest ``.<prefix>-of-<N>.manifest.json`` (hidden, beside the shards) names the files
about to appear; the shards are renamed into place one by one (for RecordIO the
``.idx`` before its ``.rec``); last the manifest is replaced by a *complete* one that
records each file's size. A reader of a ``-of-N`` set (:func:`feedline.storage.fs.expand`,
hence :func:`feedline.io.files.files`, ``Dataset`` sources and the CLI) calls
:func:`check_shard_sets`, which raises :class:`~feedline.exceptions.IncompleteShardSetError`
when a file it is about to read belongs to a set whose manifest is still pending (the
writer died between two renames) or no longer matches it (a shard missing or resized).
A set without manifest (written by another tool) is not checked. Sets named by a
``{index}`` format string have no manifest. The manifest is named by prefix and ``N``
only, so two sets sharing both (a TFRecord and a RecordIO set) share one manifest: the
set written last is checked, the other is not.

Temporary names carry the writer's process id; a new ``ShardedWriter`` for the same
names deletes the temporaries of writers whose process is gone (a killed job), and
replaces a pending manifest with its own.

``prefix`` may also be a format string with ``{index}`` and ``{num_shards}`` fields
(``"out/train-{index:03d}.rec"``), or an existing directory (files are then named
``<dir>/data-00000-of-00008<suffix>``).

>>> import os, tempfile
>>> from feedline import recordio
>>> d = tempfile.mkdtemp()
>>> with ShardedWriter(os.path.join(d, "train"), 2, format="recordio") as w:
...     for i in range(5):
...         _ = w.write(b"record %d" % i)
>>> sorted(os.listdir(d))
['.train-of-00002.manifest.json', 'train-00000-of-00002.idx', 'train-00000-of-00002.rec', 'train-00001-of-00002.idx', 'train-00001-of-00002.rec']
>>> list(recordio.read(os.path.join(d, "train-00001-of-00002.rec")))
[b'record 1', b'record 3']
"""

from feedline.formats.sharded import *  # noqa: F403 - the public names, defined there
from feedline.formats.sharded import __all__ as __all__
