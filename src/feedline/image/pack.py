"""Pack a folder of images (or an MXNet ``.lst`` list) into record shards — MXNet's im2rec.

:func:`pack_images` reads the images named by a list, optionally re-encodes them
(center crop to a square, resize the shorter side, JPEG quality or PNG), and writes them
into ``num_shards`` files:

* ``format="recordio"``: MXNet RecordIO ``.rec`` + ``.idx``, each record an
  ``IRHeader`` (``id`` = the list index, ``label`` = the first label, or all labels as a
  float32 array with ``SourceOptions(pack_label=True)`` and more than one label)
  followed by the encoded image — what ``im2rec`` writes, read by ``mxnet.recordio`` and
  ``mx.io.ImageRecordIter``.
* ``format="tfrecord"``: TFRecord files of ``tf.train.Example`` with the conventional
  image features: ``image/encoded`` (bytes), ``image/format`` (``b"jpeg"``/``b"png"``),
  ``image/class/label`` (int64; a list with ``pack_label``), ``image/height``,
  ``image/width``, ``image/channels`` (int64), ``image/filename`` (the list path) and
  ``image/id`` (the list index).

The source is either a folder with one subfolder per class (labels 0, 1, ... in sorted
order of the names; the list is also written as ``<output>.lst``, like ``im2rec
--list``) or an existing ``.lst`` file whose paths are relative to ``root`` (default:
the list's folder).

Output names: with one shard ``<output>.rec``/``.idx`` (``<output>.tfrecord``), as
im2rec names them; with ``N`` shards ``<output>-00000-of-0000N.rec`` ... (see
:mod:`feedline.sharded`). Records go to shards round robin in write order, which is the
list order or, with ``shuffle=True``, a permutation drawn from ``seed``. Files are
written under temporary names and renamed only when every record is in, so a failed or
interrupted run leaves no final-named file behind.

Images are read and encoded by ``num_workers`` processes (``multiprocessing.Pool``,
results in order), the writing stays in the calling process; with ``backend="ray"``,
Ray tasks read, encode and write the shards themselves (:mod:`feedline.image._pack_ray`).

>>> import os, tempfile, numpy as np, simplejpeg
>>> from feedline import recordio
>>> root = tempfile.mkdtemp()
>>> for cls in ("cat", "dog"):
...     os.makedirs(os.path.join(root, "photos", cls))
...     img = np.full((40, 60, 3), 100 if cls == "cat" else 200, np.uint8)
...     _ = open(os.path.join(root, "photos", cls, "1.jpg"), "wb").write(simplejpeg.encode_jpeg(img))
>>> from feedline.image import EncodeOptions
>>> result = pack_images(os.path.join(root, "photos"), os.path.join(root, "train"),
...                      encode=EncodeOptions(resize=20))
>>> result.count, result.classes, [os.path.basename(p) for p in result.files]
(2, ['cat', 'dog'], ['train.rec'])
>>> header, img = recordio.unpack_img(recordio.IndexedRecordIO(result.index_files[0], result.files[0]).read_idx(1))
>>> header.label, header.id, img.shape
(1.0, 1, (20, 30, 3))
"""

from __future__ import annotations

import io
import multiprocessing
import os
import sys
import time
from collections.abc import Generator, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from feedline._internal.option_groups import regroup
from feedline._internal.optional import require
from feedline._internal.validate import (
    UNSET,
    non_negative_int,
    one_of,
    positive_int,
)
from feedline.exceptions import DecodeError
from feedline.image.listfile import ListItem, list_folder, read_list, write_list
from feedline.image.pack_options import ENCODINGS, EncodeOptions, SourceOptions
from feedline.image.pack_options import check_quality as _check_quality

__all__ = ["pack_images", "PackResult", "encode_image", "ENCODINGS", "FORMATS"]

#: Output formats.
FORMATS = ("recordio", "tfrecord")

_SUFFIX = {"recordio": ".rec", "tfrecord": ".tfrecord"}


