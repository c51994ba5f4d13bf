"""Decoding the fields of a WebDataset sample, by extension.

The decoder looks at the last dot-separated part of each field's extension
(``"seg.png"`` -> ``png``), as the webdataset package's automatic decoder does:

============================================ =============================================
extension                                    value
============================================ =============================================
``json``, ``jsn``                            ``json.loads`` of the UTF-8 text
``cls``, ``cls2``, ``class``, ``count``,      ``int`` of the ASCII text
``index``, ``inx``, ``id``
``txt``, ``text``, ``transcript``            ``str`` (UTF-8)
``npy``                                      ``numpy.load`` (pickles refused)
``jpg``, ``jpeg``, ``png``, ``ppm``, ``pgm``, ``uint8`` array ``(H, W, C)`` from
``pbm``, ``bmp``, ``webp``, ``tif``, ``tiff`` :func:`feedline.image.decode` (``image_mode``)
============================================ =============================================

Other fields, and ``__key__``/``__url__``, are left as they are. A field that does not
decode raises :class:`~feedline.exceptions.DecodeError` naming the sample key and field.

>>> decode_sample({"__key__": "a", "cls": b"7", "json": b'{"x": 1}', "bin": b"\\x00"})
{'__key__': 'a', 'cls': 7, 'json': {'x': 1}, 'bin': b'\\x00'}
>>> decode_sample({"__key__": "a", "cls": b"7", "txt": b"hi"}, fields=["txt"])
{'__key__': 'a', 'cls': b'7', 'txt': 'hi'}
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterable
from typing import Any

from feedline.exceptions import DecodeError

__all__ = ["decode_sample", "DECODERS", "IMAGE_EXTENSIONS"]

IMAGE_EXTENSIONS = frozenset("jpg jpeg png ppm pgm pbm bmp webp tif tiff".split())


def _npy(data: bytes) -> Any:
    """An ``.npy`` field; a header that promises more bytes than the field holds is
    refused before any array is allocated for it."""
    import numpy as np

    f = io.BytesIO(data)
    version = np.lib.format.read_magic(f)
    read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                   else np.lib.format.read_array_header_2_0)
    shape, _, dtype = read_header(f)
    count = 1
    for n in shape:
        count *= n
    need = count * dtype.itemsize
    if need > len(data) - f.tell():
        raise ValueError(f".npy header promises {need} bytes of {dtype} {shape}, the field "
                         f"holds {len(data) - f.tell()}")
    f.seek(0)
    return np.load(f, allow_pickle=False)


def _text(data: bytes) -> str:
    return bytes(data).decode("utf-8")


DECODERS: dict[str, Callable[[Any], Any]] = {}
"""Extension -> decoder for the non-image fields."""
for _names, _fn in (
    ("json jsn", lambda d: json.loads(d)),
    ("cls cls2 class count index inx id", lambda d: int(bytes(d).decode("ascii"))),
    ("txt text transcript", _text),
    ("npy", _npy),
):
    for _n in _names.split():
        DECODERS[_n] = _fn


def decode_sample(sample: dict[str, Any], *, fields: Iterable[str] | None = None,
                  image_mode: str = "RGB") -> dict[str, Any]:
    """Return a new sample with the known fields decoded (see the module docstring).

    Args:
        sample: field name -> value; ``bytes``-like values of known extensions are
            decoded, the rest (and ``__key__``/``__url__``) copied as they are. The input
            is not changed. A field that does not decode raises
            :class:`~feedline.exceptions.DecodeError` naming the sample key and field.
        fields: decode only the fields with these names; ``None`` (the default) decodes
            every field of a known extension.
        image_mode: passed to :func:`feedline.image.decode` for image fields: ``"RGB"``
            (the default) or ``"L"``.

    >>> raw = {"__key__": "k", "json": b"[1, 2]", "cls": b"3", "txt": b"hi"}
    >>> decode_sample(raw)
    {'__key__': 'k', 'json': [1, 2], 'cls': 3, 'txt': 'hi'}
    >>> decode_sample(raw, fields=["cls"])["cls"], raw["cls"]          # a new dict; the input is unchanged
    (3, b'3')
    """
    wanted = None if fields is None else set(fields)
    out: dict[str, Any] = {}
    for name, value in sample.items():
        if name.startswith("__") or not isinstance(value, (bytes, bytearray, memoryview)) or (
                wanted is not None and name not in wanted):
            out[name] = value
            continue
        last = name.rsplit(".", 1)[-1]
        try:
            if last in IMAGE_EXTENSIONS:
                from feedline.image import decode

                out[name] = decode(value, mode=image_mode)
            elif last in DECODERS:
                out[name] = DECODERS[last](value)
            else:
                out[name] = value
        except DecodeError:
            raise
        except Exception as exc:
            raise DecodeError(
                f"sample {sample.get('__key__')!r}: field {name!r} does not decode: {exc}",
                path=sample.get("__url__"),
            ) from exc
    return out
