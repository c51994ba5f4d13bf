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
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from feedline._internal.option_groups import regroup
from feedline._internal.validate import UNSET, one_of
from feedline.exceptions import DecodeError

__all__ = ["decode_sample", "DecodeOptions", "DECODERS", "IMAGE_EXTENSIONS"]

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


@dataclass(frozen=True, kw_only=True)
class DecodeOptions:
    """Which fields of a sample a reader decodes, and how (:func:`decode_sample`'s
    options): the ``decode`` argument of :func:`~feedline.webdataset.read` and
    :class:`~feedline.webdataset.IndexedTarShards`, where ``decode=True`` is
    ``DecodeOptions()`` and ``decode=["jpg", "cls"]`` is
    ``DecodeOptions(fields=["jpg", "cls"])``.

    Args:
        fields: decode only the fields with these names (a sequence of strings, kept as
            a tuple); ``None`` (the default) decodes every field of a known extension.
        image_mode: what image fields decode to: ``"RGB"`` (the default, ``(H, W, 3)``)
            or ``"L"`` (grayscale, ``(H, W, 1)``).

    >>> DecodeOptions(fields=["cls"]).apply({"__key__": "k", "cls": b"3", "txt": b"hi"})
    {'__key__': 'k', 'cls': 3, 'txt': b'hi'}
    >>> DecodeOptions(image_mode="CMYK")
    Traceback (most recent call last):
    ...
    ValueError: `image_mode` must be one of 'RGB', 'L', got 'CMYK'
    """

    fields: Sequence[str] | None = None
    image_mode: str = "RGB"

    def __post_init__(self) -> None:
        fields = self.fields
        if fields is not None:
            if isinstance(fields, (str, bytes)) or not isinstance(fields, Iterable) or not all(
                    isinstance(x, str) for x in fields):
                raise TypeError(f"`fields` must be a sequence of field names or None, got {fields!r}")
            object.__setattr__(self, "fields", tuple(fields))
        one_of("image_mode", self.image_mode, ("RGB", "L"))

    def apply(self, sample: dict[str, Any]) -> dict[str, Any]:
        """``sample`` decoded with these options (a new dict, see :func:`decode_sample`).

        Args:
            sample: field name -> value, as a reader yields it.

        >>> DecodeOptions().apply({"__key__": "k", "json": b"[1]"})
        {'__key__': 'k', 'json': [1]}
        """
        return decode_sample(sample, fields=self.fields, image_mode=self.image_mode)


def decode_options(decode: Any, image_mode: Any = UNSET) -> DecodeOptions | None:
    """A reader's ``decode`` argument (``False``/``None``: no decoding, ``True``, a list of
    field names or a :class:`DecodeOptions`) as ``DecodeOptions`` or ``None``, with the
    deprecated ``image_mode`` keyword folded in (a ``DeprecationWarning`` on the reader's
    caller).

    >>> decode_options(["cls"])
    DecodeOptions(fields=('cls',), image_mode='RGB')
    >>> decode_options(False) is None
    True
    """
    if decode is None or decode is False:
        options = None
    elif decode is True:
        options = DecodeOptions()
    elif isinstance(decode, DecodeOptions):
        options = decode
    elif isinstance(decode, (list, tuple, set, frozenset)) and all(isinstance(x, str) for x in decode):
        options = DecodeOptions(fields=sorted(decode) if isinstance(decode, (set, frozenset))
                                else decode)
    else:
        raise TypeError("`decode` must be a bool, a list of field names or a DecodeOptions, "
                        f"got {decode!r}")
    if image_mode is UNSET:
        return options
    if options is None:  # nothing is decoded: the mode only needs to be a valid one
        one_of("image_mode", image_mode, ("RGB", "L"))
        warnings.warn("`image_mode` is deprecated, use `decode=DecodeOptions(image_mode=...)`",
                      DeprecationWarning, stacklevel=3)
        return None
    return regroup("decode", DecodeOptions, options, {"image_mode": image_mode}, stacklevel=4)