@dataclass(frozen=True)
class PackResult:
    """What :func:`pack_images` wrote.

    Args:
        files: the record files (``.rec`` or ``.tfrecord``) in shard order.
        index_files: the ``.idx`` files (RecordIO only, else empty).
        list_file: the ``.lst`` written for a folder source (``None`` for a list source).
        count: records written.
        counts: records per shard.
        skipped: list entries left out under ``on_error="skip"``.
        classes: class names by label for a folder source (``None`` otherwise).

    >>> import os, tempfile
    >>> from PIL import Image
    >>> root = tempfile.mkdtemp()
    >>> for k, cls in enumerate(("cat", "dog")):
    ...     os.makedirs(os.path.join(root, "photos", cls))
    ...     Image.new("RGB", (8, 8), (50 * k, 0, 0)).save(os.path.join(root, "photos", cls, "0.png"))
    >>> from feedline.image import EncodeOptions
    >>> result = pack_images(os.path.join(root, "photos"), os.path.join(root, "train"),
    ...                      encode=EncodeOptions(encoding=".png"), format="tfrecord")
    >>> type(result).__name__, result.count, result.counts, result.classes, result.skipped
    ('PackResult', 2, [2], ['cat', 'dog'], [])
    >>> [os.path.basename(p) for p in result.files], result.index_files, os.path.basename(result.list_file)
    (['train.tfrecord'], [], 'train.lst')
    """

    files: list[str]
    index_files: list[str]
    list_file: str | None
    count: int
    counts: list[int]
    skipped: list[tuple[int, str, str]] = field(default_factory=list)
    classes: list[str] | None = None


def encode_image(img: np.ndarray, *, encoding: str = ".jpg", quality: int | None = None) -> bytes:
    """Encode an ``(H, W, 3)`` RGB or ``(H, W, 1)``/``(H, W)`` grayscale ``uint8`` image.

    Args:
        img: a ``uint8`` array of shape ``(H, W, 3)`` (RGB), ``(H, W, 1)`` or ``(H, W)``
            (grayscale); anything else raises ``ValueError``.
        encoding: ``".jpg"`` (the default): libjpeg-turbo, 4:2:0 chroma subsampling as
            OpenCV writes it (grayscale as a one-channel JPEG); ``".png"``: Pillow.
            Another value raises ``ValueError``.
        quality: for ``.jpg`` the JPEG quality 1-100 (default 95); for ``.png`` the zlib
            level 0-9 (default 3). ``None`` takes the default; out of range raises
            ``ValueError``.

    >>> import numpy as np
    >>> encode_image(np.zeros((2, 2, 3), np.uint8), encoding=".png")[:4]
    b'\\x89PNG'
    """
    one_of("encoding", encoding, ENCODINGS)
    quality = _check_quality(encoding, quality)
    arr = np.asarray(img)
    if arr.dtype != np.uint8 or not (arr.ndim == 2 or (arr.ndim == 3 and arr.shape[2] in (1, 3))):
        raise ValueError(
            f"`img` must be a uint8 array of shape (H, W), (H, W, 1) or (H, W, 3), got "
            f"{arr.dtype} {arr.shape}"
        )
    gray = arr.ndim == 2 or arr.shape[2] == 1
    if encoding == ".jpg":
        sj = require("simplejpeg", extra="image")
        if gray:
            plane = arr if arr.ndim == 3 else arr[:, :, None]
            return sj.encode_jpeg(np.ascontiguousarray(plane), quality=quality, colorspace="GRAY")
        return sj.encode_jpeg(
            np.ascontiguousarray(arr), quality=quality, colorspace="RGB", colorsubsampling="420"
        )
    Image = require("PIL.Image", extra="image")
    plane = arr[:, :, 0] if gray and arr.ndim == 3 else arr
    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(plane)).save(buf, format="PNG", compress_level=quality)
    return buf.getvalue()


@dataclass(frozen=True)
class _Config:
    """What each worker needs to turn a list item into an encoded image."""

    root: str
    pass_through: bool
    resize: int | None
    center_crop: bool
    encoding: str
    quality: int
    color: str
    skip_errors: bool
    allow_outside_root: bool = False
    restart_markers: bool = False


