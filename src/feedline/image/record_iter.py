"""``ImageRecordIter``: MXNet's image record iterator, as a configured feedline pipeline.

``ImageRecordIter(path_imgrec=..., data_shape=(3, 224, 224), batch_size=...)`` reads
image records packed by ``feedline pack`` or MXNet's ``im2rec`` (RecordIO ``.rec`` +
``.idx``) — or TFRecord shards of ``tf.train.Example`` with ``image/encoded`` and
``image/class/label`` — and yields batches: ``data`` is ``(batch_size, C, H, W)``
``float32`` (normalised), ``uint8`` or ``int8``; ``label`` is ``(batch_size,)``
``float32`` (``(batch_size, label_width)`` when ``label_width > 1``); numpy arrays, or
torch tensors with ``output="torch"``. Each batch is a :class:`feedline.mxnet.DataBatch`
— ``batch.data[0]``, ``batch.label[0]``, ``batch.pad``, ``batch.index`` as in MXNet —
that also unpacks as ``data, label = batch``; the iterator has MXNet's ``reset()``,
``next()``, ``iter_next()``, ``getdata()``, ``getlabel()``, ``getpad()``,
``getindex()``, ``provide_data`` and ``provide_label`` (:class:`~feedline.mxnet.DataDesc`
named ``data_name`` / ``label_name``, default ``"data"`` / ``"softmax_label"``).

It takes MXNet's parameter names; the pipeline it builds is an ordinary
:class:`feedline.Dataset` (``it.dataset``)::

    records of this part (random access, file order)
      -> global_shuffle(seed)                    if shuffle
      -> round_up(batch_size)                     if round_batch (feedline.dataset.round_up)
      -> group(batch_size)                        random access: item k = records of batch k
                                                  (feedline.dataset.group)
      -> map(decode + augment a batch, num_workers=preprocess_threads, backend=backend)
      -> map(normalise the batch to float32)      process backend, float32 output
      -> prefetch(prefetch_buffer)

Every stage before the first map is random access, so the map's workers read the
records themselves (only batch numbers are handed to them) and decode and augment each
image straight into its row of the batch array: no per-image messages, no stacking.

``backend="thread"``: libjpeg-turbo and numpy release the GIL, so threads decode in
parallel (MXNet's ``preprocess_threads`` are threads too); they also
normalise each image, fused with HWC -> CHW, straight into the ``float32`` batch, which
the consumer receives without any copy. ``backend="process"``: worker processes send
``uint8`` batches back through shared memory (one copy per batch, a quarter of the bytes
of ``float32``), and the ``float32`` conversion and normalisation run once per batch,
vectorised, in the prefetch thread. On this project's 2-core machine the thread backend
was about 10% faster for ``float32`` output and up to 10% slower for ``uint8``, so
``backend="auto"`` (the default) picks threads for ``float32`` and processes for
``uint8``. Both give bit-identical batches. The arithmetic is the per-image
:class:`~feedline.image.augment.Normalize`'s, so the values are bit-identical.

Each option is one field of :class:`ImageRecordIterConfig`, whose ``Args:`` table gives
its exact semantics, valid values, default and error. Two rules span the options:

* **randomness**: every random choice for record ``i`` (its position in the whole
  dataset) in epoch ``e`` comes from ``SeedSequence([seed, e, i])``, whichever worker
  decodes it; the shuffle order of epoch ``e`` from ``(seed, e)``. Epoch ``e`` is the
  ``e``-th pass (``reset()`` or a new ``for`` loop after the end starts the next one).
* **resume**: ``it.get_state()`` / ``it.set_state(state)`` (or ``state=`` in the
  constructor) continue with exactly the batches the uninterrupted iterator would have
  produced next.

Deviations from MXNet, on purpose: ``verbose`` defaults to ``False`` and logs at INFO
(logger ``feedline.image.record_iter``) instead of printing; a computed
``mean_img`` covers all records of all parts (MXNet's covers its own part), so every
rank gets the same one; a
corrupt image raises :class:`~feedline.exceptions.DecodeError` naming the file and
record unless ``on_error="skip"``; every epoch starts at its first record (MXNet 1.9.1
with ``round_batch`` starts the epoch after a padded one behind the records it used as
padding, so that epoch is shorter), so all epochs have ``len(it)`` batches and resume
is exact.

>>> import os, tempfile, numpy as np
>>> from feedline.image.pack import pack_images
>>> import simplejpeg
>>> root = tempfile.mkdtemp()
>>> for c in range(2):
...     os.makedirs(os.path.join(root, "img", f"c{c}"))
...     for k in range(3):
...         img = np.full((40, 50, 3), 60 * c + 10 * k, np.uint8)
...         _ = open(os.path.join(root, "img", f"c{c}", f"{k}.jpg"), "wb").write(simplejpeg.encode_jpeg(img))
>>> packed = pack_images(os.path.join(root, "img"), os.path.join(root, "train"))
>>> it = ImageRecordIter(path_imgrec=packed.files[0], data_shape=(3, 32, 32), batch_size=4,
...                      preprocess_threads=0, rand_crop=True, rand_mirror=True)
>>> [(data.shape, label.tolist(), it.pad) for data, label in it]
[((4, 3, 32, 32), [0.0, 0.0, 0.0, 1.0], 0), ((4, 3, 32, 32), [1.0, 1.0, 0.0, 0.0], 2)]
>>> it.reset(); batches = []
>>> while it.iter_next():
...     batches.append((it.getlabel()[0].tolist(), it.getpad(), it.getindex().tolist()))
>>> batches
[([0.0, 0.0, 0.0, 1.0], 0, [0, 1, 2, 3]), ([1.0, 1.0, 0.0, 0.0], 2, [4, 5, 0, 1])]
>>> it.provide_data
[DataDesc(name='data', shape=(4, 3, 32, 32), dtype=dtype('float32'), layout='NCHW')]
"""

from __future__ import annotations

import dataclasses
import logging
import os
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from feedline._internal.array_pool import ArrayPool
from feedline._internal.closing import Closeable
from feedline._internal.state import state_bool, state_int
from feedline._internal.validate import non_negative_int, one_of, positive_int
from feedline.dataset.base import Dataset, RandomAccessDataset
from feedline.exceptions import DataError, DecodeError, InvalidStateError, StateError
from feedline.image.augment import (
    Cast,
    CenterCrop,
    ColorJitter,
    Compose,
    HorizontalFlip,
    Normalize,
    Pad,
    RandomCrop,
    RandomResizedCrop,
    Resize,
    ToCHW,
)
from feedline.io.records import IndexedRecordFiles
from feedline.mxnet import DataBatch, DataDesc, DataIter

__all__ = ["ImageRecordIter", "ImageRecordIterConfig", "part_range"]

logger = logging.getLogger(__name__)

_LOGGED_SKIPS = 10  # skipped records logged (and listed in stats()) per iterator

_INTERPOLATION = {0: "nearest", 1: "bilinear", 2: "bicubic", 3: "box", 4: "lanczos"}


