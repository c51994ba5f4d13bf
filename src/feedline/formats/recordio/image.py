"""MXNet image records: ``IRHeader``, ``pack``/``unpack``, ``pack_img``/``unpack_img`` (see
:mod:`feedline.recordio`)."""

from __future__ import annotations

import io
import numbers
import struct
from typing import Any, NamedTuple

import numpy as np

from feedline._internal.optional import require
from feedline._internal.validate import one_of
from feedline.exceptions import DecodeError

__all__ = ["IRHeader", "pack", "unpack", "pack_img", "unpack_img"]


# --------------------------------------------------------------------------- image records


class IRHeader(NamedTuple):
    """Header of an MXNet image record (``mxnet.recordio.IRHeader``).

    ``flag``: 0 for a scalar ``label``; the number of labels when ``label`` is an array.
    ``label``: a float, or a float32 array when ``flag > 0``. ``id``/``id2``: the record
    id (low and high 64 bits).

    >>> h = IRHeader(flag=0, label=3.0, id=7, id2=0)
    >>> unpack(pack(h, b"payload"))
    (IRHeader(flag=0, label=3.0, id=7, id2=0), b'payload')
    >>> multi, _ = unpack(pack(IRHeader(0, [1.0, 2.0], 8, 0), b""))
    >>> multi.flag, multi.label.tolist()
    (2, [1.0, 2.0])
    """

    flag: int
    label: Any
    id: int
    id2: int


_IR = struct.Struct("<IfQQ")


def pack(header: IRHeader | tuple, payload: bytes) -> bytes:
    """Prefix ``payload`` with the packed ``header``, as ``mxnet.recordio.pack``.

    Args:
        header: an :class:`IRHeader` or a ``(flag, label, id, id2)`` tuple. A numeric
            ``label`` is stored in the header with ``flag=0`` (whatever ``flag`` says); any
            other label is stored as float32 values after the header, the header carrying
            ``flag=label.size`` and ``label=0``.
        payload: the bytes after the header (usually an encoded image), bytes-like.

    >>> pack(IRHeader(0, 3.0, 7, 0), b"img").hex()
    '000000000000404007000000000000000000000000000000696d67'
    >>> unpack(pack(IRHeader(0, [1, 2], 7, 0), b""))[0].flag
    2
    """
    flag, label, rid, rid2 = IRHeader(*header)
    if isinstance(label, numbers.Number):
        flag = 0
        prefix = b""
    else:
        labels = np.asarray(label, dtype="<f4")
        flag = int(labels.size)
        label = 0.0
        prefix = labels.tobytes()
    return _IR.pack(flag, float(label), int(rid), int(rid2)) + prefix + bytes(payload)


def unpack(record: bytes) -> tuple[IRHeader, bytes]:
    """Split an image record into its :class:`IRHeader` and payload (``mxnet.recordio.unpack``).

    With ``flag > 0`` the header's ``label`` is a float32 array of ``flag`` values.

    Args:
        record: one image record, bytes-like; one shorter than its header (and labels)
            raises :class:`~feedline.exceptions.DecodeError`.

    >>> h, body = unpack(pack(IRHeader(0, [4.0, 2.0], 100, 0), b"jpeg"))
    >>> h.flag, h.label.tolist(), h.id, body
    (2, [4.0, 2.0], 100, b'jpeg')
    """
    if not isinstance(record, bytes):
        record = bytes(record)
    if len(record) < _IR.size:
        raise DecodeError(f"an IRHeader needs {_IR.size} bytes, the record has {len(record)}")
    flag, label, rid, rid2 = _IR.unpack_from(record)
    body = record[_IR.size :]
    if flag > 0:
        if len(body) < 4 * flag:
            raise DecodeError(
                f"IRHeader flag {flag} announces {flag} float32 labels ({4 * flag} bytes), "
                f"the record has {len(body)} bytes after the header"
            )
        label = np.frombuffer(body, dtype="<f4", count=flag).astype(np.float32)
        body = body[4 * flag :]
    return IRHeader(flag, label, rid, rid2), body


_JPEG_FORMATS = (".jpg", ".jpeg")
_PNG_FORMATS = (".png",)


