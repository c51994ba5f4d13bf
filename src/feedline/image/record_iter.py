"""``ImageRecordIter``: MXNet's image record iterator, as a configured feedline pipeline.

``ImageRecordIter(path_imgrec=..., data_shape=(3, 224, 224), batch_size=...)`` reads
image records packed by ``feedline pack`` or MXNet's ``im2rec`` (RecordIO ``.rec`` +
``.idx``) — or TFRecord shards of ``tf.train.Example`` with ``image/encoded`` and
``image/class/label`` — and yields ``(data, label)`` batches: ``data`` is
``(batch_size, C, H, W)`` ``float32`` (normalised) or ``uint8``; ``label`` is
``(batch_size,)`` ``float32`` (``(batch_size, label_width)`` when ``label_width > 1``);
numpy arrays, or torch tensors with ``output="torch"``.

It takes MXNet's parameter names; the pipeline it builds is an ordinary
:class:`feedline.Dataset` (``it.dataset``)::

    records of this part (random access, file order)
      -> global_shuffle(seed)                    if shuffle
      -> round up to whole batches                if round_batch
      -> group(batch_size)                        random access: item k = records of batch k
      -> map(decode + augment a batch, workers=preprocess_threads, backend=backend)
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

Semantics, field by field:

* **dataset**: ``path_imgrec`` (one path, a list, or MXNet's ``"a.rec;b.rec"``; files
  ending in ``.tfrecord`` are read as TFRecord unless ``format`` says otherwise),
  ``path_imgidx`` (default: ``x.rec`` -> ``x.idx``, and when that does not exist the
  ``.rec`` is scanned once at start, nothing written; for TFRecord the sidecar index
  ``<path>.index`` of :func:`feedline.tfrecord.build_index`, else the file is scanned
  once),
  ``data_shape`` ``(C, H, W)`` with ``C`` 3 (RGB) or 1 (grayscale), ``label_width``.
  A record whose header carries several labels (``flag > 0``) must carry exactly
  ``label_width`` of them, as in MXNet.
* **parts**: ``num_parts``/``part_index`` split the records by count, as MXNet's indexed
  InputSplit does: ``step = ceil(n / num_parts)``, part ``r`` reads records ``[r * step,
  min((r + 1) * step, n))`` in file order (trailing parts may be empty). The parts are
  disjoint and together read every record exactly once.
* **batch**: ``round_batch=True`` (MXNet's default) completes the last batch of an epoch
  with the first records of that epoch (``it.pad`` tells how many rows are such
  repeats; 0 for every other batch); ``round_batch=False`` yields a smaller last batch.
* **labels**: from each record's header (``label_width`` of them), or, with
  ``path_imglist``, from an MXNet ``.lst`` file, looked up by the record's image index
  (its header id; RecordIO only); a record whose index the list lacks raises.
* **augmentation** (applied in this order): ``resize`` (shorter side, MXNet's ``-1``
  or ``None`` = off), ``pad``/``fill_value``, then a crop to ``(H, W)`` —
  ``random_resized_crop`` (area ``min_random_area..max_random_area``, aspect ratio
  ``min_aspect_ratio..max_aspect_ratio``), else ``rand_crop`` (uniform position), else
  the centre —, ``brightness``/``contrast``/``saturation`` jitter, ``rand_mirror``
  (probability 0.5) or ``mirror`` (always), then for ``float32`` output
  ``(x - mean) / std * scale`` per channel (``mean_r/g/b``, ``std_r/g/b``) or ``(x -
  mean_img) * scale`` with a mean image of shape ``data_shape``: an array, a ``.npy``
  file, or an MXNet NDArray file (``mx.nd.save``'s format, the array named
  ``mean_img``); a ``mean_img`` path that does not exist is computed, as MXNet does, over
  every record (resized, padded and centre-cropped, nothing random) and saved there in
  MXNet's format.
  ``inter_method`` 0/1/2/4 is nearest/bilinear/bicubic/lanczos (MXNet's 3 = area maps
  to Pillow's ``box``). An image smaller than ``(H, W)`` after resize and pad raises.
  ``augmenter=`` replaces all of this by any :class:`~feedline.image.augment.Compose`
  whose output is ``data_shape``. ``decode_plan=True`` (the default, a feedline
  addition) lets the chain plan the decode (:meth:`~feedline.image.augment.Compose.decode`:
  a ``random_resized_crop`` box at least twice ``(H, W)`` is decoded at 1/2, 1/4 or 1/8
  DCT scale, within the tolerance documented there); ``decode_plan=False`` decodes every
  image in full first, exactly as before.
* **randomness**: every random choice for record ``i`` (its position in the whole
  dataset) in epoch ``e`` comes from ``SeedSequence([seed, e, i])``, whichever worker
  decodes it; the shuffle order of epoch ``e`` from ``(seed, e)``. Epoch ``e`` is the
  ``e``-th pass (``reset()`` or a new ``for`` loop after the end starts the next one).
* **backend**: ``preprocess_threads`` workers decode and augment (``0``: in the
  consuming thread), threads or processes as ``backend`` says (``"auto"``, ``"thread"``
  or ``"process"``, a feedline addition), ``prefetch_buffer`` batches are prepared ahead, ``dtype``
  ``"float32"`` or ``"uint8"`` (no normalisation).
* **resume**: ``it.get_state()`` / ``it.set_state(state)`` (or ``state=`` in the
  constructor) continue with exactly the batches the uninterrupted iterator would have
  produced next.

Deviations from MXNet, on purpose: ``verbose`` defaults to ``False``; a computed
``mean_img`` covers all records of all parts (MXNet's covers its own part) through the
deterministic steps only, so every rank gets the same one; a
corrupt image raises :class:`~feedline.exceptions.DecodeError` naming the file and
record instead of being logged and skipped.

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
"""