def part_range(num_records: int, num_parts: int, part_index: int) -> tuple[int, int]:
    """Records ``[begin, end)`` of part ``part_index`` of ``num_parts`` (MXNet's indexed
    split: ``step = ceil(n / num_parts)``). Parts past the end are empty.

    Args:
        num_records: the number of records ``n`` being split.
        num_parts: how many parts, a positive int (not validated here).
        part_index: the part, ``0 .. num_parts - 1``.

    >>> [part_range(10, 4, r) for r in range(4)]
    [(0, 3), (3, 6), (6, 9), (9, 10)]
    >>> part_range(2, 4, 3)
    (2, 2)
    """
    step = -(-num_records // num_parts)
    begin = min(part_index * step, num_records)
    return begin, min(begin + step, num_records)


def _split_paths(value: Any, name: str) -> list[str]:
    if isinstance(value, (str, os.PathLike)):
        parts = [p for p in os.fspath(value).split(";") if p]
    elif isinstance(value, Sequence):
        parts = [os.fspath(p) for p in value]
    else:
        raise TypeError(f"`{name}` must be a path, a list of paths or 'a;b', got {value!r}")
    if not parts:
        raise ValueError(f"`{name}` names no file")
    return parts


class _Positioned(RandomAccessDataset):
    """Records ``[begin, end)`` of an :class:`~feedline.io.records.IndexedRecordFiles`;
    item ``e * n + j`` is ``(e, begin + j, record bytes)`` — the epoch and the global
    record position travel with the record (they seed its augmentation and name it in
    errors)."""

    def __init__(self, files: IndexedRecordFiles, begin: int, end: int) -> None:
        super().__init__()
        self._parents = (files,)
        self._files = files
        self._begin = begin
        self._n = end - begin

    @property
    def name(self) -> str:
        return f"image_records[{self._begin}:{self._begin + self._n}]"

    def __len__(self) -> int:
        return self._n

    def _getitem(self, index: int) -> tuple[int, int, bytes]:
        epoch, j = divmod(index, self._n)
        position = self._begin + j
        return epoch, position, self._files._getitem(position)


#: batch arrays a decoder keeps for reuse (at most what is ever in flight at once: the
#: decode threads' batches, the prefetched ones and the consumer's)
_POOL_KEEP = 32


class _BatchDecoder:
    """Turn a list of ``(epoch, position, record)`` into one ``(data, label, index,
    skipped)`` batch: each image decoded and augmented straight into its row of ``data``,
    ``index`` the record position each row came from.

    With ``on_error="skip"`` a record that cannot be split, decoded or augmented is
    replaced by the next record of the part in file order (wrapping; the replacement is
    augmented with its own position's seed), so every batch stays full and every rank
    keeps the same number of batches; ``skipped`` lists ``(path, record number, reason)``
    of what was replaced (the consumer counts, logs and caps them). ``max_skips`` bounds
    the replacements one row may need.

    Picklable: this object is what the map workers run. In a worker process (a pid other
    than the creator's) the result is always copied to the consumer, so the worker
    reuses one ``data`` buffer instead of touching fresh memory for every batch. In the
    creator's process (decode threads) each batch's ``data`` goes to the consumer as it
    is, and comes from an :class:`~feedline._internal.array_pool.ArrayPool`: a batch the
    consumer has dropped is filled again rather than a new one faulted in page by page.
    """

    def __init__(
        self,
        *,
        fmt: str,
        data_shape: tuple[int, int, int],
        label_width: int,
        dtype: str,
        augmenter: Compose,
        seed: int,
        files: IndexedRecordFiles,
        part: tuple[int, int] = (0, 0),
        labels: dict[int, np.ndarray] | None = None,
        on_error: str = "raise",
        max_skips: int | None = None,
        post: _NormalizeBatch | None = None,
        decode_plan: bool = True,
    ) -> None:
        self.format = fmt
        self.post = post
        self.decode_plan = decode_plan
        self.labels = labels
        self.data_shape = data_shape
        self.label_width = label_width
        self.dtype = dtype
        self.augmenter = augmenter
        self.seed = seed
        self.files = files
        self.part = part
        self.on_error = on_error
        self.max_skips = max_skips
        self.mode = "RGB" if data_shape[0] == 3 else "L"
        self._creator = os.getpid()
        self._buffer: np.ndarray | None = None
        self._pool: ArrayPool | None = ArrayPool(keep=_POOL_KEEP)

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_buffer"] = None
        state["_pool"] = None
        return state

    def _split(self, record: bytes, position: int) -> tuple[bytes, np.ndarray]:
        width = self.label_width
        if self.format == "recordio":
            from feedline.formats.recordio import unpack

            try:
                header, payload = unpack(record)
            except DecodeError as exc:  # the header errors name no file: add it
                path, index = self.files.locate(position)
                raise DecodeError(f"bad image record header: {exc}", path=path,
                                  index=index) from exc
            if self.labels is not None:
                labels = self.labels.get(header.id)
                if labels is None:
                    path, index = self.files.locate(position)
                    raise DecodeError(
                        f"the record's image index {header.id} is not in `path_imglist`",
                        path=path, index=index,
                    )
            elif header.flag > 0:
                labels = np.asarray(header.label, dtype=np.float32)
            else:
                labels = np.asarray([header.label], dtype=np.float32)
        else:
            payload, labels = _example_image(record, *self.files.locate(position))
        if labels.size != width:
            path, index = self.files.locate(position)
            raise DecodeError(
                f"the record has {labels.size} label(s) but `label_width` is {width}",
                path=path,
                index=index,
            )
        return payload, labels

    def _data(self, n: int) -> np.ndarray:
        shape = (n, *self.data_shape)
        if os.getpid() == self._creator:  # handed to the consumer as it is
            if self._pool is None:  # a copy unpickled in this process
                return np.empty(shape, dtype=self.dtype)
            return self._pool.take(shape, self.dtype)
        if self._buffer is None or self._buffer.shape != shape:
            self._buffer = np.empty(shape, dtype=self.dtype)
        return self._buffer

    def _one(self, epoch: int, position: int, record: bytes, out: np.ndarray) -> np.ndarray:
        payload, labels = self._split(record, position)
        path, index = self.files.locate(position)
        self.augmenter.decode(
            payload, mode=self.mode, plan=self.decode_plan, seed=self.seed, epoch=epoch,
            index=position, out=out, path=path, record=index,
        )
        return labels

    def __call__(self, records: list) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple]:
        n = len(records)
        index = np.empty(n, dtype=np.int64)
        data = self._data(n)
        if self.label_width == 1:
            label = np.empty(n, dtype=np.float32)
        else:
            label = np.empty((n, self.label_width), dtype=np.float32)
        skipped: list[tuple[str, int, str]] = []
        for i, (epoch, position, record) in enumerate(records):
            labels, index[i] = self._row(epoch, position, record, data[i], skipped)
            label[i] = labels if self.label_width > 1 else labels[0]
        if self.post is not None:
            return self.post((data, label, index, tuple(skipped)))
        return data, label, index, tuple(skipped)

    def _row(self, epoch: int, position: int, record: bytes, out: np.ndarray,
             skipped: list) -> tuple[np.ndarray, int]:
        if self.on_error == "raise":
            return self._one(epoch, position, record, out), position
        begin, end = self.part
        limit = end - begin if self.max_skips is None else min(end - begin, self.max_skips + 1)
        for _attempt in range(limit):
            try:
                return self._one(epoch, position, record, out), position
            except DecodeError as exc:
                skipped.append((*self.files.locate(position), exc.message))  # the place is in the tuple
                position = begin + (position - begin + 1) % (end - begin)
                record = self.files._getitem(position)
        raise DecodeError(
            f"{len(skipped)} record(s) in a row could not be decoded (the last: {skipped[-1][2]})"
            + ("" if self.max_skips is None else f"; `max_skips` is {self.max_skips}"),
            path=skipped[-1][0], index=skipped[-1][1],
        )


