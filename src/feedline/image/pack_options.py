"""The option groups of :func:`~feedline.image.pack_images` (``feedline pack``): small
frozen, keyword-only dataclasses, validated when built.

* :class:`EncodeOptions` — what is stored for each image: re-encoded (``resize``,
  ``center_crop``, ``encoding``, ``quality``, ``color``) or the file's own bytes
  (``pass_through``), optionally rewritten with JPEG restart markers;
* :class:`SourceOptions` — which files and labels are taken from the source: ``exts``,
  ``allow_outside_root``, ``pack_label``.

The options of the run itself (``root``, ``format``, ``num_shards``, ``shuffle``,
``seed``, ``num_workers``, ``backend``, ``on_error``, ``progress``) stay flat.

>>> EncodeOptions(resize=256, quality=90)
EncodeOptions(resize=256, center_crop=False, encoding='.jpg', quality=90, color='rgb', pass_through=False, restart_markers=False)
>>> EncodeOptions(pass_through=True, resize=256)
Traceback (most recent call last):
...
ValueError: `pass_through` keeps the original bytes: it cannot be combined with `resize`, `center_crop` or `color='gray'`
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from feedline._internal.validate import check_bool, one_of, optional_positive_int
from feedline.image.listfile import IMAGE_EXTENSIONS

__all__ = ["EncodeOptions", "SourceOptions"]

#: Encodings ``pack_images`` can re-encode to.
ENCODINGS = (".jpg", ".png")

DEFAULT_QUALITY = {".jpg": 95, ".png": 3}


def check_quality(encoding: str, quality: Any) -> int:
    """``quality`` for ``encoding`` (``None``: the encoding's default), else ``ValueError``.

    >>> check_quality(".png", None), check_quality(".jpg", 80)
    (3, 80)
    """
    if quality is None:
        return DEFAULT_QUALITY[encoding]
    low, high = (1, 100) if encoding == ".jpg" else (0, 9)
    if isinstance(quality, bool) or not isinstance(quality, int) or not low <= quality <= high:
        raise ValueError(
            f"`quality` must be an int in [{low}, {high}] for encoding {encoding!r}, got {quality!r}"
        )
    return quality


@dataclass(frozen=True, kw_only=True)
class EncodeOptions:
    """What :func:`~feedline.image.pack_images` stores for each image (im2rec's encoding
    flags).

    Args:
        resize: scale each image so that its shorter side has this many pixels (a
            positive int; ``None``: keep the size).
        center_crop: first crop the central square (side = the shorter side), as
            im2rec's ``--center-crop``.
        encoding: ``".jpg"`` or ``".png"`` for re-encoded images.
        quality: JPEG quality 1-100 (``None``: 95) or PNG zlib level 0-9 (``None``: 3).
        color: ``"rgb"`` or ``"gray"`` (re-encoded images are converted to this).
        pass_through: store each file's bytes unchanged (no decode, no re-encode); not
            allowed with ``resize``/``center_crop``/``color="gray"`` (``ValueError``).
        restart_markers: rewrite every JPEG payload (passed-through file bytes or
            re-encoded output) with :func:`feedline.image.codec.add_restart_markers`
            before it is written: a lossless rewrite (the DCT coefficients are copied,
            so the payload decodes to exactly the pixels it would have without the
            option) into a baseline JPEG with a restart marker every few MCUs (at most
            32 pixels apart, each MCU row starting a new interval), which
            :func:`~feedline.image.codec.decode_region` (``ImageRecordIter``'s decode
            plan for crops) splices so that it entropy-decodes only what a crop needs:
            region decoding gets faster, files grow by about 1-3 %. PNG and other formats
            are stored unchanged, as are the labels, ids and ``image/height``/``width``.
            Needs the C extension ``feedline.image._libjpeg``: without it
            :func:`~feedline.image.pack_images` raises
            :class:`~feedline.exceptions.FeedlineError` before any file is written. A
            JPEG that cannot be rewritten (it does not decode; with ``pass_through`` such
            a file would otherwise be stored as it is) is handled by ``on_error`` like an
            undecodable image, the ``DecodeError`` naming the file.

    >>> EncodeOptions(encoding=".png").quality is None       # PNG's default level, 3
    True
    >>> EncodeOptions(encoding=".png", quality=50)
    Traceback (most recent call last):
    ...
    ValueError: `quality` must be an int in [0, 9] for encoding '.png', got 50
    """

    resize: int | None = None
    center_crop: bool = False
    encoding: str = ".jpg"
    quality: int | None = None
    color: str = "rgb"
    pass_through: bool = False
    restart_markers: bool = False

    def __post_init__(self) -> None:
        optional_positive_int("resize", self.resize)
        check_bool("center_crop", self.center_crop)
        one_of("encoding", self.encoding, ENCODINGS)
        check_quality(self.encoding, self.quality)
        one_of("color", self.color, ("rgb", "gray"))
        check_bool("pass_through", self.pass_through)
        check_bool("restart_markers", self.restart_markers)
        if self.pass_through and (self.resize or self.center_crop or self.color != "rgb"):
            raise ValueError(
                "`pass_through` keeps the original bytes: it cannot be combined with "
                "`resize`, `center_crop` or `color='gray'`"
            )


@dataclass(frozen=True, kw_only=True)
class SourceOptions:
    """Which files and labels :func:`~feedline.image.pack_images` takes from its source.

    Args:
        exts: file name endings taken as images in a folder source (matched without
            regard to case); a ``.lst`` source lists its files itself.
        allow_outside_root: read images whose path leaves the image root (an absolute
            path, ``..``, a symbolic link pointing elsewhere); by default such an image is
            refused with ``PermissionError`` (skipped under ``on_error="skip"``).
        pack_label: store every label of a multi-label ``.lst`` line (``IRHeader.flag`` =
            number of labels), not only the first.

    >>> SourceOptions(exts=[".jpg"]).exts
    ('.jpg',)
    >>> SourceOptions(exts=".jpg")
    Traceback (most recent call last):
    ...
    TypeError: `exts` must be a sequence of file name endings such as ('.jpg', '.png'), got '.jpg'
    """

    exts: Sequence[str] = IMAGE_EXTENSIONS
    allow_outside_root: bool = False
    pack_label: bool = False

    def __post_init__(self) -> None:
        exts = self.exts
        if isinstance(exts, (str, bytes)) or not isinstance(exts, Sequence) or not all(
                isinstance(e, str) for e in exts):
            raise TypeError("`exts` must be a sequence of file name endings such as "
                            f"('.jpg', '.png'), got {exts!r}")
        object.__setattr__(self, "exts", tuple(exts))
        check_bool("allow_outside_root", self.allow_outside_root)
        check_bool("pack_label", self.pack_label)