_WORKER_CONFIG: _Config | None = None


def _init_worker(config: _Config) -> None:
    global _WORKER_CONFIG
    _WORKER_CONFIG = config


def _work(item: ListItem) -> tuple[ListItem, bytes | None, int, int, int, str]:
    """Return (item, payload, height, width, channels, format) or, under skip, payload
    ``None`` and the reason in ``format``."""
    assert _WORKER_CONFIG is not None
    try:
        return _encode_item(item, _WORKER_CONFIG)
    except (OSError, DecodeError) as exc:
        if not _WORKER_CONFIG.skip_errors:
            raise
        return item, None, 0, 0, 0, str(exc)


def _resolve(root: str, rel: str, allow_outside_root: bool) -> str:
    """``root/rel``, refused (``PermissionError``) when it leaves ``root`` through an
    absolute path, ``..`` or a symbolic link, unless ``allow_outside_root``."""
    path = os.path.join(root, rel)
    if allow_outside_root:
        return path
    real_root = os.path.realpath(root)
    real = os.path.realpath(path)
    if os.path.isabs(rel) or os.path.commonpath([real_root, real]) != real_root:
        raise PermissionError(
            f"{rel!r} is outside the image root {root!r} (an absolute path, '..' or a "
            "symbolic link); pass allow_outside_root=True (--allow-outside-root) to read it"
        )
    return path


def _encode_item(item: ListItem, cfg: _Config) -> tuple[ListItem, bytes, int, int, int, str]:
    path = _resolve(cfg.root, item.path, cfg.allow_outside_root)
    with open(path, "rb") as f:
        data = f.read()
    payload, height, width, channels, fmt = _payload(data, path, cfg)
    if cfg.restart_markers and fmt == "jpeg":
        from feedline.image.codec import add_restart_markers

        payload = add_restart_markers(payload, path=path)
    return item, payload, height, width, channels, fmt


def _payload(data: bytes, path: str, cfg: _Config) -> tuple[bytes, int, int, int, str]:
    """``(payload, height, width, channels, format)`` for the file bytes ``data`` read
    from ``path``: ``data`` itself under ``pass_through`` (``channels`` 0: not known
    without decoding), else the image decoded, cropped, resized and re-encoded."""
    from feedline.image.augment import Resize
    from feedline.image.codec import decode, probe

    if cfg.pass_through:
        height, width, fmt = probe(data, path=path)
        return data, height, width, 0, fmt
    mode = "RGB" if cfg.color == "rgb" else "L"
    hints: dict[str, Any] = {"min_side": cfg.resize} if cfg.resize else {}
    img = decode(data, mode=mode, path=path, **hints)
    if cfg.center_crop:
        h, w = img.shape[:2]
        if h > w:
            top = (h - w) // 2
            img = img[top : top + w]
        elif w > h:
            left = (w - h) // 2
            img = img[:, left : left + h]
    if cfg.resize:
        img = Resize(cfg.resize)(img)
    payload = encode_image(img, encoding=cfg.encoding, quality=cfg.quality)
    fmt = "jpeg" if cfg.encoding == ".jpg" else "png"
    return payload, img.shape[0], img.shape[1], img.shape[2], fmt


class _Progress:
    """Progress on stderr: done/total, percentage and rate. On a terminal one line that
    rewrites itself 4 times a second; elsewhere (logs) a plain line every 10 seconds."""

    def __init__(self, total: int, enabled: bool, stream: Any = None) -> None:
        self.total = total
        self.enabled = enabled
        self.stream = sys.stderr if stream is None else stream
        isatty = getattr(self.stream, "isatty", None)
        self.tty = bool(isatty and isatty())
        self.every = 0.25 if self.tty else 10.0
        self.start = time.perf_counter()
        self.last = self.start

    def update(self, done: int, *, final: bool = False) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        if not final and now - self.last < self.every:
            return
        self.last = now
        elapsed = max(now - self.start, 1e-9)
        pct = 100.0 * done / self.total if self.total else 100.0
        text = f"pack: {done}/{self.total} images ({pct:.0f}%), {done / elapsed:.0f} img/s"
        if self.tty:
            self.stream.write("\r" + text + ("\n" if final else ""))
        else:
            self.stream.write(text + "\n")
        self.stream.flush()