class _NormalizeBatch:
    """``(uint8 data, label, index, skipped)`` -> ``(normalised data, ...)`` for a
    whole batch: float32, or for ``int8`` the difference rounded (ties to even) and
    saturated to ``[-128, 127]``."""

    def __init__(self, normalize: Normalize, dtype: str = "float32") -> None:
        self.normalize = normalize
        self.dtype = dtype

    def __call__(self, batch: tuple) -> tuple:
        data, label, index, skipped = batch
        out = self.normalize.batch_chw(data)
        if self.dtype == "int8":
            out = np.clip(np.rint(out, out=out), -128, 127, out=out).astype(np.int8)
        return out, label, index, skipped



def _example_image(record: bytes, name: str, position: int) -> tuple[bytes, np.ndarray]:
    from feedline.formats.example import decode_example

    features = decode_example(record)
    try:
        encoded = features["image/encoded"]
        label = features["image/class/label"]
    except KeyError as exc:
        raise DecodeError(
            f"tf.train.Example lacks feature {exc.args[0]!r}", path=name, index=position
        ) from None
    if not isinstance(encoded, (bytes, bytearray, memoryview)):
        encoded = list(encoded)[0]
    return bytes(encoded), np.asarray(label, dtype=np.float32).reshape(-1)


def _check_shape(data_shape: Any) -> tuple[int, int, int]:
    if not isinstance(data_shape, (tuple, list)) or len(data_shape) != 3:
        raise ValueError(f"`data_shape` must be (channels, height, width), got {data_shape!r}")
    c, h, w = (positive_int(f"data_shape[{i}]", v) for i, v in enumerate(data_shape))
    if c not in (1, 3):
        raise ValueError(f"`data_shape[0]` (channels) must be 1 or 3, got {c}")
    return c, h, w


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"`{name}` must be a number, got {value!r}")
    return float(value)


