"""The demo's input pipelines, built from feedline's stages.

Training (:func:`train_pipeline`)::

    files(train-*.rec, shuffle=True, seed)        the shard list, reshuffled every epoch
      .interleave(recordio.read, cycle_length=n)  all shards read round robin
      .shuffle(buffer, seed)                      a shuffle buffer across shards
      .map(decode_record, num_workers=2, seed)        decoding in 2 worker processes
      .batch(batch_size)                          lists of (pixels, label) samples
      .prefetch(4)                                a background thread reads ahead

``process=True`` ends it in ``.prefetch(4, process=True)`` instead: the whole pipeline
runs in a background process (``num_workers=0`` decodes there, without worker processes of
its own), and a training process only receives the batches.

Every stage reports its position, so a training job checkpointed mid-pass resumes with
exactly the next batch. Testing (:func:`test_pipeline`) reads the TFRecord shards in
order and parses the ``Example`` protos in the consumer's thread.

>>> from feedline.demo.data import load, pack
>>> import tempfile
>>> packed = pack(load(), tempfile.mkdtemp(), train_shards=2, test_shards=1)
>>> batches = test_pipeline(packed.test, scale=16, batch_size=100).to_list()
>>> [len(b) for b in batches], batches[0][0][0].shape
([100, 100, 100, 59], (64,))
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence

from feedline.dataset.base import Dataset
from feedline.demo.data import decode_example, decode_record
from feedline.formats import recordio, tfrecord
from feedline.io.files import files

__all__ = ["train_pipeline", "test_pipeline"]


def _recordio(path: str) -> Dataset:
    return Dataset.from_source(functools.partial(recordio.read, path),
                               name=f"recordio({os.path.basename(path)})")


def _tfrecord(path: str) -> Dataset:
    return Dataset.from_source(functools.partial(tfrecord.read, path),
                               name=f"tfrecord({os.path.basename(path)})")


def train_pipeline(paths: Sequence[str], *, scale: float, batch_size: int = 32,
                   shuffle_buffer: int = 1024, num_workers: int = 2, seed: int = 0,
                   prefetch: int | str = 4, process: bool = False, nice: int = 0) -> Dataset:
    """Batches of ``(pixels, label)`` samples from the RecordIO shards ``paths``.

    Args:
        paths: the training shards (RecordIO).
        scale: the pixels' maximum (16 for scikit-learn's digits, 255 for MNIST).
        batch_size: samples per batch.
        shuffle_buffer: the shuffle buffer across shards.
        num_workers: decoding processes (0: decode in the pipeline's own thread).
        seed: the seed of the shard order, the shuffle and the workers.
        prefetch: batches read ahead, in a background thread (or a process).
        process: run the whole pipeline in a background process.
        nice: with ``process=True``, its CPU priority (and its workers') lowered by
            that much.

    >>> import tempfile
    >>> from feedline.demo.data import load, pack
    >>> packed = pack(load(), tempfile.mkdtemp(), train_shards=2, test_shards=1)
    >>> ds = train_pipeline(packed.train, scale=16, batch_size=100, num_workers=0)
    >>> [len(b) for b in ds][:3], sum(len(b) for b in ds)
    ([100, 100, 100], 1438)
    >>> ds.close()
    """
    decode = functools.partial(decode_record, scale=scale)
    shuffled = (files(list(paths), shuffle=True, seed=seed)
                .interleave(_recordio, cycle_length=len(paths))
                .shuffle(shuffle_buffer, seed=seed))
    if num_workers:
        decoded = shuffled.map(decode, num_workers=num_workers, seed=seed, name="map(decode)")
    else:
        decoded = shuffled.map(decode, name="map(decode)")
    if not process:
        return decoded.batch(batch_size).prefetch(prefetch)
    return decoded.batch(batch_size).prefetch(prefetch, process=True, nice=nice)


def test_pipeline(paths: Sequence[str], *, scale: float, batch_size: int = 256) -> Dataset:
    """Batches of ``(pixels, label)`` samples from the TFRecord shards ``paths``, in order.

    Args:
        paths: the test shards (TFRecord), read one after another in this order.
        scale: the pixels' maximum (16 for scikit-learn's digits, 255 for MNIST).
        batch_size: samples per batch; the last batch holds the rest.

    >>> import tempfile
    >>> from feedline.demo.data import load, pack
    >>> packed = pack(load(), tempfile.mkdtemp(), train_shards=1, test_shards=2)
    >>> [len(b) for b in test_pipeline(packed.test, scale=16, batch_size=200)]
    [200, 159]
    """
    decode = functools.partial(decode_example, scale=scale)
    return (files(list(paths))
            .interleave(_tfrecord, cycle_length=1)
            .map(decode, name="map(parse_example)")
            .batch(batch_size))