def _single_shard_pattern(output: str, suffix: str) -> str:
    # ShardedWriter takes a str.format pattern with {index}; "{index!s:.0}" formats as ""
    # so one shard gets im2rec's plain "<output>.rec" name.
    escaped = output.replace("{", "{{").replace("}", "}}")
    return escaped + "{index!s:.0}" + suffix


def pack_images(
    source: str | os.PathLike,
    output: str | os.PathLike,
    *,
    root: str | os.PathLike | None = None,
    format: str = "recordio",
    num_shards: int = 1,
    encode: EncodeOptions | None = None,
    source_options: SourceOptions | None = None,
    shuffle: bool = False,
    seed: int = 0,
    num_workers: int = 1,
    backend: str = "process",
    on_error: str = "raise",
    progress: bool = False,
    resize: int | None = UNSET,
    center_crop: bool = UNSET,
    encoding: str = UNSET,
    quality: int | None = UNSET,
    color: str = UNSET,
    pass_through: bool = UNSET,
    restart_markers: bool = UNSET,
    pack_label: bool = UNSET,
    exts: Sequence[str] = UNSET,
    allow_outside_root: bool = UNSET,
) -> PackResult:
    """Pack images into ``num_shards`` RecordIO or TFRecord files (see the module docstring).

    Args:
        source: a folder with one subfolder per class, or a ``.lst`` file.
        output: output prefix (``data/train`` -> ``data/train.rec``, ``data/train.idx``,
            ``data/train.lst``).
        root: image folder the ``.lst`` paths are relative to (default: the ``.lst``'s
            folder); not allowed with a folder source.
        format: ``"recordio"`` or ``"tfrecord"``.
        num_shards: number of output files.
        encode: :class:`~feedline.image.EncodeOptions`: what is stored for each image
            (``resize``, ``center_crop``, ``encoding``, ``quality``, ``color``,
            ``pass_through``, ``restart_markers``); ``None``: each image re-encoded as
            an RGB JPEG of quality 95, at its own size.
        source_options: :class:`~feedline.image.SourceOptions`: which files and labels
            are taken (``exts``, ``allow_outside_root``, ``pack_label``); ``None``: the
            defaults.
        shuffle: write records in a random order drawn from ``seed``.
        seed: the seed of that order.
        num_workers: processes that read and encode images (1: in this process); with
            ``backend="ray"``, Ray tasks in flight at once.
        backend: ``"process"`` (default) or ``"ray"``: Ray tasks on the cluster
            ``ray.init()``/``RAY_ADDRESS`` names read, encode and write the shards (the
            images and the output folder must be on a file system every node sees);
            this process commits the set with its manifest only when every task
            succeeded (a failure leaves no shard file and no manifest). The files are
            byte-identical to a local pack with the same arguments.
        on_error: ``"raise"`` (default): a missing or undecodable image stops the run
            (nothing is written); ``"skip"``: leave it out and list it in
            :attr:`PackResult.skipped`; ``"warn"``: skip and issue a ``RuntimeWarning``.
        progress: print a progress line on stderr.

    Deprecated:
        The flat keywords ``resize``, ``center_crop``, ``encoding``, ``quality``,
        ``color``, ``pass_through``, ``restart_markers`` (now fields of ``encode``) and
        ``pack_label``, ``exts``, ``allow_outside_root`` (now fields of
        ``source_options``) still work for one release with a ``DeprecationWarning``
        naming the new spelling; the same option given both ways with different values is
        a ``TypeError``.

    >>> import os, tempfile
    >>> from PIL import Image
    >>> from feedline import recordio
    >>> from feedline.image import EncodeOptions
    >>> from feedline.image.listfile import write_list
    >>> root = tempfile.mkdtemp()
    >>> for j in range(3):
    ...     Image.new("RGB", (12, 6), (10 * j, 0, 0)).save(os.path.join(root, f"{j}.png"))
    >>> write_list(os.path.join(root, "in.lst"), [(j, j % 2, f"{j}.png") for j in range(3)])
    >>> result = pack_images(os.path.join(root, "in.lst"), os.path.join(root, "out"), num_shards=2,
    ...                      encode=EncodeOptions(resize=3, encoding=".png"))
    >>> result.count, result.counts, [os.path.basename(p) for p in result.files]
    (3, [2, 1], ['out-00000-of-00002.rec', 'out-00001-of-00002.rec'])
    >>> header, img = recordio.unpack_img(next(iter(recordio.read(result.files[1]))))
    >>> header.label, header.id, img.shape          # shorter side resized to 3
    (1.0, 1, (3, 6, 3))
    """
    enc = regroup("encode", EncodeOptions, encode, {
        "resize": resize, "center_crop": center_crop, "encoding": encoding, "quality": quality,
        "color": color, "pass_through": pass_through, "restart_markers": restart_markers})
    src = regroup("source_options", SourceOptions, source_options, {
        "pack_label": pack_label, "exts": exts, "allow_outside_root": allow_outside_root})
    format = one_of("format", format, FORMATS)
    positive_int("num_shards", num_shards)
    non_negative_int("seed", seed)
    positive_int("num_workers", num_workers)
    backend = one_of("backend", backend, ("process", "ray"))
    on_error = one_of("on_error", on_error, ("raise", "skip", "warn"))
    pack_label = src.pack_label
    if enc.restart_markers:
        _require_restart_markers()
    source = os.fspath(source)
    output = os.fspath(output)

    classes: list[str] | None = None
    list_file: str | None = None
    if os.path.isdir(source):
        if root is not None:
            raise ValueError("`root` is only for a .lst source; a folder source is its own root")
        items, classes = list_folder(source, exts=src.exts)
        image_root = source
        list_file = output + ".lst"
    elif os.path.isfile(source):
        items = read_list(source)
        image_root = os.fspath(root) if root is not None else os.path.dirname(os.path.abspath(source))
    else:
        raise FileNotFoundError(f"`source` {source!r} is neither a folder nor a .lst file")
    if not items:
        raise ValueError(f"{source}: no images to pack")

    order = list(items)
    if shuffle:
        perm = np.random.default_rng(seed).permutation(len(order))
        order = [order[i] for i in perm]

    config = _Config(
        root=image_root,
        pass_through=enc.pass_through,
        resize=enc.resize,
        center_crop=enc.center_crop,
        encoding=enc.encoding,
        quality=_check_quality(enc.encoding, enc.quality),
        color=enc.color,
        skip_errors=on_error != "raise",
        allow_outside_root=src.allow_outside_root,
        restart_markers=enc.restart_markers,
    )
    from feedline.formats.sharded import ShardedWriter

    suffix = _SUFFIX[format]
    prefix = _single_shard_pattern(output, suffix) if num_shards == 1 else output
    out_dir = os.path.dirname(os.path.abspath(output))
    os.makedirs(out_dir, exist_ok=True)
    bar = _Progress(len(order), progress)
    skipped: list[tuple[int, str, str]] = []
    written = 0
    if backend == "ray":  # Ray tasks write the shards
        from feedline.image._pack_ray import pack_with_tasks

        writer = ShardedWriter(prefix, num_shards, format=format, suffix=suffix)
        written, skipped = pack_with_tasks(
            order, _RecordTask(config, format, pack_label), writer, format=format,
            num_workers=num_workers, on_error=on_error, bar=bar,
            list_file=None if list_file is None else (list_file, items))
        return _result(writer, list_file, written, skipped, classes)
    results = _results(order, config, num_workers)
    with ShardedWriter(prefix, num_shards, format=format, suffix=suffix) as writer, closing(results):
        for item, payload, height, width, channels, fmt in results:
            if payload is None:
                skipped.append((item.index, item.path, fmt))
                if on_error == "warn":
                    import warnings

                    warnings.warn(f"pack: skipping {item.path}: {fmt}", RuntimeWarning, stacklevel=2)
            else:
                shard = written % num_shards
                if format == "recordio":
                    record = _irecord(item, payload, pack_label)
                    writer.write(record, key=item.index, shard=shard)
                else:
                    record = _example(item, payload, height, width, channels, fmt, pack_label)
                    writer.write(record, shard=shard)
                written += 1
            bar.update(written + len(skipped))
        bar.update(written + len(skipped), final=True)
        if list_file is not None:
            write_list(list_file, items)
    return _result(writer, list_file, written, skipped, classes)