@dataclasses.dataclass
class ImageRecordIterConfig:
    """Every option of :class:`ImageRecordIter`, by MXNet's names, with its default.

    :meth:`validate` checks the options that need no file and resolves the ``"auto"``
    choices; the rest (paths, augmentation numbers, ``mean_img``) are checked when
    :class:`ImageRecordIter` is built. Either way the message names the option.

    The default per-image chain runs, in this order: ``resize``, ``pad``, one crop to
    ``(H, W)`` (``random_resized_crop``, else ``rand_crop``, else the centre), the
    ``brightness``/``contrast``/``saturation`` jitter, the mirror (``rand_mirror``, else
    ``mirror``), then the normalisation ``dtype`` calls for: ``(x - mean) / std * scale``
    per channel, or ``(x - mean_img) * scale``. An image smaller than ``(H, W)`` after
    ``resize`` and ``pad`` raises :class:`~feedline.exceptions.DecodeError` (an
    undecodable image, as far as ``on_error`` goes).

    The fields stay flat on purpose, unlike the option groups elsewhere in feedline
    (:class:`~feedline.ErrorOptions`, :class:`~feedline.image.EncodeOptions`): this is
    the MXNet face, whose users pass ``mx.io.ImageRecordIter``'s keywords unchanged, so
    each field is exactly one of MXNet's keywords (``ImageRecordIter(**kwargs)`` fills it
    one to one), and the checks span what groups would split
    (``rand_crop`` with the random-area bounds, ``mean_r`` with ``mean_img``,
    ``on_error`` with ``max_skips``). Groups would only add a second spelling of the
    same options.

    Args:
        path_imgrec: the record files, read as one sequence of records in this order: one
            path, a list of paths, or MXNet's ``"a.rec;b.rec"``. RecordIO ``.rec`` (from
            ``feedline pack`` or MXNet's ``im2rec``) or TFRecord shards of
            ``tf.train.Example`` with ``image/encoded`` and ``image/class/label`` (see
            ``format``). Another type raises ``TypeError``, no path ``ValueError``, a
            missing file ``FileNotFoundError``.
        data_shape: ``(C, H, W)`` of every image, positive ints with ``C`` 3 (RGB) or 1
            (grayscale), else ``ValueError``; ``data`` is ``(batch_size, C, H, W)``.
        batch_size: images per batch, a positive int (else ``ValueError``).
        path_imgidx: the index sidecars, one per record file, in the forms
            ``path_imgrec`` takes (another count raises ``ValueError``). ``None`` (the
            default) or ``""``: ``x.rec`` uses ``x.idx``, and when that does not exist
            the ``.rec`` is scanned once at start (nothing written); a TFRecord file uses
            the ``<path>.index`` of :func:`feedline.tfrecord.build_index`, else it is
            scanned once.
        path_imglist: an MXNet ``.lst`` file to take the labels from instead of the
            record headers, looked up by each record's image index (its header id);
            RecordIO only (else ``ValueError``). An entry with other than
            ``label_width`` labels, or an index listed twice, raises
            :class:`~feedline.exceptions.DataError`; a record whose index the list lacks
            raises :class:`~feedline.exceptions.DecodeError`. ``None`` (the default) or
            ``""``: the labels in the headers.
        label_width: labels per record, a positive int (else ``ValueError``); ``label``
            is ``(batch_size,)`` for 1 (the default), ``(batch_size, label_width)``
            above. A record with another number of labels raises
            :class:`~feedline.exceptions.DecodeError`, as in MXNet.
        round_batch: ``True`` (MXNet's default) completes the last batch of an epoch
            with the first records of that epoch, and that batch's ``pad``
            (``batch.pad``, ``it.pad``, ``it.getpad()``) is the number of such repeats;
            every other batch has ``pad == 0``. ``False``: the last batch is smaller,
            with ``pad == 0`` (MXNet 1.9.1 returns a full-size array there whose
            trailing rows are left over from the previous batch).
        resize: resize each image first so that its shorter side is this many pixels
            (aspect ratio kept), a positive int (else ``ValueError``); ``-1`` (MXNet's
            default) or ``None``: no resize.
        rand_crop: crop ``(H, W)`` at a uniformly random position (unless
            ``random_resized_crop``); ``False`` (the default): the centre.
        random_resized_crop: crop a box of random area (``min_random_area`` ..
            ``max_random_area``) and aspect ratio (``min_aspect_ratio`` ..
            ``max_aspect_ratio``) at a random place and resize it to ``(H, W)``, as
            :class:`~feedline.image.augment.RandomResizedCrop` does; takes precedence
            over ``rand_crop``.
        min_random_area: the smallest fraction of the image area the
            ``random_resized_crop`` box covers (used only with it); a number with ``0 <
            min_random_area <= max_random_area <= 1``, else ``TypeError``/``ValueError``.
        max_random_area: the largest such fraction; 1.0 (the default) allows the whole
            image.
        min_aspect_ratio: the smallest width / height ratio of the
            ``random_resized_crop`` box, drawn log-uniformly; ``None`` (the default):
            ``1 / max_aspect_ratio``, or 3/4 when both are ``None``. The range must have
            ``0 < low <= high``, else ``ValueError``.
        max_aspect_ratio: the largest such ratio; ``None`` (the default):
            ``1 / min_aspect_ratio``, or 4/3 when both are ``None``.
        rand_mirror: flip each image horizontally with probability 0.5; takes
            precedence over ``mirror``.
        mirror: flip every image horizontally (unless ``rand_mirror``).
        brightness: jitter strength ``v``: each image is multiplied by a factor drawn
            uniformly from ``[max(0, 1 - v), 1 + v]``; a number (else ``TypeError``), 0
            (the default) turns it off. The three jitters run in a random order, as in
            :class:`~feedline.image.augment.ColorJitter`.
        contrast: strength of the contrast jitter (a blend with the image's mean luma);
            0 (the default) turns it off.
        saturation: strength of the saturation jitter (a blend with each pixel's luma;
            none on grayscale); 0 (the default) turns it off.
        pad: pixels added on every side after ``resize``, before the crop; a
            non-negative int (else ``ValueError``), 0 (the default): none.
        fill_value: the value of the padded pixels, every channel (clipped to
            ``[0, 255]``); 255 by default.
        inter_method: the interpolation of ``resize`` and ``random_resized_crop``:
            MXNet's 0 nearest, 1 bilinear (the default), 2 bicubic, 3 area (Pillow's
            ``box``), 4 lanczos; another value raises ``ValueError``.
        mean_r: subtracted from the red channel (the only one when ``C`` is 1) for
            ``float32`` and ``int8`` output; a number (else ``TypeError``), 0 by default.
        mean_g: the same for the green channel.
        mean_b: the same for the blue channel.
        std_r: divides the red channel after the mean, ``float32`` output only; 1 by
            default.
        std_g: the same for the green channel.
        std_b: the same for the blue channel.
        scale: multiplies the normalised ``float32`` value last; a positive number
            (else ``ValueError``/``TypeError``), 1 by default.
        mean_img: a mean image of shape ``data_shape`` (else ``ValueError``) subtracted
            instead of ``mean_r/g/b`` (``std_*`` are then unused): an array, a ``.npy``
            file, or an MXNet NDArray file (``mx.nd.save``'s format: the array named
            ``mean_img`` or its only array, else ``ValueError``). A path that does not exist is computed,
            as MXNet does, over every record of every part through the augmenters
            ``mean_img_crops`` names, and saved there in MXNet's format. ``None`` (the
            default) or ``""``: the per-channel means.
        mean_img_crops: what a computed ``mean_img`` goes through: ``"augmented"`` (the
            default, as MXNet): every configured augmenter, random crops, mirrors and
            jitter included, drawn as in epoch 0 for ``seed``; ``"center"``: the
            deterministic steps only (resize, pad, centre crop). Else ``ValueError``.
        augmenter: any :class:`~feedline.image.augment.Compose` (else ``TypeError``)
            whose output has shape ``data_shape``; it replaces the whole default chain
            and the normalisation, so ``resize`` .. ``mean_img`` are unused. ``None``
            (the default): the chain built from those options.
        preprocess_threads: workers that decode and augment batches, a non-negative int
            (else ``ValueError``); 0: in the consuming thread. 4 by default.
        backend: what the workers are: ``"thread"``, ``"process"``, ``"ray"`` (Ray
            tasks on the cluster that ``ray.init()``/``RAY_ADDRESS`` names, the same
            batches bit for bit; a feedline addition), or ``"auto"`` (the default):
            threads for ``float32`` output, processes otherwise (the faster, as the
            module docstring measures). Another value raises ``ValueError``.
        prefetch_buffer: batches prepared ahead of the consumer, a positive int (else
            ``ValueError``).
        shuffle: shuffle this part's records anew every epoch (epoch ``e``'s order from
            ``(seed, e)``); ``False`` (the default): file order.
        seed: seeds the shuffle and every random augmentation (see the module
            docstring); a non-negative int (else ``ValueError``).
        num_parts: how many disjoint parts the records are split into by count, as
            MXNet's indexed InputSplit does: with ``step = ceil(n / num_parts)``, part
            ``r`` reads records ``[r * step, min((r + 1) * step, n))`` in file order
            (trailing parts may be empty; see :func:`part_range`). A positive int, else
            ``ValueError``.
        part_index: the part this iterator reads, in ``[0, num_parts)`` (else
            ``ValueError``).
        dtype: ``"float32"`` (the default, normalised); ``"uint8"``, not normalised:
            ``mean_*``, ``std_*``, ``scale`` and ``mean_img`` are ignored as in MXNet,
            with a ``RuntimeWarning`` when any is set; or ``"int8"`` (MXNet's): the pixel
            minus the mean (``mean_r/g/b`` or ``mean_img``) rounded to nearest, ties to
            even, and saturated to ``[-128, 127]``, without ``std_*`` and ``scale``.
            Another value raises ``ValueError``.
        format: ``"recordio"`` or ``"tfrecord"`` for every file (else ``ValueError``);
            ``None`` (the default): ``"tfrecord"`` when every path ends in
            ``.tfrecord``, else ``"recordio"``.
        output: what the batches hold: ``"numpy"`` arrays, ``"torch"`` tensors, or
            ``"mxnet"`` ``mx.nd.NDArray`` (needs MXNet importable, else
            ``ImportError``), so ``mx.mod.Module.fit`` and Gluon loops run unchanged.
            ``None`` (the default): ``"torch"`` when ``ctx`` names a GPU torch sees,
            else ``"numpy"``. Another value raises ``ValueError``.
        ctx: MXNet's device: ``"cpu"``, ``"gpu"``, ``"gpu(N)"`` (or ``"cuda:N"``, a
            ``torch.device``). A GPU gives torch tensors on it (then ``output="numpy"``
            raises ``ValueError``); with no CUDA device it is a hint, as in MXNet:
            a ``RuntimeWarning``, and the batches stay on the CPU. ``None`` (the
            default) and ``"cpu"`` change nothing; ``output="mxnet"`` makes its arrays
            on the CPU context.
        data_name: the name of the data in ``provide_data``; ``"data"`` by default.
        label_name: the name of the label in ``provide_label``; ``"softmax_label"`` by
            default.
        on_error: ``"raise"`` (the default): an image that cannot be decoded or
            augmented (or whose record header or labels do not fit) raises
            :class:`~feedline.exceptions.DecodeError` naming file and record. ``"skip"`` (MXNet's behaviour): the image is replaced by the next
            record of the part in file order, so batches stay full and every rank keeps
            the same batch count; the first 10 skips are logged (``logging``, file and
            record), all are counted in ``it.skipped`` / ``it.stats()``. Another value
            raises ``ValueError``.
        max_skips: with ``on_error="skip"``, raise ``DecodeError`` once more than this
            many images were skipped; a non-negative int, and only with
            ``on_error="skip"`` (else ``ValueError``). ``None`` (the default): no limit.
        decode_plan: ``True`` (the default, a feedline addition): the chain plans the
            decode (:meth:`~feedline.image.augment.Compose.decode`): a
            ``random_resized_crop`` box at least twice ``(H, W)`` is decoded at 1/2, 1/4
            or 1/8 DCT scale, within the tolerance documented there. ``False``: every
            image is decoded in full first.
        verbose: log the configuration (files, part, records, batches, workers,
            augmenters) at INFO on the logger ``feedline.image.record_iter`` rather than
            at DEBUG; MXNet prints it. ``False`` by default.
        state: a :meth:`ImageRecordIter.get_state` dict to resume from (the constructor
            ends with ``set_state(state)``); ``None`` (the default): start at the first
            batch.

    >>> cfg = ImageRecordIterConfig(path_imgrec="a.rec", data_shape=(3, 8, 8), batch_size=2)
    >>> cfg.validate().backend, cfg.round_batch
    ('thread', True)
    >>> ImageRecordIterConfig(path_imgrec="a.rec", data_shape=(3, 8, 8), batch_size=0).validate()
    Traceback (most recent call last):
    ...
    ValueError: `batch_size` must be a positive int, got 0
    """

    path_imgrec: Any
    data_shape: Sequence[int]
    batch_size: int
    path_imgidx: Any = None
    path_imglist: Any = None
    label_width: int = 1
    round_batch: bool = True
    resize: int | None = -1
    rand_crop: bool = False
    random_resized_crop: bool = False
    min_random_area: float = 1.0
    max_random_area: float = 1.0
    min_aspect_ratio: float | None = None
    max_aspect_ratio: float | None = None
    rand_mirror: bool = False
    mirror: bool = False
    brightness: float = 0.0
    contrast: float = 0.0
    saturation: float = 0.0
    pad: int = 0
    fill_value: int = 255
    inter_method: int = 1
    mean_r: float = 0.0
    mean_g: float = 0.0
    mean_b: float = 0.0
    std_r: float = 1.0
    std_g: float = 1.0
    std_b: float = 1.0
    scale: float = 1.0
    mean_img: Any = None
    mean_img_crops: str = "augmented"
    augmenter: Compose | None = None
    preprocess_threads: int = 4
    backend: str = "auto"
    prefetch_buffer: int = 4
    shuffle: bool = False
    seed: int = 0
    num_parts: int = 1
    part_index: int = 0
    dtype: str = "float32"
    format: str | None = None
    output: str | None = None
    ctx: Any = None
    data_name: str = "data"
    label_name: str = "softmax_label"
    on_error: str = "raise"
    max_skips: int | None = None
    decode_plan: bool = True
    verbose: bool = False
    state: dict | None = None

    def validate(self) -> ImageRecordIterConfig:
        """Check every option and normalise them in place; returns ``self``."""
        self.data_shape = _check_shape(self.data_shape)
        positive_int("batch_size", self.batch_size)
        positive_int("label_width", self.label_width)
        positive_int("num_parts", self.num_parts)
        non_negative_int("part_index", self.part_index)
        if self.part_index >= self.num_parts:
            raise ValueError(f"`part_index` must be in [0, num_parts) = [0, {self.num_parts}), "
                             f"got {self.part_index}")
        one_of("dtype", self.dtype, ("float32", "uint8", "int8"))
        non_negative_int("seed", self.seed)
        non_negative_int("preprocess_threads", self.preprocess_threads)
        one_of("backend", self.backend, ("auto", "thread", "process", "ray"))
        if self.backend == "auto":  # what measured faster: see the module docstring
            self.backend = "thread" if self.dtype == "float32" else "process"
        positive_int("prefetch_buffer", self.prefetch_buffer)
        one_of("on_error", self.on_error, ("raise", "skip"))
        if self.max_skips is not None:
            non_negative_int("max_skips", self.max_skips)
            if self.on_error != "skip":
                raise ValueError("`max_skips` needs `on_error='skip'`")
        one_of("mean_img_crops", self.mean_img_crops, ("augmented", "center"))
        device = None
        if self.ctx is not None and self.output == "mxnet":
            from feedline.mxnet import parse_ctx

            parse_ctx(self.ctx)  # MXNet arrays are made on the CPU context; ctx is a hint
        elif self.ctx is not None:
            from feedline.mxnet import torch_device

            device = torch_device(self.ctx)
            if device.type != "cpu":
                import torch

                if not torch.cuda.is_available():  # MXNet's ctx is a hint: run on the CPU
                    warnings.warn(f"`ctx={self.ctx!r}` names a GPU but torch sees no CUDA "
                                  "device: the batches stay on the CPU", RuntimeWarning,
                                  stacklevel=4)
                    device = None
        if self.output is None:
            self.output = "torch" if device is not None and device.type != "cpu" else "numpy"
        one_of("output", self.output, ("numpy", "torch", "mxnet"))
        if self.output == "mxnet":
            try:
                import mxnet  # noqa: F401 - checked now, used per batch
            except ImportError as exc:
                raise ImportError("`output='mxnet'` yields mx.nd.NDArray batches and needs "
                                  "MXNet in this environment: pip install mxnet") from exc
            device = None  # MXNet arrays are made on the CPU context
        if device is not None and device.type != "cpu" and self.output != "torch":
            raise ValueError(f"`ctx={self.ctx!r}` gives torch tensors on that device: "
                             "leave `output` out or set output='torch'")
        self.device = device
        self.round_batch = bool(self.round_batch)
        self.shuffle = bool(self.shuffle)
        return self