from __future__ import annotations

import bisect
import os
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from feedline._internal.closing import Closeable
from feedline._internal.validate import non_negative_int, one_of, positive_int
from feedline.dataset.base import Dataset, RandomAccessDataset
from feedline.exceptions import DataError, DecodeError, StateError
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

__all__ = ["ImageRecordIter", "part_range"]

_INTERPOLATION = {0: "nearest", 1: "bilinear", 2: "bicubic", 3: "box", 4: "lanczos"}


def part_range(num_records: int, num_parts: int, part_index: int) -> tuple[int, int]:
    """Records ``[begin, end)`` of part ``part_index`` of ``num_parts`` (MXNet's indexed
    split: ``step = ceil(n / num_parts)``).

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


class _Files:
    """Random access to the records of several files (RecordIO with .idx, or TFRecord
    with a sidecar index), in file order. Picklable; files reopen lazily."""

    def __init__(self, paths: list[str], idx_paths: list[str | None], fmt: str) -> None:
        self.paths = paths
        self.format = fmt
        self.readers: list[Any] = []
        self.starts: list[int] = []
        total = 0
        for path, idx in zip(paths, idx_paths):
            if not os.path.isfile(path):
                raise FileNotFoundError(f"`path_imgrec` file {path!r} does not exist")
            if fmt == "recordio":
                from feedline.formats import recordio

                if idx is not None and not os.path.isfile(idx):
                    raise FileNotFoundError(
                        f"index {idx!r} for {path!r} does not exist; leave `path_imgidx` out "
                        "to scan the file, or build it with feedline.recordio.build_index"
                    )
                idx = idx or recordio.default_idx_path(path)
                if os.path.isfile(idx):
                    reader = recordio.IndexedRecordIO(idx, path, "r")
                else:
                    reader = _scan_recordio(path)
            else:
                from feedline.formats import tfrecord

                reader = tfrecord.TFRecordFile(path, index_path=idx)
            self.readers.append(reader)
            self.starts.append(total)
            total += len(reader)
        self.total = total

    def __len__(self) -> int:
        return self.total

    def locate(self, position: int) -> tuple[int, int]:
        """(file number, record number in that file) of a global position."""
        f = bisect.bisect_right(self.starts, position) - 1
        return f, position - self.starts[f]

    def read(self, position: int) -> bytes:
        f, k = self.locate(position)
        return self.readers[f][k]

    def close(self) -> None:
        for reader in self.readers:
            close = getattr(reader, "close", None)
            if close is not None:
                close()


def _scan_recordio(path: str) -> Any:
    """An ``IndexedRecordIO`` over ``path`` from one scan of its records (no ``.idx``
    file is written beside it; the temporary one is gone once read)."""
    import tempfile

    from feedline.formats import recordio

    with tempfile.TemporaryDirectory(prefix="feedline-scan-") as tmp:
        idx = os.path.join(tmp, "scan.idx")
        recordio.build_index(path, idx)
        reader = recordio.IndexedRecordIO(idx, path, "r")
    reader.idx_path = f"{path} (scanned, no .idx)"
    return reader


class _PartSource(RandomAccessDataset):
    """Records ``[begin, end)`` of the files; item ``e * n + j`` is ``(e, begin + j,
    record bytes)`` — the epoch and global record position travel with the record."""

    def __init__(self, files: _Files, begin: int, end: int) -> None:
        super().__init__()
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
        return epoch, position, self._files.read(position)


class _RoundUp(RandomAccessDataset):
    """The parent's ``n`` items, then its first ``length - n`` again (same epoch)."""

    def __init__(self, parent: RandomAccessDataset, length: int) -> None:
        super().__init__()
        self._parents = (parent,)
        self._n = len(parent)
        self._length = length

    @property
    def name(self) -> str:
        return f"round_batch({self._length})"

    def __len__(self) -> int:
        return self._length

    def _getitem(self, index: int) -> Any:
        epoch, k = divmod(index, self._length)
        return self._parents[0]._getitem(epoch * self._n + k % self._n)