def _result(writer: Any, list_file: str | None, written: int, skipped: list[tuple[int, str, str]],
            classes: list[str] | None) -> PackResult:
    """The :class:`PackResult` of a committed ``writer`` (a ``ShardedWriter``)."""
    files = list(writer.paths)
    recordio = writer.format == "recordio"
    return PackResult(
        files=files,
        index_files=[os.path.splitext(p)[0] + ".idx" for p in files] if recordio else [],
        list_file=list_file,
        count=written,
        counts=list(writer.counts),
        skipped=skipped,
        classes=classes,
    )


def _require_restart_markers() -> None:
    """Raise :class:`~feedline.exceptions.FeedlineError` unless the C extension that
    :func:`feedline.image.codec.add_restart_markers` needs is there."""
    from feedline.image.codec import require_region_decoding

    require_region_decoding("`restart_markers` (--restart-markers)")


class _RecordTask:
    """A list item -> ``(item, record, reason)``: :func:`_work` with ``config`` installed,
    the payload framed as ``format``'s record (``record`` ``None`` and ``reason`` for an
    item skipped under ``on_error``); picklable, for Ray tasks."""

    def __init__(self, config: _Config, format: str, pack_label: bool) -> None:
        self.config, self.format, self.pack_label = config, format, pack_label

    def __call__(self, item: ListItem) -> tuple[ListItem, bytes | None, str]:
        _init_worker(self.config)
        item, payload, height, width, channels, fmt = _work(item)
        if payload is None:
            return item, None, fmt
        if self.format == "recordio":
            return item, _irecord(item, payload, self.pack_label), ""
        return item, _example(item, payload, height, width, channels, fmt, self.pack_label), ""