class ImageRecordIter(DataIter, Closeable):
    """Batches of decoded, augmented images from packed records; see the module docstring.

    Its ``**options`` are the fields of :class:`ImageRecordIterConfig` (MXNet's
    ``mx.io.ImageRecordIter`` keywords), keyword-only; that class's table documents each
    one. ``it.config`` is the validated configuration; ``it.augmenter`` the per-image
    :class:`~feedline.image.augment.Compose` the workers run; ``it.normalize`` the
    :class:`~feedline.image.augment.Normalize` applied to whole batches afterwards
    (``None`` for uint8 output or a custom ``augmenter``).

    Each batch is a :class:`feedline.mxnet.DataBatch`: ``batch.data[0]``,
    ``batch.label[0]``, ``batch.pad``, ``batch.index`` (the global record positions of
    its rows, ``int64``; MXNet 1.9.1's ImageRecordIter leaves it all zeros), and
    ``data, label = batch`` as before. Iterate it once per epoch; a new
    ``for`` loop after the end (or ``reset()``) starts the next epoch. ``it.pad`` is the
    pad of the batch last returned. ``num_records`` is the size of this part; ``len(it)``
    the number of batches per epoch. Close it (or use ``with``) to stop the workers.

    Args:
        **options: the fields of :class:`ImageRecordIterConfig`, by name:
            ``path_imgrec``, ``data_shape`` and ``batch_size`` are required, the others
            default as listed there. A missing or unknown keyword raises ``TypeError``;
            a bad value raises what its row in :class:`ImageRecordIterConfig` says.

    >>> import os, tempfile
    >>> from PIL import Image
    >>> from feedline.image.pack import pack_images
    >>> root = tempfile.mkdtemp()
    >>> for k, cls in enumerate(("cat", "dog")):
    ...     os.makedirs(os.path.join(root, "photos", cls))
    ...     for j in range(2):
    ...         Image.new("RGB", (8, 8), (50 * k + j,) * 3).save(os.path.join(root, "photos", cls, f"{j}.png"))
    >>> from feedline.image import EncodeOptions
    >>> packed = pack_images(os.path.join(root, "photos"), os.path.join(root, "train"),
    ...                      encode=EncodeOptions(encoding=".png"))
    >>> with ImageRecordIter(path_imgrec=packed.files[0], data_shape=(3, 8, 8), batch_size=3) as it:
    ...     print(it.num_records, len(it))
    ...     for batch in it:
    ...         print(batch.data[0].shape, batch.data[0].dtype, batch.label[0].tolist(), batch.pad, batch.index.tolist())
    4 2
    (3, 3, 8, 8) float32 [0.0, 0.0, 1.0] 0 [0, 1, 2]
    (3, 3, 8, 8) float32 [1.0, 0.0, 0.0] 2 [3, 0, 1]
    """

    batch_size: int  # always set (DataIter's is optional)

    def __init__(self, **options: Any) -> None:
        try:
            cfg = ImageRecordIterConfig(**options)
        except TypeError as exc:
            raise TypeError(f"ImageRecordIter: {exc}".replace("ImageRecordIterConfig.__init__() ", "")) from None
        cfg.validate()
        self.config = cfg
        super().__init__((), batch_size=cfg.batch_size, data_names=(cfg.data_name,),
                         label_names=(cfg.label_name,))
        self.data_shape = _check_shape(cfg.data_shape)
        self.batch_size, self.label_width = cfg.batch_size, cfg.label_width
        self.num_parts, self.part_index, self.dtype = cfg.num_parts, cfg.part_index, cfg.dtype
        self.output, self.seed, self.backend = cfg.output, cfg.seed, cfg.backend
        self.round_batch, self.shuffle, self.device = cfg.round_batch, cfg.shuffle, cfg.device
        self._verbose, self._preprocess_threads = bool(cfg.verbose), cfg.preprocess_threads
        self._files = self._open_files(cfg)
        self.format = self._files_format
        self._labels = self._label_map(cfg.path_imglist)
        self.augmenter, self.normalize = self._augmenters(cfg)
        self.dataset: Dataset = self._pipeline(cfg)
        self.pad = 0
        self._done = False
        self._served = 0
        self.skipped = 0
        self._skipped_records: list[tuple[str, int]] = []
        logger.log(logging.INFO if cfg.verbose else logging.DEBUG,
                   "ImageRecordIter: %s (%s), part %d of %d: %d records, %d batches of %d; "
                   "%d preprocess worker(s); augmenter %r, then %r", ";".join(self._files.paths),
                   self.format, self.part_index, self.num_parts, self.num_records,
                   self._batches_per_epoch, self.batch_size, cfg.preprocess_threads,
                   self.augmenter, self.normalize)
        if cfg.state is not None:
            self.set_state(cfg.state)

    # ------------------------------------------------------------------ configuration
    def _open_files(self, cfg: ImageRecordIterConfig) -> IndexedRecordFiles:
        """The record files as one indexed source (``.idx`` / ``.index`` sidecars, or one
        scan of a ``.rec`` that has none)."""
        paths = _split_paths(cfg.path_imgrec, "path_imgrec")
        if cfg.path_imgidx is None or cfg.path_imgidx == "":
            idx_paths: list[str | None] = [None] * len(paths)
        else:
            idx_paths = list(_split_paths(cfg.path_imgidx, "path_imgidx"))
            if len(idx_paths) != len(paths):
                raise ValueError(
                    f"`path_imgidx` names {len(idx_paths)} file(s) for {len(paths)} record file(s)"
                )
        fmt = cfg.format
        if fmt is None:
            fmt = "tfrecord" if all(p.endswith(".tfrecord") for p in paths) else "recordio"
        self._files_format = one_of("format", fmt, ("recordio", "tfrecord"))
        for path in paths:
            if not os.path.isfile(path):
                raise FileNotFoundError(f"`path_imgrec` file {path!r} does not exist")
        return IndexedRecordFiles(paths, [fmt] * len(paths), index_paths=idx_paths, scan=True)

    def _augmenters(self, cfg: ImageRecordIterConfig) -> tuple[Compose, Normalize | None]:
        if cfg.augmenter is None:
            return self._default_augmenter(cfg)
        if not isinstance(cfg.augmenter, Compose):
            raise TypeError(f"`augmenter` must be a feedline.image.Compose, got {cfg.augmenter!r}")
        return cfg.augmenter, None

    def _pipeline(self, cfg: ImageRecordIterConfig) -> Dataset:
        """records of this part -> global_shuffle -> round_up -> group -> map(decode) ->
        map(normalise) -> prefetch."""
        begin, end = part_range(len(self._files), self.num_parts, self.part_index)
        self.num_records = end - begin
        source: RandomAccessDataset = _Positioned(self._files, begin, end)
        if self.shuffle and self.num_records:
            source = source.global_shuffle(seed=self.seed)
        batches = -(-self.num_records // self.batch_size)
        if self.round_batch and self.num_records:
            source = source.round_up(self.batch_size)
        self._last_pad = batches * self.batch_size - self.num_records if self.round_batch else 0
        self._batches_per_epoch = batches
        # threads share memory: normalise inside the decode threads, fused with HWC -> CHW,
        # straight into the float32 batch; processes ship uint8 batches (a quarter of the
        # bytes) and normalise once per batch in the prefetch thread; int8 (as small as
        # uint8) is made in the workers
        int8 = self.normalize is not None and self.dtype == "int8"
        fused = (self.normalize is not None and self.dtype == "float32"
                 and self.backend == "thread" and cfg.preprocess_threads)
        augment = self.augmenter
        if fused and self.normalize is not None:
            steps = [a for a in self.augmenter.augmenters if not isinstance(a, (ToCHW, Cast))]
            augment = Compose([*steps, self.normalize, ToCHW()])
        decoder = _BatchDecoder(
            fmt=self.format, data_shape=self.data_shape, label_width=self.label_width,
            dtype="uint8" if self.normalize is not None and not fused else self.dtype,
            augmenter=augment, seed=self.seed, files=self._files, part=(begin, end),
            labels=self._labels, on_error=cfg.on_error, max_skips=cfg.max_skips,
            post=_NormalizeBatch(self.normalize, "int8") if int8 and self.normalize else None,
            decode_plan=cfg.decode_plan,
        )
        self._max_skips = cfg.max_skips
        self._decoder = decoder
        self._map = source.group(self.batch_size).map(
            decoder, num_workers=cfg.preprocess_threads, name="decode_augment", backend=self.backend)
        pipeline: Dataset = self._map
        if self.normalize is not None and not (fused or int8):
            pipeline = pipeline.map(_NormalizeBatch(self.normalize, self.dtype), name="normalize")
        return pipeline.prefetch(cfg.prefetch_buffer)

    def _default_augmenter(self, cfg: ImageRecordIterConfig) -> tuple[Compose, Normalize | None]:
        """The per-image chain (ending in uint8 CHW) and, for float32 and int8 output, the
        normalisation applied to whole batches (int8: the mean only, as MXNet)."""
        kw = dict(vars(cfg))
        kw["mean"], kw["std"] = (cfg.mean_r, cfg.mean_g, cfg.mean_b), (cfg.std_r, cfg.std_g, cfg.std_b)
        c, h, w = self.data_shape
        interp = kw["inter_method"]
        if interp not in _INTERPOLATION:
            raise ValueError(
                f"`inter_method` must be one of {sorted(_INTERPOLATION)}, got {interp!r}"
            )
        interpolation = _INTERPOLATION[interp]
        augs: list = []
        resize = kw["resize"]
        if resize is not None and resize != -1:
            augs.append(Resize(positive_int("resize", resize), interpolation=interpolation))
        pad = non_negative_int("pad", kw["pad"])
        if pad:
            augs.append(Pad(pad, fill=kw["fill_value"]))
        if kw["random_resized_crop"]:
            low, high = _number("min_random_area", kw["min_random_area"]), _number(
                "max_random_area", kw["max_random_area"]
            )
            max_ar = kw["max_aspect_ratio"]
            min_ar = kw["min_aspect_ratio"]
            if max_ar is None:
                ratio = (3 / 4, 4 / 3) if min_ar is None else (min_ar, 1 / min_ar)
            else:
                ratio = (1 / max_ar if min_ar is None else min_ar, max_ar)
            augs.append(
                RandomResizedCrop((h, w), scale=(low, high), ratio=ratio, interpolation=interpolation)
            )
        elif kw["rand_crop"]:
            augs.append(RandomCrop((h, w)))
        else:
            augs.append(CenterCrop((h, w)))
        # what the mean image is computed through: everything but the random steps
        fixed = [a for a in augs if not isinstance(a, (RandomResizedCrop, RandomCrop))]
        if len(fixed) < len(augs):
            fixed.append(CenterCrop((h, w)))
        jitter = [_number(k, kw[k]) for k in ("brightness", "contrast", "saturation")]
        if any(jitter):
            augs.append(ColorJitter(*jitter))
        if kw["rand_mirror"]:
            augs.append(HorizontalFlip(0.5))
        elif kw["mirror"]:
            augs.append(HorizontalFlip(1.0))
        scale = _number("scale", kw["scale"])
        if scale <= 0:
            raise ValueError(f"`scale` must be a positive number, got {scale!r}")
        mean_img = kw["mean_img"]
        if isinstance(mean_img, str) and not mean_img:
            mean_img = None  # MXNet's "" means none
        mean = [_number(n, v) for n, v in zip(("mean_r", "mean_g", "mean_b"), kw["mean"])][:c]
        std = [_number(n, v) for n, v in zip(("std_r", "std_g", "std_b"), kw["std"])][:c]
        if self.dtype == "uint8":
            custom = any(mean) or any(s != 1.0 for s in std) or scale != 1.0
            if custom or mean_img is not None:  # MXNet ignores them for uint8 output
                warnings.warn("`dtype='uint8'` output is not normalised: mean_*, std_*, scale "
                              "and mean_img are ignored", RuntimeWarning, stacklevel=5)
            return Compose([*augs, ToCHW(), Cast("uint8")]), None
        if mean_img is not None:
            if isinstance(mean_img, (str, os.PathLike)):
                through = augs if cfg.mean_img_crops == "augmented" else fixed
                image = self._mean_image(os.fspath(mean_img), through)
            else:
                image = np.asarray(mean_img, dtype=np.float32)
            if image.shape != (c, h, w):
                raise ValueError(
                    f"`mean_img` must have shape data_shape {(c, h, w)}, got {image.shape}"
                )
            normalize = Normalize(mean=image.transpose(1, 2, 0),
                                  std=1.0 if self.dtype == "int8" else 1.0 / scale)
        elif self.dtype == "int8":  # MXNet's int8 subtracts the mean; std and scale unused
            normalize = Normalize(mean=mean, std=[1.0] * len(mean))
        else:
            normalize = Normalize(mean=mean, std=[s / scale for s in std])
        return Compose([*augs, ToCHW(), Cast("uint8")]), normalize

    def _label_map(self, path_imglist: Any) -> dict[int, np.ndarray] | None:
        """``{image index: labels}`` from an MXNet ``.lst`` file, or ``None``."""
        if path_imglist is None or path_imglist == "":
            return None
        if self.format != "recordio":
            raise ValueError("`path_imglist` needs RecordIO records (their header id is the "
                             "image index); TFRecord images carry their labels")
        from feedline.image.listfile import read_list

        path = os.fspath(path_imglist)
        labels: dict[int, np.ndarray] = {}
        for item in read_list(path):
            if len(item.labels) != self.label_width:
                raise DataError(f"image index {item.index} has {len(item.labels)} label(s) where "
                                f"`label_width` is {self.label_width}", path=path)
            if item.index in labels:
                raise DataError(f"image index {item.index} appears twice", path=path)
            labels[item.index] = np.asarray(item.labels, dtype=np.float32)
        return labels

    def _mean_image(self, path: str, through: list) -> np.ndarray:
        """Load the mean image at ``path`` (``.npy``, or an MXNet NDArray file holding
        ``mean_img`` or a single array), or compute it over every record and save it
        there (as MXNet does) when the file does not exist."""
        from feedline.formats import ndarray_file

        if not os.path.exists(path):
            image = self._compute_mean_image(through)
            ndarray_file.save(path, {"mean_img": image})
            logger.info("ImageRecordIter: saved the mean of %d images to %s", len(self._files), path)
            return image
        if path.endswith(".npy"):
            return np.load(path).astype(np.float32, copy=False)
        loaded = ndarray_file.load(path)
        found: np.ndarray | None
        if isinstance(loaded, dict):
            found = loaded.get("mean_img", None if len(loaded) != 1 else next(iter(loaded.values())))
        else:
            found = loaded[0] if len(loaded) == 1 else None
        if found is None:
            raise ValueError(f"`mean_img` file {path!r} holds no 'mean_img' array")
        return found.astype(np.float32, copy=False)

    def _compute_mean_image(self, through: list) -> np.ndarray:
        """Mean over all records (every part) of the images after the augmenters
        ``through`` (drawn as in epoch 0 for ``seed``): float32 ``data_shape``."""
        files = self._files
        if not len(files):
            raise ValueError("cannot compute `mean_img` over record files with no records")
        decoder = _BatchDecoder(
            fmt=self.format, data_shape=self.data_shape, label_width=self.label_width,
            dtype="uint8", augmenter=Compose([*through, ToCHW(), Cast("uint8")]), seed=self.seed,
            files=files, part=(0, len(files)), labels=self._labels,
        )
        groups = _Positioned(files, 0, len(files)).group(64)
        total = np.zeros(self.data_shape, dtype=np.float64)
        with groups.map(decoder, num_workers=self._preprocess_threads, backend="thread",
                        name="mean_img").iterator() as it:
            for data, *_rest in it:
                total += data.sum(axis=0, dtype=np.float64)
        return (total / len(files)).astype(np.float32)

    # ------------------------------------------------------------------ iterating
    # ------------------------------------------------------------------ iterating
    def __len__(self) -> int:
        return self._batches_per_epoch

    def __iter__(self) -> ImageRecordIter:
        if self._done:
            self.reset()
        return self

    def _fetch(self) -> DataBatch:
        if self._it is None:
            self._it = self.dataset.iterator()
            self._done = False
            self._served = 0
        try:
            data, label, index, skipped = next(self._it)
        except StopIteration:
            self._done = True
            raise
        if skipped:
            self._count_skips(skipped)
        self._served += 1
        last = self._served == self._batches_per_epoch
        pad = self._last_pad if last else 0
        if self.output == "mxnet":
            import mxnet as mx

            data, label = mx.nd.array(data, dtype=data.dtype), mx.nd.array(label, dtype=label.dtype)
        elif self.output == "torch":
            import torch

            data, label = torch.from_numpy(data), torch.from_numpy(label)
            if self.device is not None and self.device.type != "cpu":
                data = data.to(self.device, non_blocking=True)
                label = label.to(self.device, non_blocking=True)
        provide_data, provide_label = self.provide_data, self.provide_label
        if len(label) != self.batch_size:  # the short last batch of round_batch=False
            provide_data = [provide_data[0]._replace(shape=tuple(data.shape))]
            provide_label = [provide_label[0]._replace(shape=tuple(label.shape))]
        return DataBatch([data], [label], pad=pad, index=index, provide_data=provide_data,
                         provide_label=provide_label)

    def next(self) -> DataBatch:
        """The next :class:`~feedline.mxnet.DataBatch` (``StopIteration`` at the end of
        the epoch); sets ``it.pad``."""
        batch = super().next()
        self.pad = batch.pad
        return batch

    __next__ = next

    def _count_skips(self, skipped: tuple) -> None:
        for path, index, reason in skipped:
            self.skipped += 1
            if len(self._skipped_records) < _LOGGED_SKIPS:
                self._skipped_records.append((path, index))
                logger.warning("ImageRecordIter: skipped %s: record %d: %s", path, index, reason)
            if self._max_skips is not None and self.skipped > self._max_skips:
                raise DecodeError(
                    f"{self.skipped} undecodable images skipped, more than `max_skips` "
                    f"({self._max_skips}); the last: {reason}", path=path, index=index)

    @property
    def provide_data(self) -> list[DataDesc]:
        """``[DataDesc(data_name, (batch_size, C, H, W), dtype, "NCHW")]``."""
        dtype = np.dtype(self.dtype)
        return [DataDesc(self.data_names[0], (self.batch_size, *self.data_shape), dtype, "NCHW")]

    @property
    def provide_label(self) -> list[DataDesc]:
        """``[DataDesc(label_name, (batch_size,) or (batch_size, label_width), float32, "NCHW")]``."""
        shape = (self.batch_size,) if self.label_width == 1 else (self.batch_size, self.label_width)
        return [DataDesc(self.label_names[0], shape, np.dtype("float32"), "NCHW")]

    def stats(self) -> dict[str, Any]:
        """``{"batches": served this epoch, "skipped": undecodable images skipped so far,
        "skipped_records": [(path, record number), ...] (the first few)}``."""
        return {"batches": self._served, "skipped": self.skipped,
                "skipped_records": list(self._skipped_records)}

    @property
    def epoch(self) -> int | None:
        """The epoch being read (``None`` before the first batch)."""
        return None if self._it is None else self._it.epoch

    def reset(self) -> None:
        """End the current epoch; the next batch starts the next epoch."""
        super().reset()
        self._done = False
        self._served = 0
        self.pad = 0

    def get_state(self) -> dict[str, Any]:
        """A JSON-able position: restoring it continues with the next batch."""
        if self._it is None:
            self._it = self.dataset.iterator()
            self._served = 0
        return {
            "type": "image_record_iter",
            "served": self._served,
            "done": self._done,
            "skipped": self.skipped,
            "pipeline": self._it.get_state(),
        }

    def set_state(self, state: dict[str, Any]) -> None:
        """Continue from ``state``: the next batch is the one the iterator that saved it
        would have produced next.

        Args:
            state: a :meth:`get_state` dict of an iterator with the same configuration.
                A value that is not such a dict raises
                :class:`~feedline.exceptions.StateError`, and one whose ``served``,
                ``done``, ``skipped`` or ``pipeline`` has the wrong type or range
                :class:`~feedline.exceptions.InvalidStateError` (a ``StateError``), both
                before anything changes; a ``pipeline`` state that does not fit this
                pipeline raises ``StateError`` after the current epoch was ended.
        """
        if not isinstance(state, dict) or state.get("type") != "image_record_iter":
            raise StateError(f"not an ImageRecordIter state: {state!r}")
        kind = "image_record_iter"
        served = state_int(state, "served", kind)
        done = state_bool(state, "done", kind)
        skipped = state_int({"skipped": 0, **state}, "skipped", kind)
        if not isinstance(state.get("pipeline"), dict):
            raise InvalidStateError(f"state of stage {kind!r}: `pipeline` must be a dict, got "
                                    f"{state.get('pipeline')!r:.80}")
        self.reset()
        self._it = self.dataset.iterator(state["pipeline"])
        self._served, self._done, self.skipped = served, done, skipped

    def close(self) -> None:
        """Stop the workers and close the files; idempotent."""
        if self._it is not None:
            self._it.close()
            self._it = None
        stage = getattr(self, "_map", None)
        if stage is not None and hasattr(stage, "close"):
            stage.close()
        files = getattr(self, "_files", None)
        if files is not None:
            files.close()

    def __enter__(self) -> ImageRecordIter:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
