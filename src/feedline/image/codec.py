"""Decode encoded images (JPEG, PNG, ...) into ``uint8`` arrays of shape ``(H, W, C)``.

JPEG goes through libjpeg-turbo (``simplejpeg``); every other format Pillow can read
(PNG, BMP, GIF, TIFF, WebP, ...) goes through Pillow. Both libraries belong to the ``image`` extra:
``pip install 'feedline[image]'``.

* ``mode="RGB"`` returns ``(H, W, 3)``; ``mode="L"`` returns ``(H, W, 1)`` grayscale (the
  channel axis is kept so that every augmenter sees HWC). Alpha is dropped, palettes are
  expanded. The EXIF orientation tag is ignored, as TensorFlow's ``decode_jpeg`` and
  torchvision's ``decode_jpeg`` ignore it by default: pixels come out in stored order.
* ``min_side`` / ``target_size`` are size hints for *reduced-size DCT decoding*: a JPEG is
  decoded at 1/2, 1/4 or 1/8 of its size (the power-of-two scales libjpeg-turbo decodes
  fastest; other scales are slower than a full decode) when the smaller image is still at
  least as large as asked. The result is therefore never smaller than the hint (unless
  the image itself is) and usually larger: follow with
  :class:`feedline.image.augment.Resize` for an exact size. Formats other than JPEG
  ignore the hints and decode at full size.
* A pixel budget guards against decompression bombs (a few hundred bytes whose header
  claims 30000 x 30000 pixels): the header is read first and an image with more than
  ``max_pixels`` pixels (height x width as the header states them) raises
  :class:`~feedline.exceptions.DecodeError` before any pixel buffer is allocated. The
  default is :data:`MAX_PIXELS` (89,478,485, Pillow's default); change it for the whole
  process with :func:`set_max_pixels` or per call with ``max_pixels=``.
* Every valid JPEG sampling decodes (4:4:1, a 2x2 luma with 2x1 and 1x1 chroma, ...):
  the samplings libjpeg-turbo's TurboJPEG layer does not name go through libjpeg itself
  (the extension of :func:`region_decoding`, else Pillow's), with the same pixels as
  :func:`decode_region` and Pillow.
* Data that does not decode raises :class:`~feedline.exceptions.DecodeError` naming the
  record through the optional ``path=`` and ``index=`` keywords. Skipping bad images
  (``on_error="skip"``) is a pipeline policy, not decode's.

>>> import numpy as np, simplejpeg
>>> jpeg = simplejpeg.encode_jpeg(np.zeros((64, 96, 3), np.uint8), quality=90)
>>> decode(jpeg).shape
(64, 96, 3)
>>> decode(jpeg, mode="L").shape
(64, 96, 1)
>>> decode(jpeg, min_side=16).shape          # decoded at 1/4 scale
(16, 24, 3)
>>> decode(b"not an image", path="train.rec", index=7)
Traceback (most recent call last):
...
feedline.exceptions.DecodeError: train.rec: record 7: cannot decode image: unknown image format (starts with b'not an i')
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np

from feedline._internal.optional import compiled, require
from feedline._internal.validate import one_of, optional_positive_int, positive_int
from feedline.exceptions import DecodeError

__all__ = ["decode", "decode_region", "region_decoding", "probe", "image_format",
           "dct_reduction", "add_restart_markers", "has_restart_layout",
           "require_region_decoding", "set_max_pixels",
           "MAX_PIXELS", "MODES"]

#: Output modes :func:`decode` accepts, with their channel counts.
MODES = {"RGB": 3, "L": 1}

#: Default pixel budget of :func:`decode` (height x width), Pillow's default; ``None`` means
#: no limit. Change it with :func:`set_max_pixels`.
MAX_PIXELS: int | None = 1024 * 1024 * 1024 // 4 // 3

_JPEG_MAGIC = b"\xff\xd8\xff"
_SIGNATURES = (
    (b"\x89PNG\r\n\x1a\n", "png"),
    (b"GIF87a", "gif"),
    (b"GIF89a", "gif"),
    (b"BM", "bmp"),
    (b"II*\x00", "tiff"),
    (b"MM\x00*", "tiff"),
)

_simplejpeg = None
_pil_image = None
_DEFAULT: Any = object()


def _sj():
    global _simplejpeg
    if _simplejpeg is None:
        _simplejpeg = require("simplejpeg", extra="image")
    return _simplejpeg


def _region_decoder() -> Any:
    return compiled("feedline.image._libjpeg")


def region_decoding() -> bool:
    """Whether :func:`decode_region` decodes only the region (the C extension
    ``feedline.image._libjpeg`` was built against the system's libjpeg-turbo) rather
    than decoding the whole image and cutting the region out of it (same pixels, slower).

    >>> isinstance(region_decoding(), bool)
    True
    """
    return _region_decoder() is not None


def add_restart_markers(
    buf: Any,
    *,
    interval_pixels: int = 32,
    max_pixels: int | None = _DEFAULT,
    path: str | None = None,
    index: int | None = None,
) -> bytes:
    """Rewrite a JPEG losslessly so that :func:`decode_region` can skip what a region
    does not need; other formats are returned unchanged (as ``bytes``).

    The DCT coefficients are copied, not re-quantised: the result decodes to exactly the
    pixels of ``buf``. It is a baseline JPEG with optimised Huffman tables and a restart
    marker every ``k`` MCUs, ``k`` the largest divisor of the MCUs per row that spans at
    most ``interval_pixels`` pixels (at least 1), so every MCU row starts a new restart
    interval. APPn (EXIF, ICC) and COM markers are kept. On photos the file grows by
    about 1-3 % (the optimised tables win back part of what the markers cost).

    :func:`decode_region` then splices the intervals that cover the region (plus a few
    pixels of margin) into a smaller JPEG before decoding: the rows above the region and
    the columns beside it are no longer entropy-decoded, which is most of the work left
    in a region decode. ``feedline pack --restart-markers`` (``pack_images(...,
    restart_markers=True)``) writes every JPEG this way once, at packing time; any JPEG
    that already has this layout (:func:`has_restart_layout`) is spliced as it is.

    Needs the C extension ``feedline.image._libjpeg`` (:func:`region_decoding`); without
    it, raises :class:`~feedline.exceptions.FeedlineError`. A JPEG that does not decode
    raises :class:`~feedline.exceptions.DecodeError` naming ``path``/``index``.

    Args:
        buf: the encoded image (bytes-like).
        interval_pixels: the most pixels one restart interval of an MCU row may span, a
            positive int (else ``ValueError``/``TypeError``); the interval is at least
            one MCU.
        max_pixels: the pixel budget: the rewrite holds every DCT coefficient of the
            image in memory, so a JPEG whose header states more than ``max_pixels``
            pixels raises :class:`~feedline.exceptions.DecodeError` before anything is
            read past the header. Left out, :data:`MAX_PIXELS`; ``None`` for no limit.
        path: the file the image came from, for error messages.
        index: the image's record index in that file, for error messages.

    >>> import numpy as np, simplejpeg
    >>> pixels = np.random.default_rng(0).integers(0, 255, (120, 160, 3), dtype=np.uint8)
    >>> jpeg = simplejpeg.encode_jpeg(pixels, quality=90)
    >>> marked = add_restart_markers(jpeg)
    >>> has_restart_layout(jpeg), has_restart_layout(marked)
    (False, True)
    >>> bool((decode(marked) == decode(jpeg)).all())
    True
    """
    positive_int("interval_pixels", interval_pixels)
    max_pixels = _budget(max_pixels)
    data = bytes(buf) if not isinstance(buf, bytes) else buf
    if image_format(data) != "jpeg":
        return data
    native = require_region_decoding("add_restart_markers")
    height, width, _ = _jpeg_header(data, True, path, index)
    _check_pixels(height, width, max_pixels, path, index)
    try:
        return native.add_restart_markers(data, interval_pixels)
    except ValueError as exc:
        raise DecodeError(f"cannot add restart markers: {exc}", path=path, index=index) from exc


def require_region_decoding(who: str) -> Any:
    """The extension ``feedline.image._libjpeg`` (see :func:`region_decoding`), or a
    :class:`~feedline.exceptions.FeedlineError` saying that ``who`` needs it and how to
    get it built.

    Args:
        who: what needs the extension, named in the error message.

    >>> require_region_decoding("this feature") is None
    False
    """
    native = _region_decoder()
    if native is None:
        from feedline.exceptions import FeedlineError

        raise FeedlineError(
            f"{who} needs feedline's C extension feedline.image._libjpeg, which is built "
            "when libjpeg-turbo's headers are installed (Debian: libjpeg62-turbo-dev); "
            "reinstall feedline after installing them"
        )
    return native


def has_restart_layout(buf: Any) -> bool:
    """Whether :func:`decode_region` can splice ``buf``: a baseline (sequential Huffman)
    JPEG with one scan holding every component and a restart interval that divides the
    MCUs of a row, as :func:`add_restart_markers` writes. Reads the markers only; false
    for anything else, and when the C extension is missing.

    Args:
        buf: the encoded image (bytes-like).

    >>> has_restart_layout(b"not a jpeg")
    False
    """
    native = _region_decoder()
    return native is not None and native.restart_layout(buf) is not None


def _pil():
    global _pil_image
    if _pil_image is None:
        _pil_image = require("PIL.Image", extra="image")
    return _pil_image


def image_format(buf: Any) -> str | None:
    """Name the format of encoded image bytes from their signature.

    Returns ``"jpeg"``, ``"png"``, ``"gif"``, ``"bmp"``, ``"tiff"``, ``"webp"`` or ``None``
    when the signature is not one of these (Pillow may still read it).

    Args:
        buf: the encoded image, bytes-like; only its first 12 bytes are read.

    >>> image_format(b"\\x89PNG\\r\\n\\x1a\\n....")
    'png'
    >>> image_format(b"hello") is None
    True
    """
    head = bytes(memoryview(buf)[:12])
    if head.startswith(_JPEG_MAGIC):
        return "jpeg"
    for magic, name in _SIGNATURES:
        if head.startswith(magic):
            return name
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "webp"
    return None


def probe(buf: Any, *, path: str | None = None, index: int | None = None) -> tuple[int, int, str]:
    """Return ``(height, width, format)`` of an encoded image without decoding its pixels.

    ``format`` is as in :func:`image_format` (lower case; ``"jpeg"`` for JPEG), or the
    lower-cased Pillow format name for other formats. A header that cannot be read
    raises :class:`~feedline.exceptions.DecodeError`.

    Args:
        buf: the encoded image (bytes-like).
        path: the file the image came from, for error messages.
        index: the image's record index in that file, for error messages.

    >>> import numpy as np, simplejpeg
    >>> probe(simplejpeg.encode_jpeg(np.zeros((10, 20, 3), np.uint8)))
    (10, 20, 'jpeg')
    """
    fmt = image_format(buf)
    if fmt == "jpeg":
        height, width, _ = _jpeg_header(buf, False, path, index, "cannot read image header")
        return height, width, "jpeg"
    Image = _pil()
    try:
        with Image.open(io.BytesIO(buf)) as im:
            width, height = im.size
            return int(height), int(width), (im.format or fmt or "unknown").lower()
    except Exception as exc:  # noqa: BLE001 - Pillow raises many types for bad data
        raise DecodeError(f"cannot read image header: {exc}", path=path, index=index) from exc


def set_max_pixels(max_pixels: int | None) -> int | None:
    """Set the process-wide default pixel budget of :func:`decode`; return the previous one.

    Worker processes started after the call inherit it when they are forked; a spawned
    worker starts from :data:`MAX_PIXELS` as imported, so call this in the worker's init
    too.

    Args:
        max_pixels: the budget, a positive int (height x width; else
            ``ValueError``/``TypeError``), or ``None`` for no limit.

    >>> previous = set_max_pixels(10_000)
    >>> import numpy as np, simplejpeg
    >>> decode(simplejpeg.encode_jpeg(np.zeros((200, 100, 3), np.uint8)))
    Traceback (most recent call last):
    ...
    feedline.exceptions.DecodeError: image of 200 x 100 = 20000 pixels exceeds the budget of 10000 pixels (max_pixels=)
    >>> set_max_pixels(previous)
    10000
    """
    global MAX_PIXELS
    optional_positive_int("max_pixels", max_pixels)
    old, MAX_PIXELS = MAX_PIXELS, max_pixels
    return old


def _check_pixels(height: int, width: int, budget: int | None, path, index) -> None:
    if budget is not None and height * width > budget:
        raise DecodeError(
            f"image of {height} x {width} = {height * width} pixels exceeds the budget of "
            f"{budget} pixels (max_pixels=)",
            path=path,
            index=index,
        )


def _budget(max_pixels: Any) -> int | None:
    """``max_pixels`` as given (validated), or the process default when left out."""
    if max_pixels is _DEFAULT:
        return MAX_PIXELS
    return optional_positive_int("max_pixels", max_pixels)


def _reduced_denom(height: int, width: int, min_h: int, min_w: int) -> int:
    """Largest power-of-two denominator (1 to 8) whose reduction of (height, width)
    stays >= (min_h, min_w)."""
    best = 1
    for denom in (2, 4, 8):
        if -(-height // denom) >= min_h and -(-width // denom) >= min_w:
            best = denom
        else:
            break
    return best


def _frame_size(buf: Any) -> tuple[int, int] | None:
    """(height, width) from the frame header (SOFn) of a JPEG, read marker by marker;
    ``None`` when the markers before it are malformed or it states a zero size."""
    mv = memoryview(buf).cast("B") if not isinstance(buf, bytes) else buf
    n, pos = len(mv), 2
    while pos + 4 <= n:
        if mv[pos] != 0xFF:
            return None
        marker = mv[pos + 1]
        if marker == 0xFF:  # fill byte
            pos += 1
            continue
        if marker == 0x01 or 0xD0 <= marker <= 0xD7:  # markers without a length
            pos += 2
            continue
        if marker in (0xD8, 0xD9, 0xDA):  # no frame header before the scan
            return None
        length = (mv[pos + 2] << 8) | mv[pos + 3]
        if length < 2:
            return None
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            if length < 8 or pos + 9 > n:
                return None
            height = (mv[pos + 5] << 8) | mv[pos + 6]
            width = (mv[pos + 7] << 8) | mv[pos + 8]
            return (height, width) if height and width else None
        pos += 2 + length
    return None


def _unusual_sampling(exc: Exception) -> bool:
    """Whether simplejpeg refused a JPEG only for its sampling factors: libjpeg-turbo's
    TurboJPEG layer names five samplings (4:4:4, 4:2:2, 4:2:0, 4:4:0, 4:1:1) and gives up
    on the others (a KeyError from simplejpeg's table, or "Could not determine
    subsampling level"), although libjpeg itself decodes every valid sampling."""
    return isinstance(exc, KeyError) or "subsampling" in str(exc)


def _jpeg_header(buf: Any, strict: bool, path, index,
                 what: str = "cannot decode image") -> tuple[int, int, bool]:
    """``(height, width, turbo)`` of a JPEG: ``turbo`` is false where simplejpeg cannot
    decode it for its sampling (:func:`_unusual_sampling`), the size then read from the
    frame header. A header that does not parse raises DecodeError."""
    try:
        height, width, _, _ = _sj().decode_jpeg_header(buf, strict=strict)
        return int(height), int(width), True
    except (KeyError, ValueError) as exc:
        size = _frame_size(buf) if _unusual_sampling(exc) else None
        if size is None:
            detail = f"unknown sampling factors ({exc})" if isinstance(exc, KeyError) else exc
            raise DecodeError(f"{what}: {detail}", path=path, index=index) from exc
        return size[0], size[1], False


def _turbo_exact(height: int, width: int, denom: int) -> bool:
    """Whether simplejpeg, asked for at least ``ceil(H / denom)`` x ``ceil(W / denom)``
    pixels, decodes at exactly ``1/denom``: TurboJPEG picks the largest of its scales
    ``k/8`` whose output fits, so a tiny image whose size at ``(8/denom + 1)/8`` rounds
    to the same would be decoded at that scale instead."""
    if denom == 1:
        return True
    k = 8 // denom + 1
    return (-(-height * k // 8) > -(-height // denom)
            or -(-width * k // 8) > -(-width // denom))


def _decode_jpeg(buf: Any, mode: str, denom: int, fast: bool, strict: bool,
                 size: tuple[int, int, bool] | None, path, index) -> np.ndarray:
    """A JPEG decoded at exactly ``1/denom`` scale. ``size`` is :func:`_jpeg_header`'s
    answer when it was read. simplejpeg decodes what it can; a sampling it does not
    name, and a scale it would not hit exactly, go through libjpeg itself (the
    extension, or Pillow where it is missing or for CMYK), so every path gives the same
    pixels."""
    if size is None and denom > 1:
        size = _jpeg_header(buf, strict, path, index)
    if size is None or (size[2] and _turbo_exact(size[0], size[1], denom)):
        kwargs: dict[str, Any] = {}
        if denom > 1 and size is not None:
            kwargs = {"min_height": -(-size[0] // denom), "min_width": -(-size[1] // denom)}
        try:
            return _sj().decode_jpeg(buf, colorspace="RGB" if mode == "RGB" else "GRAY",
                                     fastdct=fast, fastupsample=fast, strict=strict, **kwargs)
        except (KeyError, ValueError) as exc:
            if not _unusual_sampling(exc):
                raise DecodeError(f"cannot decode image: {exc}", path=path, index=index) from exc
        size = _jpeg_header(buf, strict, path, index)
    height, width = -(-size[0] // denom), -(-size[1] // denom)
    out = _native_region(buf, (0, 0, height, width), denom, mode, fast, strict, path, index)
    if out is not None:
        return out
    return _pillow_jpeg(buf, mode, denom, (height, width), path, index)


def _pillow_jpeg(buf: Any, mode: str, denom: int, dims: tuple[int, int], path,
                 index) -> np.ndarray:
    """A JPEG decoded by Pillow's libjpeg at exactly ``1/denom`` scale (``dims`` pixels)."""
    Image = _pil()
    try:
        with Image.open(io.BytesIO(buf)) as im:
            width, height = im.size
            # grey straight from libjpeg (the luma channel), as the other decoders give it
            im.draft("L" if mode == "L" else None,
                     (max(1, width // denom), max(1, height // denom)) if denom > 1 else None)
            if denom > 1:
                # draft's rule picks a smaller scale for images of fewer than 2 x denom
                # pixels across: set libjpeg's scale as draft itself does
                im.decoderconfig = (denom, 0)
                im._size = dims[::-1]
                d, _, offset, args = im.tile[0]
                im.tile = [type(im.tile[0])(d, (0, 0, dims[1], dims[0]), offset, args)]
            out = np.array(im.convert(mode))
    except Exception as exc:  # noqa: BLE001 - Pillow raises many types for bad data
        raise DecodeError(f"cannot decode image: {exc}", path=path, index=index) from exc
    if out.shape[:2] != dims:
        raise DecodeError(f"cannot decode image at 1/{denom} scale", path=path, index=index)
    return np.ascontiguousarray(out.reshape(dims[0], dims[1], MODES[mode]))


def decode(
    buf: Any,
    *,
    mode: str = "RGB",
    min_side: int | None = None,
    target_size: tuple[int, int] | None = None,
    fast: bool = False,
    strict: bool = True,
    max_pixels: int | None = _DEFAULT,
    path: str | None = None,
    index: int | None = None,
) -> np.ndarray:
    """Decode an encoded image into a C-contiguous, writable ``uint8`` ``(H, W, C)`` array.

    Args:
        buf: encoded bytes (``bytes``, ``bytearray``, ``memoryview`` or a 1-D ``uint8``
            array).
        mode: ``"RGB"`` (3 channels) or ``"L"`` (1 channel, grayscale).
        min_side: JPEG only: decode at a reduced power-of-two scale as long as the
            shorter side stays ``>= min_side``.
        target_size: JPEG only: ``(height, width)``; decode at a reduced power-of-two
            scale as long as height and width stay ``>=`` these. At most one of
            ``min_side`` and ``target_size``.
        fast: JPEG only: use libjpeg-turbo's fast integer DCT and fast chroma upsampling
            (a few percent faster, pixel values may differ by a few levels).
        strict: JPEG only: with ``True`` (the default) any damage libjpeg-turbo notices
            (truncated data, corrupt entropy-coded segments) raises; with ``False`` it
            recovers what it can, as OpenCV does, and the missing blocks come out grey.
            Other formats are always decoded by Pillow, which raises on truncation.
        max_pixels: pixel budget (height x width from the header, checked before any
            pixel is decoded); ``None`` for no limit; left out, :data:`MAX_PIXELS`.
        path: the file the image came from, for the error message.
        index: the image's record index in that file, for the error message.

    Raises:
        DecodeError: the bytes are not an image, are damaged (truncated, bad data) or
            have more pixels than ``max_pixels``.

    >>> import numpy as np, simplejpeg
    >>> jpeg = simplejpeg.encode_jpeg(np.zeros((300, 400, 3), np.uint8))
    >>> decode(jpeg, target_size=(100, 100)).shape   # 1/2 fits, 1/4 (75 x 100) does not
    (150, 200, 3)
    """
    one_of("mode", mode, tuple(MODES))
    optional_positive_int("min_side", min_side)
    if max_pixels is _DEFAULT:
        max_pixels = MAX_PIXELS
    else:
        optional_positive_int("max_pixels", max_pixels)
    if target_size is not None:
        if min_side is not None:
            raise ValueError("give at most one of `min_side` and `target_size`")
        if not isinstance(target_size, (tuple, list)) or len(target_size) != 2:
            raise ValueError(
                f"`target_size` must be a (height, width) pair of positive ints, got {target_size!r}"
            )
        positive_int("target_size[0]", target_size[0])
        positive_int("target_size[1]", target_size[1])
    if isinstance(buf, np.ndarray):
        if buf.dtype != np.uint8 or buf.ndim != 1:
            raise TypeError(
                f"`buf` must be bytes or a 1-D uint8 array, got an array of {buf.dtype} "
                f"with shape {buf.shape}"
            )
    elif not isinstance(buf, (bytes, bytearray, memoryview)):
        raise TypeError(f"`buf` must be bytes-like, got {type(buf).__name__}")
    if len(buf) == 0:
        raise DecodeError("cannot decode image: empty payload", path=path, index=index)

    if bytes(memoryview(buf)[:3]) != _JPEG_MAGIC:
        return _decode_pillow(buf, mode, path, index, max_pixels)
    hinted = min_side is not None or target_size is not None
    size = None
    denom = 1
    if max_pixels is not None or hinted:
        size = _jpeg_header(buf, strict, path, index)
        _check_pixels(size[0], size[1], max_pixels, path, index)
    if hinted:
        assert size is not None  # read above
        if min_side is not None:
            min_h, min_w = (min_side, 0) if size[0] <= size[1] else (0, min_side)
        else:
            assert target_size is not None  # one of the two is given (condition above)
            min_h, min_w = target_size
        denom = _reduced_denom(size[0], size[1], min_h, min_w)
    return _decode_jpeg(buf, mode, denom, fast, strict, size, path, index)


def decode_region(
    buf: Any,
    box: tuple[int, int, int, int],
    *,
    scale: int = 1,
    mode: str = "RGB",
    fast: bool = False,
    strict: bool = True,
    max_pixels: int | None = _DEFAULT,
    path: str | None = None,
    index: int | None = None,
) -> np.ndarray:
    """Decode the region ``box = (y, x, height, width)`` of an encoded image: exactly
    ``decode(buf, ...)[y:y + height, x:x + width]`` (at ``scale`` 1), as a C-contiguous
    ``(height, width, C)`` ``uint8`` array.

    A JPEG decodes only what the region needs when :func:`region_decoding` is true:
    rows above it are skipped (entropy-decoded only), rows below it are never read, and
    only the block columns that cover it (plus 4 pixels of margin, so that the chroma
    upsampling at its edges is that of the full image) go through the inverse DCT and
    colour conversion. A JPEG with restart markers laid out as :func:`add_restart_markers`
    writes them (:func:`has_restart_layout`) is first cut down to the restart intervals
    that cover the region, so that nothing else is even entropy-decoded. The pixels are
    identical to a full decode's (checked in ``tests/test_image_region.py`` and
    ``tests/test_image_restart.py``). Damage in the part of the file below the region is
    not read and so not reported; ``strict`` applies to what is read. Other formats, CMYK
    JPEGs and builds without the extension decode the whole image (at exactly
    ``1/scale``, also for images smaller than ``scale`` pixels across) and cut the
    region out.

    Args:
        buf: the encoded image (bytes-like).
        box: ``(y, x, height, width)`` ints, in pixels of the image decoded at
            ``1/scale``; a box not inside that image raises ``ValueError``.
        scale: 1 (the default), 2, 4 or 8 (else ``ValueError``); JPEG only (another
            format with a scale above 1 raises ``ValueError``). The image is decoded at
            ``1/scale`` of its size in the DCT domain (``ceil(H / scale)`` x
            ``ceil(W / scale)`` pixels, as ``decode(..., target_size=...)`` picks that
            scale).
        mode: ``"RGB"`` (3 channels) or ``"L"`` (1 channel), as in :func:`decode`.
        fast: JPEG only: the fast integer DCT and upsampling, as in :func:`decode`.
        strict: JPEG only: raise on any damage that is read, as in :func:`decode`.
        max_pixels: the pixel budget, as in :func:`decode`.
        path: the file the image came from, for error messages.
        index: the image's record index in that file, for error messages.

    >>> import numpy as np, simplejpeg
    >>> pixels = np.random.default_rng(0).integers(0, 255, (120, 160, 3), dtype=np.uint8)
    >>> jpeg = simplejpeg.encode_jpeg(pixels, quality=90)
    >>> region = decode_region(jpeg, (30, 50, 64, 48))
    >>> region.shape, bool((region == decode(jpeg)[30:94, 50:98]).all())
    ((64, 48, 3), True)
    >>> decode_region(jpeg, (0, 0, 30, 40), scale=4).shape
    (30, 40, 3)
    """
    one_of("mode", mode, tuple(MODES))
    if scale not in (1, 2, 4, 8):
        raise ValueError(f"`scale` must be 1, 2, 4 or 8, got {scale!r}")
    if not isinstance(box, (tuple, list)) or len(box) != 4 or not all(
            isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in box):
        raise ValueError(f"`box` must be (y, x, height, width) ints, got {box!r}")
    y, x, h, w = (int(v) for v in box)
    max_pixels = _budget(max_pixels)
    jpeg = image_format(buf) == "jpeg"
    if not jpeg and scale != 1:
        raise ValueError(f"`scale` applies to JPEG images only, got scale={scale}")
    if jpeg:
        size = _jpeg_header(buf, strict, path, index)
        _check_pixels(size[0], size[1], max_pixels, path, index)
        full = (-(-size[0] // scale), -(-size[1] // scale))
    else:
        img = decode(buf, mode=mode, strict=strict, max_pixels=max_pixels, path=path,
                     index=index)
        full = img.shape[:2]
    if y < 0 or x < 0 or h <= 0 or w <= 0 or y + h > full[0] or x + w > full[1]:
        raise ValueError(
            f"`box` {(y, x, h, w)} is not inside the {full[0]} x {full[1]} image"
            + (f" decoded at 1/{scale} scale" if scale > 1 else "")
        )
    if jpeg:
        out = _native_region(buf, (y, x, h, w), scale, mode, fast, strict, path, index)
        if out is not None:
            return out
        img = _decode_jpeg(buf, mode, scale, fast, strict, size, path, index)
    return np.ascontiguousarray(img[y : y + h, x : x + w])


def _probed_region(buf: Any, box: tuple[int, int, int, int], scale: int, mode: str,
                   height: int, width: int, path: str | None, index: int | None) -> np.ndarray:
    """``decode_region(buf, box, scale=scale, mode=mode, path=path, index=index)`` for a
    JPEG whose header :func:`probe` has read as ``(height, width)`` and a ``box`` its
    caller placed inside the image at ``1/scale``: the same pixels, and a
    :class:`~feedline.exceptions.DecodeError` "cannot decode image" for data that does
    not decode, without validating the arguments and reading the header a second time
    (the decode planners' path, once per image)."""
    _check_pixels(height, width, MAX_PIXELS, path, index)
    out = _native_region(buf, box, scale, mode, False, True, path, index)
    if out is None:  # no extension, or CMYK/YCCK: the public path handles those
        return decode_region(buf, box, scale=scale, mode=mode, path=path, index=index)
    return out


def _native_region(buf: Any, box: tuple[int, int, int, int], scale: int, mode: str,
                   fast: bool, strict: bool, path: str | None,
                   index: int | None) -> np.ndarray | None:
    """The region of a JPEG through the extension, or ``None`` where it cannot decode it
    (not built; CMYK/YCCK, which simplejpeg converts). Bad data raises
    :class:`~feedline.exceptions.DecodeError` "cannot decode image"."""
    native = _region_decoder()
    if native is None:
        return None
    y, x, h, w = box
    out = np.empty((h, w, MODES[mode]), dtype=np.uint8)
    try:
        native.decode_region(buf, out, y, x, h, w, scale, mode == "L", fast, strict)
    except NotImplementedError:
        return None
    except ValueError as exc:
        raise DecodeError(f"cannot decode image: {exc}", path=path, index=index) from exc
    return out


def _decode_pillow(buf, mode, path, index, max_pixels) -> np.ndarray:
    Image = _pil()
    try:
        with Image.open(io.BytesIO(buf)) as im:
            width, height = im.size
            _check_pixels(int(height), int(width), max_pixels, path, index)
            im.load()
            if im.mode in ("I;16", "I;16B", "I;16L", "I"):
                # 16-bit grayscale: keep the 8 most significant bits (Pillow would clip)
                wide = np.asarray(im).astype(np.int64)
                out = (np.clip(wide, 0, 65535) >> 8).astype(np.uint8)
                if mode == "RGB":
                    out = np.repeat(out[:, :, None], 3, axis=2)
            elif mode == "RGB":
                out = np.array(im.convert("RGB"))
            else:
                out = np.array(im.convert("L"))
    except DecodeError:
        raise
    except Exception as exc:  # noqa: BLE001 - Pillow raises many types for bad data
        if image_format(buf) is None and _is_unidentified(exc):
            head = bytes(memoryview(buf)[:8])
            message = f"cannot decode image: unknown image format (starts with {head!r})"
        else:
            message = f"cannot decode image: {exc}"
        raise DecodeError(message, path=path, index=index) from exc
    if out.ndim == 2:
        out = out[:, :, None]
    return np.ascontiguousarray(out)


def _is_unidentified(exc: Exception) -> bool:
    return type(exc).__name__ == "UnidentifiedImageError"


#: The DCT-domain scales libjpeg-turbo decodes fastest (denominators of 1/2, 1/4, 1/8).
_DCT_DENOMINATORS = (2, 4, 8)


def dct_reduction(region: tuple[int, int], size: tuple[int, int]) -> int:
    """The largest denominator ``d`` in (1, 2, 4, 8) such that a ``region`` of ``(height,
    width)`` pixels, decoded at ``1/d`` scale, still has at least ``size`` ``(height,
    width)`` pixels.

    This is the decode planning rule: DCT-domain scaling is used only when the output is
    at most half the region in both directions (``d >= 2``), so a resize always shrinks
    (never enlarges) what the reduced decode produced. ``1`` means "decode at full size".

    Args:
        region: ``(height, width)`` of the region to decode, in full-size pixels.
        size: ``(height, width)`` of the output the region is resized to.

    >>> dct_reduction((400, 300), (224, 224))   # 1/2 would give 200 x 150 rows: too few
    1
    >>> dct_reduction((480, 500), (224, 224))
    2
    >>> dct_reduction((2000, 1800), (224, 224))
    8
    """
    best = 1
    for denom in _DCT_DENOMINATORS:
        if region[0] >= size[0] * denom and region[1] >= size[1] * denom:
            best = denom
        else:
            break
    return best