def pack_img(
    header: IRHeader | tuple,
    img: np.ndarray,
    *,
    quality: int = 95,
    img_fmt: str = ".jpg",
    color_order: str = "rgb",
) -> bytes:
    """Encode ``img`` and :func:`pack` it.

    JPEG (4:2:0 subsampling as OpenCV uses) is encoded with simplejpeg, PNG with Pillow
    (both from ``pip install 'feedline[image]'``). The encoded bytes are valid images but
    not byte-identical to OpenCV's.

    Args:
        header: an :class:`IRHeader` or a ``(flag, label, id, id2)`` tuple, as
            :func:`pack` takes it.
        img: a uint8 array of shape ``HxW``, ``HxWx1`` or ``HxWx3`` (another dtype raises
            ``TypeError``, another shape ``ValueError``).
        quality: an int in ``[0, 100]`` (else ``ValueError``), default 95. For JPEG the
            quality (0 counts as 1); for PNG the zlib level (values above 9 count as 9,
            as in OpenCV).
        img_fmt: ``".jpg"`` (the default), ``".jpeg"`` or ``".png"``, any case; anything
            else raises ``ValueError``.
        color_order: ``"rgb"`` (the default) means ``img`` is RGB; ``"bgr"`` means it is
            BGR as OpenCV arrays are, what ``mxnet.recordio.pack_img`` expects.

    >>> import numpy as np
    >>> img = np.zeros((4, 6, 3), np.uint8); img[..., 0] = 255
    >>> h, out = unpack_img(pack_img(IRHeader(0, 1.0, 0, 0), img, img_fmt=".png"))
    >>> out.shape, out[0, 0].tolist()
    ((4, 6, 3), [255, 0, 0])
    """
    color_order = one_of("color_order", color_order, ("rgb", "bgr"))
    fmt = img_fmt.lower() if isinstance(img_fmt, str) else img_fmt
    one_of("img_fmt", fmt, _JPEG_FORMATS + _PNG_FORMATS)
    if isinstance(quality, bool) or not isinstance(quality, int) or not 0 <= quality <= 100:
        raise ValueError(f"`quality` must be an int in [0, 100], got {quality!r}")
    arr = np.asarray(img)
    if arr.dtype != np.uint8:
        raise TypeError(f"`img` must be a uint8 array, got dtype {arr.dtype}")
    if arr.ndim == 3 and arr.shape[2] == 1:
        arr = arr[:, :, 0]
    if not (arr.ndim == 2 or (arr.ndim == 3 and arr.shape[2] == 3)):
        raise ValueError(f"`img` must have shape HxW, HxWx1 or HxWx3, got {arr.shape}")
    if arr.ndim == 3 and color_order == "bgr":
        arr = arr[:, :, ::-1]
    arr = np.ascontiguousarray(arr)
    if fmt in _JPEG_FORMATS:
        simplejpeg = require("simplejpeg", extra="image")
        if arr.ndim == 2:
            data = simplejpeg.encode_jpeg(
                arr[:, :, None], quality=max(quality, 1), colorspace="GRAY"
            )
        else:
            data = simplejpeg.encode_jpeg(
                arr, quality=max(quality, 1), colorspace="RGB", colorsubsampling="420"
            )
    else:
        image = require("PIL.Image", extra="image")
        buf = io.BytesIO()
        image.fromarray(arr).save(buf, format="PNG", compress_level=min(quality, 9))
        data = buf.getvalue()
    return pack(header, data)


def unpack_img(record: bytes, *, color_order: str = "rgb") -> tuple[IRHeader, np.ndarray]:
    """:func:`unpack` a record and decode its image to an ``HxWx3`` uint8 array.

    Grayscale images are expanded to three channels and alpha is dropped (OpenCV's
    ``IMREAD_COLOR``, what ``ImageRecordIter`` uses). Decoding is
    :func:`feedline.image.decode` (JPEG through libjpeg-turbo with OpenCV's accurate DCT
    and upsampling, other formats through Pillow).

    Args:
        record: one image record; an undecodable payload raises
            :class:`~feedline.exceptions.DecodeError`.
        color_order: ``"rgb"`` (the default) or ``"bgr"``. MXNet's ``unpack_img`` decodes
            with OpenCV, which yields **BGR**; pass ``"bgr"`` for arrays identical to
            MXNet's.

    >>> import numpy as np
    >>> img = np.zeros((2, 3, 3), np.uint8); img[..., 2] = 200      # blue in RGB
    >>> record = pack_img(IRHeader(0, 5.0, 1, 0), img, img_fmt=".png")
    >>> header, rgb = unpack_img(record)
    >>> header.label, rgb.shape, rgb[0, 0].tolist()
    (5.0, (2, 3, 3), [0, 0, 200])
    >>> unpack_img(record, color_order="bgr")[1][0, 0].tolist()   # MXNet's (OpenCV) order
    [200, 0, 0]
    """
    color_order = one_of("color_order", color_order, ("rgb", "bgr"))
    header, data = unpack(record)
    return header, _decode_image(data, color_order)


def _decode_image(data: bytes, color_order: str) -> np.ndarray:
    from feedline.image.codec import decode

    arr = decode(data, mode="RGB")
    return np.ascontiguousarray(arr[:, :, ::-1]) if color_order == "bgr" else arr