class _Batches(RandomAccessDataset):
    """Groups of ``batch_size`` consecutive items of a random-access parent, as one
    random-access item each (the last group smaller when ``len(parent)`` is not a
    multiple). Item ``e * len + k`` of this stage is the ``k``-th group of epoch ``e``.

    Grouping before the map lets each worker decode a whole batch into one array (one
    copy back to the consumer per batch) while still reading the records itself.
    """

    def __init__(self, parent: RandomAccessDataset, batch_size: int) -> None:
        super().__init__()
        self._parents = (parent,)
        self._n = len(parent)
        self._size = batch_size
        self._groups = -(-self._n // batch_size)

    @property
    def name(self) -> str:
        return f"group({self._size})"

    def __len__(self) -> int:
        return self._groups

    def _getitem(self, index: int) -> list:
        epoch, k = divmod(index, self._groups)
        parent = self._parents[0]
        base = epoch * self._n
        stop = min((k + 1) * self._size, self._n)
        return [parent._getitem(base + j) for j in range(k * self._size, stop)]


class _BatchDecoder:
    """Turn a list of ``(epoch, position, record)`` into one ``(data, label)`` batch:
    each image decoded and augmented straight into its row of ``data``.

    Picklable: this object is what the map workers run. In a worker process (a pid other
    than the creator's) the result is always copied to the consumer, so the worker
    reuses one ``data`` buffer instead of touching fresh memory for every batch.
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
        paths: list[str],
        starts: list[int],
        labels: dict[int, np.ndarray] | None = None,
        decode_plan: bool = True,
    ) -> None:
        self.format = fmt
        self.decode_plan = decode_plan
        self.labels = labels
        self.data_shape = data_shape
        self.label_width = label_width
        self.dtype = dtype
        self.augmenter = augmenter
        self.seed = seed
        self.paths = paths
        self.starts = starts
        self.mode = "RGB" if data_shape[0] == 3 else "L"
        self._creator = os.getpid()
        self._buffer: np.ndarray | None = None

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_buffer"] = None
        return state

    def _where(self, position: int) -> tuple[str, int]:
        """(file, record number in that file) of a global record position, for errors."""
        f = bisect.bisect_right(self.starts, position) - 1
        return self.paths[f], position - self.starts[f]

    def _split(self, record: bytes, position: int) -> tuple[bytes, np.ndarray]:
        width = self.label_width
        if self.format == "recordio":
            from feedline.formats.recordio import unpack

            header, payload = unpack(record)
            if self.labels is not None:
                labels = self.labels.get(header.id)
                if labels is None:
                    path, index = self._where(position)
                    raise DecodeError(
                        f"the record's image index {header.id} is not in `path_imglist`",
                        path=path, index=index,
                    )
            elif header.flag > 0:
                labels = np.asarray(header.label, dtype=np.float32)
            else:
                labels = np.asarray([header.label], dtype=np.float32)
        else:
            payload, labels = _example_image(record, *self._where(position))
        if labels.size != width:
            path, index = self._where(position)
            raise DecodeError(
                f"the record has {labels.size} label(s) but `label_width` is {width}",
                path=path,
                index=index,
            )
        return payload, labels

    def _data(self, n: int) -> np.ndarray:
        shape = (n, *self.data_shape)
        if os.getpid() == self._creator:
            return np.empty(shape, dtype=self.dtype)  # handed to the consumer as it is
        if self._buffer is None or self._buffer.shape != shape:
            self._buffer = np.empty(shape, dtype=self.dtype)
        return self._buffer

    def __call__(self, records: list) -> tuple[np.ndarray, np.ndarray]:
        n = len(records)
        data = self._data(n)
        if self.label_width == 1:
            label = np.empty(n, dtype=np.float32)
        else:
            label = np.empty((n, self.label_width), dtype=np.float32)
        for i, (epoch, position, record) in enumerate(records):
            payload, labels = self._split(record, position)
            path, index = self._where(position)
            self.augmenter.decode(
                payload, mode=self.mode, plan=self.decode_plan, seed=self.seed, epoch=epoch,
                index=position, out=data[i], path=path, record=index,
            )
            label[i] = labels if self.label_width > 1 else labels[0]
        return data, label


class _NormalizeBatch:
    """``(uint8 data, label)`` -> ``(float32 normalised data, label)`` for a whole batch."""

    def __init__(self, normalize: Normalize) -> None:
        self.normalize = normalize

    def __call__(self, batch: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        data, label = batch
        return self.normalize.batch_chw(data), label


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


class ImageRecordIter(Closeable):
    """Batches of decoded, augmented images from packed records; see the module docstring.

    ``augmenter`` is the per-image :class:`~feedline.image.augment.Compose` the workers
    run; ``normalize`` the :class:`~feedline.image.augment.Normalize` applied to whole
    batches afterwards (``None`` for uint8 output or a custom ``augmenter``).

    Iterate it (``for data, label in it``) once per epoch; a new ``for`` loop after the
    end (or ``reset()``) starts the next epoch. ``pad`` is the number of repeated rows in
    the batch last returned. ``num_records`` is the size of this part; ``len(it)`` the
    number of batches per epoch. Close it (or use ``with``) to stop the workers.
    """

    def __init__(
        self,
        *,
        path_imgrec: Any,
        data_shape: Sequence[int],
        batch_size: int,
        path_imgidx: Any = None,
        path_imglist: Any = None,
        label_width: int = 1,
        round_batch: bool = True,
        resize: int | None = -1,
        rand_crop: bool = False,
        random_resized_crop: bool = False,
        min_random_area: float = 1.0,
        max_random_area: float = 1.0,
        min_aspect_ratio: float | None = None,
        max_aspect_ratio: float | None = None,
        rand_mirror: bool = False,
        mirror: bool = False,
        brightness: float = 0.0,
        contrast: float = 0.0,
        saturation: float = 0.0,
        pad: int = 0,
        fill_value: int = 255,
        inter_method: int = 1,
        mean_r: float = 0.0,
        mean_g: float = 0.0,
        mean_b: float = 0.0,
        std_r: float = 1.0,
        std_g: float = 1.0,
        std_b: float = 1.0,
        scale: float = 1.0,
        mean_img: Any = None,
        augmenter: Compose | None = None,
        decode_plan: bool = True,
        preprocess_threads: int = 4,
        backend: str = "auto",
        prefetch_buffer: int = 4,
        shuffle: bool = False,
        seed: int = 0,
        num_parts: int = 1,
        part_index: int = 0,
        dtype: str = "float32",
        format: str | None = None,
        output: str = "numpy",
        verbose: bool = False,
        state: dict | None = None,
    ) -> None:
        self.data_shape = _check_shape(data_shape)
        self.batch_size = positive_int("batch_size", batch_size)
        self.label_width = positive_int("label_width", label_width)
        self.num_parts = positive_int("num_parts", num_parts)
        self.part_index = non_negative_int("part_index", part_index)
        if self.part_index >= self.num_parts:
            raise ValueError(
                f"`part_index` must be in [0, num_parts) = [0, {num_parts}), got {part_index}"
            )
        self.dtype = one_of("dtype", dtype, ("float32", "uint8"))
        self.output = one_of("output", output, ("numpy", "torch"))
        self.seed = non_negative_int("seed", seed)
        non_negative_int("preprocess_threads", preprocess_threads)
        one_of("backend", backend, ("auto", "thread", "process"))
        if backend == "auto":  # what measured faster: see the module docstring
            backend = "thread" if self.dtype == "float32" else "process"
        self.backend = backend
        positive_int("prefetch_buffer", prefetch_buffer)
        self.round_batch = bool(round_batch)
        self.shuffle = bool(shuffle)

        paths = _split_paths(path_imgrec, "path_imgrec")
        if path_imgidx is None or path_imgidx == "":
            idx_paths: list[str | None] = [None] * len(paths)
        else:
            idx_paths = list(_split_paths(path_imgidx, "path_imgidx"))
            if len(idx_paths) != len(paths):
                raise ValueError(
                    f"`path_imgidx` names {len(idx_paths)} file(s) for {len(paths)} record file(s)"
                )
        if format is None:
            format = "tfrecord" if all(p.endswith(".tfrecord") for p in paths) else "recordio"
        self.format = one_of("format", format, ("recordio", "tfrecord"))

        self._files = _Files(paths, idx_paths, self.format)
        self._labels = self._label_map(path_imglist)
        self._preprocess_threads = preprocess_threads
        self._verbose = bool(verbose)
        if augmenter is not None:
            if not isinstance(augmenter, Compose):
                raise TypeError(f"`augmenter` must be a feedline.image.Compose, got {augmenter!r}")
            self.augmenter, self.normalize = augmenter, None
        else:
            self.augmenter, self.normalize = self._default_augmenter(
                resize=resize, rand_crop=rand_crop, random_resized_crop=random_resized_crop,
                min_random_area=min_random_area, max_random_area=max_random_area,
                min_aspect_ratio=min_aspect_ratio, max_aspect_ratio=max_aspect_ratio,
                rand_mirror=rand_mirror, mirror=mirror, brightness=brightness,
                contrast=contrast, saturation=saturation, pad=pad, fill_value=fill_value,
                inter_method=inter_method, mean=(mean_r, mean_g, mean_b),
                std=(std_r, std_g, std_b), scale=scale, mean_img=mean_img,
            )

        begin, end = part_range(len(self._files), self.num_parts, self.part_index)
        self.num_records = end - begin
        source: RandomAccessDataset = _PartSource(self._files, begin, end)
        if self.shuffle and self.num_records:
            source = source.global_shuffle(seed=self.seed)
        batches = -(-self.num_records // self.batch_size)
        rounded = batches * self.batch_size
        self._last_pad = rounded - self.num_records if self.round_batch else 0
        if self._last_pad:
            source = _RoundUp(source, rounded)
        self._batches_per_epoch = batches
        # threads share memory: normalise inside the decode threads, fused with HWC -> CHW,
        # straight into the float32 batch; processes ship uint8 batches (a quarter of the
        # bytes) and normalise once per batch in the prefetch thread
        fused = self.normalize is not None and self.backend == "thread" and preprocess_threads
        augment = self.augmenter
        if fused:
            steps = [a for a in self.augmenter.augmenters if not isinstance(a, (ToCHW, Cast))]
            augment = Compose([*steps, self.normalize, ToCHW()])
        decoder = _BatchDecoder(
            fmt=self.format,
            data_shape=self.data_shape,
            label_width=self.label_width,
            dtype="uint8" if self.normalize is not None and not fused else self.dtype,
            augmenter=augment,
            seed=self.seed,
            paths=paths,
            starts=list(self._files.starts),
            labels=self._labels,
            decode_plan=bool(decode_plan),
        )
        grouped = _Batches(source, self.batch_size)
        self._map = grouped.map(decoder, workers=preprocess_threads, name="decode_augment",
                                backend=self.backend)
        pipeline: Dataset = self._map
        if self.normalize is not None and not fused:
            pipeline = pipeline.map(_NormalizeBatch(self.normalize), name="normalize")
        self.dataset: Dataset = pipeline.prefetch(prefetch_buffer)
        self.pad = 0
        self._it: Any = None
        self._done = False
        self._served = 0
        if verbose:
            print(
                f"ImageRecordIter: {';'.join(paths)} ({self.format}), part {self.part_index} of "
                f"{self.num_parts}: {self.num_records} records, {batches} batches of "
                f"{self.batch_size}; {preprocess_threads} preprocess worker(s); "
                f"augmenter {self.augmenter!r}, then {self.normalize!r}",
                file=sys.stderr,
            )
        if state is not None:
            self.set_state(state)

    # ------------------------------------------------------------------ configuration
    def _default_augmenter(self, **kw: Any) -> tuple[Compose, Normalize | None]:
        """The per-image chain (ending in uint8 CHW) and, for float32 output, the
        normalisation applied to whole batches."""
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
            if custom or mean_img is not None:
                raise ValueError(
                    "`dtype='uint8'` output is not normalised: leave mean_*, std_*, scale and "
                    "mean_img at their defaults"
                )
            return Compose([*augs, ToCHW(), Cast("uint8")]), None
        if mean_img is not None:
            if isinstance(mean_img, (str, os.PathLike)):
                image = self._mean_image(os.fspath(mean_img), fixed)
            else:
                image = np.asarray(mean_img, dtype=np.float32)
            if image.shape != (c, h, w):
                raise ValueError(
                    f"`mean_img` must have shape data_shape {(c, h, w)}, got {image.shape}"
                )
            normalize = Normalize(mean=image.transpose(1, 2, 0), std=1.0 / scale)
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

    def _mean_image(self, path: str, fixed: list) -> np.ndarray:
        """Load the mean image at ``path`` (``.npy``, or an MXNet NDArray file holding
        ``mean_img`` or a single array), or compute it over every record and save it
        there (as MXNet does) when the file does not exist."""
        from feedline.formats import ndarray_file

        if not os.path.exists(path):
            image = self._compute_mean_image(fixed)
            ndarray_file.save(path, {"mean_img": image})
            if self._verbose:
                print(f"ImageRecordIter: saved the mean of {len(self._files)} images to {path}",
                      file=sys.stderr)
            return image
        if path.endswith(".npy"):
            return np.load(path).astype(np.float32, copy=False)
        loaded = ndarray_file.load(path)
        if isinstance(loaded, dict):
            image = loaded.get("mean_img", None if len(loaded) != 1 else next(iter(loaded.values())))
        else:
            image = loaded[0] if len(loaded) == 1 else None
        if image is None:
            raise ValueError(f"`mean_img` file {path!r} holds no 'mean_img' array")
        return image.astype(np.float32, copy=False)

    def _compute_mean_image(self, fixed: list) -> np.ndarray:
        """Mean over all records (every part) of the images after resize, pad and a
        centre crop: float32 ``data_shape``."""
        files = self._files
        if not len(files):
            raise ValueError("cannot compute `mean_img` over record files with no records")
        decoder = _BatchDecoder(
            fmt=self.format, data_shape=self.data_shape, label_width=self.label_width,
            dtype="uint8", augmenter=Compose([*fixed, ToCHW(), Cast("uint8")]), seed=self.seed,
            paths=list(files.paths), starts=list(files.starts), labels=self._labels,
        )
        groups = _Batches(_PartSource(files, 0, len(files)), 64)
        total = np.zeros(self.data_shape, dtype=np.float64)
        with groups.map(decoder, workers=self._preprocess_threads, backend="thread",
                        name="mean_img").iterator() as it:
            for data, _label in it:
                total += data.sum(axis=0, dtype=np.float64)
        return (total / len(files)).astype(np.float32)

    # ------------------------------------------------------------------ iterating
    def __len__(self) -> int:
        return self._batches_per_epoch

    def __iter__(self) -> ImageRecordIter:
        if self._done:
            self.reset()
        return self

    def __next__(self) -> tuple[Any, Any]:
        if self._it is None:
            self._it = self.dataset.iterator()
            self._done = False
            self._served = 0
        try:
            data, label = next(self._it)
        except StopIteration:
            self._done = True
            raise
        self._served += 1
        last = self._served == self._batches_per_epoch
        self.pad = self._last_pad if last else 0
        if self.output == "torch":
            import torch

            return torch.from_numpy(data), torch.from_numpy(label)
        return data, label

    next = __next__  # MXNet's DataIter.next()

    @property
    def epoch(self) -> int | None:
        """The epoch being read (``None`` before the first batch)."""
        return None if self._it is None else self._it.epoch

    def reset(self) -> None:
        """End the current epoch; the next batch starts the next epoch."""
        if self._it is not None:
            self._it.close()
        self._it = None
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
            "pipeline": self._it.get_state(),
        }

    def set_state(self, state: dict[str, Any]) -> None:
        """Continue from ``state`` (from :meth:`get_state` of an iterator with the same
        configuration)."""
        if not isinstance(state, dict) or state.get("type") != "image_record_iter":
            raise StateError(f"not an ImageRecordIter state: {state!r}")
        self.reset()
        self._it = self.dataset.iterator(state["pipeline"])
        self._served = non_negative_int("state['served']", state["served"])
        self._done = bool(state["done"])

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