def _results(order: list[ListItem], config: _Config, num_workers: int) -> Generator[tuple, None, None]:
    if num_workers == 1 or len(order) < 2:
        _init_worker(config)
        try:
            for item in order:
                yield _work(item)
        finally:
            _init_worker(None)  # type: ignore[arg-type]
        return
    chunksize = max(1, min(32, len(order) // (num_workers * 8)))
    ctx = multiprocessing.get_context()
    with ctx.Pool(num_workers, initializer=_init_worker, initargs=(config,)) as pool:
        yield from pool.imap(_work, order, chunksize=chunksize)


def _irecord(item: ListItem, payload: bytes, pack_label: bool) -> bytes:
    from feedline.formats.recordio import IRHeader, pack

    if pack_label and len(item.labels) > 1:
        label: Any = np.asarray(item.labels, dtype=np.float32)
    else:
        label = float(item.labels[0])
    return pack(IRHeader(0, label, item.index, 0), payload)


def _example(
    item: ListItem,
    payload: bytes,
    height: int,
    width: int,
    channels: int,
    fmt: str,
    pack_label: bool,
) -> bytes:
    from feedline.formats.example import encode_example

    labels = item.labels if pack_label else item.labels[:1]
    ints = []
    for value in labels:
        if not float(value).is_integer():
            raise ValueError(
                f"{item.path}: TFRecord `image/class/label` is int64, but label {value!r} of "
                f"list index {item.index} is not a whole number"
            )
        ints.append(int(value))
    features: dict[str, Any] = {
        "image/encoded": [payload],
        "image/format": [fmt.encode()],
        "image/class/label": ints,
        "image/height": [height],
        "image/width": [width],
        "image/filename": [item.path.encode("utf-8")],
        "image/id": [item.index],
    }
    if channels:
        features["image/channels"] = [channels]
    return encode_example(features)
