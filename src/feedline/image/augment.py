"""Image augmenters: small, picklable objects composed into one deterministic transform.

Every augmenter takes an image as a ``(H, W, C)`` array (``C`` is 1 or 3; ``uint8`` or
``float32``) and a :class:`numpy.random.Generator`, and returns a new image::

    out = augmenter(img, rng)

Deterministic augmenters ignore ``rng``; random ones draw from it (a fresh unseeded
generator when ``rng`` is ``None``). Augmenters never modify their input in place, but
may return a *view* of it (crops and flips are slices), so the result can share memory
with the input until a later step copies.

:class:`Compose` chains augmenters and makes them reproducible: ``Compose(...)(img,
seed=s, epoch=e, index=i)`` draws every random choice from a generator seeded with
``SeedSequence([s, e, i])``, so the same record gets the same augmentation in the same
epoch of every run, whichever worker process handles it, and a different one in the next
epoch. It also runs the common tail fast: ``Normalize`` followed by ``ToCHW`` (and
``Cast("float32")``) is one numpy pass from the ``uint8`` HWC view to a ``float32`` CHW
array, and the result is always C-contiguous and writable (a flipped crop is copied
exactly once).

Channel order is whatever the decoder produced (RGB from :func:`feedline.image.decode`),
and pixel values are 0..255 until :class:`Normalize`.

>>> import numpy as np
>>> img = np.arange(6 * 8 * 3, dtype=np.uint8).reshape(6, 8, 3)
>>> aug = Compose([RandomCrop(4), HorizontalFlip(), Normalize(mean=[1, 2, 3], std=2), ToCHW()])
>>> out = aug(img, seed=7, epoch=0, index=5)
>>> out.shape, out.dtype, out.flags.c_contiguous
((3, 4, 4), dtype('float32'), True)
>>> bool((aug(img, seed=7, epoch=0, index=5) == out).all())   # same (seed, epoch, index)
True
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from feedline._internal.optional import compiled, require
from feedline._internal.validate import (
    non_negative_float,
    non_negative_int,
    one_of,
    positive_int,
    probability,
)

__all__ = [
    "Augmenter",
    "Compose",
    "Resize",
    "CenterCrop",
    "RandomCrop",
    "RandomResizedCrop",
    "HorizontalFlip",
    "ColorJitter",
    "Pad",
    "Normalize",
    "ToCHW",
    "Cast",
    "make_rng",
    "INTERPOLATIONS",
]

#: Interpolation names accepted by the resizing augmenters (Pillow's filters; when
#: shrinking, every filter but "nearest" is antialiased).
INTERPOLATIONS = ("nearest", "bilinear", "bicubic", "lanczos", "box", "hamming")

_GRAY_WEIGHTS = np.array([0.299, 0.587, 0.114], dtype=np.float32)


def make_rng(seed: int, epoch: int, index: int) -> np.random.Generator:
    """The generator :class:`Compose` uses for record ``index`` in ``epoch`` under ``seed``.

    A PCG64 generator seeded with ``SeedSequence([seed, epoch, index])``.

    Args:
        seed: the run's seed, a non-negative int.
        epoch: the epoch, a non-negative int.
        index: the record's index, a non-negative int.

    >>> a = make_rng(0, 1, 2).integers(1000); b = make_rng(0, 1, 2).integers(1000)
    >>> bool(a == b)
    True
    """
    if 0 <= seed < _WORD and 0 <= epoch < _WORD and 0 <= index < _WORD:
        # the same entropy words the list gives SeedSequence, without converting each int
        entropy: Any = np.array((seed, epoch, index), dtype=np.uint32)
    else:
        entropy = [seed, epoch, index]
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(entropy)))


_WORD = 1 << 32


def _size_pair(name: str, value: Any) -> tuple[int, int]:
    """An int ``n`` means ``(n, n)``; a pair means ``(height, width)``."""
    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            raise ValueError(f"`{name}` must be an int or a (height, width) pair, got {value!r}")
        return positive_int(f"{name}[0]", value[0]), positive_int(f"{name}[1]", value[1])
    n = positive_int(name, value)
    return n, n


def _range_pair(name: str, value: Any, *, positive: bool) -> tuple[float, float]:
    if (
        not isinstance(value, (tuple, list))
        or len(value) != 2
        or any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in value)
    ):
        raise TypeError(f"`{name}` must be a (low, high) pair of numbers, got {value!r}")
    low, high = float(value[0]), float(value[1])
    if not (0 < low <= high if positive else 0 <= low <= high) or not math.isfinite(high):
        kind = "0 < low <= high" if positive else "0 <= low <= high"
        raise ValueError(f"`{name}` must satisfy {kind}, got {value!r}")
    return low, high


def _check_out(who: str, out: np.ndarray, shape: tuple[int, ...]) -> None:
    if not isinstance(out, np.ndarray) or out.shape != shape:
        got = getattr(out, "shape", type(out).__name__)
        raise ValueError(f"{who}: `out` has shape {got}, the result has {shape}")


def _check_image(img: Any, who: str) -> np.ndarray:
    if not isinstance(img, np.ndarray) or img.ndim != 3:
        shape = getattr(img, "shape", None)
        raise ValueError(
            f"{who} expects an (H, W, C) image array, got {type(img).__name__} with shape {shape}"
        )
    return img


def _kernels() -> Any:
    return compiled("feedline.image._kernels")


#: the compiled resampler's filter numbers (``_kernels.resample``)
_KERNEL_FILTERS = {"box": 0, "bilinear": 1, "hamming": 2, "bicubic": 3, "lanczos": 4}


def _resize(
    img: np.ndarray,
    height: int,
    width: int,
    interpolation: str,
    box: tuple[float, float, float, float] | None = None,
) -> np.ndarray:
    """Resize an HWC uint8/float32 image to exactly (height, width) as Pillow's
    ``Image.resize`` does; with ``box`` (left, upper, right, lower), possibly fractional,
    resize only that region.

    uint8 images of 1 or 3 channels go through the compiled resampler where it was built
    (``_kernels.resample``: Pillow 13's algorithm bit for bit, without Pillow's copies in
    and out of its own image type); other images, and ``"nearest"``, through Pillow.
    """
    if box is None and img.shape[0] == height and img.shape[1] == width:
        return img
    kernels = _kernels()
    filter_id = _KERNEL_FILTERS.get(interpolation)
    if (kernels is not None and filter_id is not None and img.dtype == np.uint8
            and img.shape[2] in (1, 3)):
        if img.strides[2] != 1 or img.strides[1] != img.shape[2]:
            img = np.ascontiguousarray(img)
        out = np.empty((height, width, img.shape[2]), np.uint8)
        kernels.resample(img, out, (0, 0, img.shape[1], img.shape[0]) if box is None else box,
                         filter_id)
        return out
    return _pil_resize(img, height, width, interpolation, box)


def _pil_resize(
    img: np.ndarray,
    height: int,
    width: int,
    interpolation: str,
    box: tuple[float, float, float, float] | None = None,
) -> np.ndarray:
    """:func:`_resize` with Pillow itself."""
    Image = require("PIL.Image", extra="image")
    resample = getattr(Image.Resampling, interpolation.upper())
    channels = img.shape[2]
    if img.dtype == np.uint8 and channels in (1, 3):
        src = np.ascontiguousarray(img if channels == 3 else img[:, :, 0])
        out = np.asarray(Image.fromarray(src).resize((width, height), resample, box=box))
        return out if channels == 3 else out[:, :, None]
    # other dtypes/channel counts: one float32 plane at a time
    planes = [
        np.asarray(
            Image.fromarray(np.ascontiguousarray(img[:, :, c], dtype=np.float32), mode="F").resize(
                (width, height), resample, box=box
            )
        )
        for c in range(channels)
    ]
    out = np.stack(planes, axis=2)
    if img.dtype == np.uint8:
        return np.clip(np.rint(out), 0, 255).astype(np.uint8)
    return out.astype(img.dtype, copy=False)


class Augmenter:
    """Base class: ``__call__(img, rng=None)`` returns the augmented image.

    ``random`` tells :class:`Compose` whether the augmenter draws from ``rng``. Subclasses
    keep their configuration in plain attributes so that they pickle into worker
    processes and print with a readable ``repr``.

    >>> import numpy as np
    >>> class Invert(Augmenter):
    ...     _fields = ("maximum",)
    ...     def __init__(self, maximum=255): self.maximum = maximum
    ...     def __call__(self, img, rng=None): return (self.maximum - img).astype(img.dtype)
    >>> Invert(), Invert() == Invert(255)
    (Invert(maximum=255), True)
    >>> Compose([Invert(), ToCHW()])(np.zeros((2, 2, 3), np.uint8), seed=0, epoch=0, index=0)[0, 0].tolist()
    [255, 255]
    """

    random = False
    _fields: tuple[str, ...] = ()

    def __call__(self, img: np.ndarray, rng: np.random.Generator | None = None) -> np.ndarray:
        raise NotImplementedError  # pragma: no cover

    def __repr__(self) -> str:
        args = ", ".join(f"{f}={getattr(self, f)!r}" for f in self._fields)
        return f"{type(self).__name__}({args})"

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(_same(getattr(self, f), getattr(other, f)) for f in self._fields)

    __hash__ = None  # type: ignore[assignment]


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and np.array_equal(a, b)
    return a == b


class Resize(Augmenter):
    """Scale the image so that its shorter side is ``shorter_side`` pixels.

    The longer side becomes ``longer * shorter_side // shorter`` (rounded down, as MXNet's
    ``resize_short`` and torchvision's ``Resize(int)`` do); the aspect ratio is kept.
    Images are scaled up as well as down.

    Args:
        shorter_side: the shorter side's length after resizing, a positive int (else
            ``ValueError``/``TypeError``).
        interpolation: one of :data:`INTERPOLATIONS` (Pillow's filters; when
            shrinking, every filter but ``"nearest"`` is antialiased), else ``ValueError``.

    >>> import numpy as np
    >>> Resize(4)(np.zeros((8, 12, 3), np.uint8)).shape
    (4, 6, 3)
    """

    _fields = ("shorter_side", "interpolation")

    def __init__(self, shorter_side: int, *, interpolation: str = "bilinear") -> None:
        self.shorter_side = positive_int("shorter_side", shorter_side)
        self.interpolation = one_of("interpolation", interpolation, INTERPOLATIONS)

    def output_size(self, height: int, width: int) -> tuple[int, int]:
        """``(height, width)`` after resizing an image of ``(height, width)``.

        Args:
            height: the input image's height in pixels.
            width: the input image's width in pixels.
        """
        size = self.shorter_side
        if height <= width:
            return size, max(1, width * size // height)
        return max(1, height * size // width), size

    def __call__(self, img, rng=None):
        _check_image(img, "Resize")
        h, w = self.output_size(img.shape[0], img.shape[1])
        return _resize(img, h, w, self.interpolation)


class CenterCrop(Augmenter):
    """Cut the central ``size`` (int for a square, or ``(height, width)``) region.

    The offset is ``(H - height) // 2`` and ``(W - width) // 2``. The result is a view.
    An image smaller than the crop raises ``ValueError``; put :class:`Resize` or
    :class:`Pad` before the crop.

    Args:
        size: the crop's size: an int for a square, or ``(height, width)``; positive
            ints, else ``ValueError``/``TypeError``.

    >>> import numpy as np
    >>> img = np.arange(16, dtype=np.uint8).reshape(4, 4, 1)
    >>> CenterCrop(2)(img)[:, :, 0].tolist()
    [[5, 6], [9, 10]]
    """

    _fields = ("size",)

    def __init__(self, size: int | tuple[int, int]) -> None:
        self.size = _size_pair("size", size)

    def __call__(self, img, rng=None):
        _check_image(img, "CenterCrop")
        ch, cw = self.size
        h, w = img.shape[:2]
        _check_fits(self, h, w, ch, cw)
        y, x = (h - ch) // 2, (w - cw) // 2
        return img[y : y + ch, x : x + cw]

    def _planned(self, buf: Any, mode: str, rng: Any, path: Any, record: Any) -> np.ndarray:
        """Decode only the crop of JPEG ``buf`` (see :meth:`Compose.decode`)."""
        from feedline.image import codec

        height, width, _ = codec.probe(buf, path=path, index=record)
        ch, cw = self.size
        _check_fits(self, height, width, ch, cw)
        box = ((height - ch) // 2, (width - cw) // 2, ch, cw)
        return codec._probed_region(buf, box, 1, mode, height, width, path, record)


def _check_fits(aug: Augmenter, h: int, w: int, ch: int, cw: int) -> None:
    if h < ch or w < cw:
        raise ValueError(
            f"{type(aug).__name__}: image of {h}x{w} (height x width) is smaller than the "
            f"crop {ch}x{cw}; put Resize or Pad before the crop"
        )


class RandomCrop(Augmenter):
    """Cut a ``size`` region at a uniformly random position (every position equally likely).

    The offsets are ``rng.integers(0, H - height + 1)`` and ``rng.integers(0, W - width +
    1)``; the result is a view. An image smaller than the crop raises ``ValueError``.

    Args:
        size: the crop's size: an int for a square, or ``(height, width)``; positive
            ints, else ``ValueError``/``TypeError``.

    >>> import numpy as np
    >>> RandomCrop((2, 3))(np.zeros((5, 5, 3), np.uint8), np.random.default_rng(0)).shape
    (2, 3, 3)
    """

    random = True
    _fields = ("size",)

    def __init__(self, size: int | tuple[int, int]) -> None:
        self.size = _size_pair("size", size)

    def __call__(self, img, rng=None):
        _check_image(img, "RandomCrop")
        rng = np.random.default_rng() if rng is None else rng
        ch, cw = self.size
        h, w = img.shape[:2]
        _check_fits(self, h, w, ch, cw)
        y = int(rng.integers(0, h - ch + 1))
        x = int(rng.integers(0, w - cw + 1))
        return img[y : y + ch, x : x + cw]

    def _planned(self, buf: Any, mode: str, rng: Any, path: Any, record: Any) -> np.ndarray:
        """Decode only the crop of JPEG ``buf``, drawn as :meth:`__call__` draws it (see
        :meth:`Compose.decode`)."""
        from feedline.image import codec

        rng = np.random.default_rng() if rng is None else rng
        height, width, _ = codec.probe(buf, path=path, index=record)
        ch, cw = self.size
        _check_fits(self, height, width, ch, cw)
        y = int(rng.integers(0, height - ch + 1))
        x = int(rng.integers(0, width - cw + 1))
        return codec._probed_region(buf, (y, x, ch, cw), 1, mode, height, width, path, record)


class RandomResizedCrop(Augmenter):
    """Cut a random region of random area and aspect ratio, then resize it to ``size``.

    The Inception-style crop: up to 10 times, draw a fraction of the image area uniformly
    from ``scale`` and an aspect ratio (width / height) log-uniformly from ``ratio``; the
    first box of that area and ratio that fits in the image is placed uniformly at
    random. If none fits, the largest centred box whose ratio is ``ratio`` clamped is used.
    The box is then resized to ``size``. These are torchvision's ``RandomResizedCrop``
    semantics (same defaults, same rounding, same fallback); the random numbers come from
    ``rng``, not torch's generator.

    At the head of a :class:`Compose`, :meth:`Compose.decode` plans the decode: the box is
    drawn from the JPEG header's size, and a box at least twice ``size`` is decoded at
    1/2, 1/4 or 1/8 scale (see ``docs/guides/images.md`` for the tolerance).

    Args:
        size: the output size: an int for a square, or ``(height, width)``.
        scale: ``(low, high)`` range of the box's fraction of the image area, with
            ``0 < low <= high <= 1`` (else ``ValueError``).
        ratio: ``(low, high)`` range of the box's aspect ratio (width / height), with
            ``0 < low <= high`` (else ``ValueError``).
        interpolation: one of :data:`INTERPOLATIONS` (Pillow's filters; when
            shrinking, every filter but ``"nearest"`` is antialiased), else ``ValueError``.

    >>> import numpy as np
    >>> aug = RandomResizedCrop(8, scale=(0.5, 1.0))
    >>> aug(np.zeros((20, 30, 3), np.uint8), np.random.default_rng(0)).shape
    (8, 8, 3)
    """

    random = True
    _fields = ("size", "scale", "ratio", "interpolation")

    def __init__(
        self,
        size: int | tuple[int, int],
        *,
        scale: tuple[float, float] = (0.08, 1.0),
        ratio: tuple[float, float] = (3 / 4, 4 / 3),
        interpolation: str = "bilinear",
    ) -> None:
        self.size = _size_pair("size", size)
        self.scale = _range_pair("scale", scale, positive=True)
        if self.scale[1] > 1.0:
            raise ValueError(f"`scale` must lie in (0, 1], got {scale!r}")
        self.ratio = _range_pair("ratio", ratio, positive=True)
        self.interpolation = one_of("interpolation", interpolation, INTERPOLATIONS)

    def box(self, height: int, width: int, rng: np.random.Generator) -> tuple[int, int, int, int]:
        """Draw the crop box ``(y, x, h, w)`` for an image of ``(height, width)``.

        Args:
            height: the image's height in pixels.
            width: the image's width in pixels.
            rng: the generator the random choices are drawn from.
        """
        area = height * width
        log_lo, log_hi = math.log(self.ratio[0]), math.log(self.ratio[1])
        lo, span = self.scale[0], self.scale[1] - self.scale[0]
        random = rng.random
        for _ in range(10):
            # low + (high - low) * random() is exactly what Generator.uniform computes
            target = area * (lo + span * random())
            aspect = math.exp(log_lo + (log_hi - log_lo) * random())
            w = int(round(math.sqrt(target * aspect)))
            h = int(round(math.sqrt(target / aspect)))
            if 0 < w <= width and 0 < h <= height:
                y = int(rng.integers(0, height - h + 1))
                x = int(rng.integers(0, width - w + 1))
                return y, x, h, w
        aspect = width / height
        if aspect < self.ratio[0]:
            w, h = width, max(1, min(height, int(round(width / self.ratio[0]))))
        elif aspect > self.ratio[1]:
            h, w = height, max(1, min(width, int(round(height * self.ratio[1]))))
        else:
            h, w = height, width
        return (height - h) // 2, (width - w) // 2, h, w

    def __call__(self, img, rng=None):
        _check_image(img, "RandomResizedCrop")
        rng = np.random.default_rng() if rng is None else rng
        y, x, h, w = self.box(img.shape[0], img.shape[1], rng)
        return _resize(img[y : y + h, x : x + w], *self.size, self.interpolation)

    def _planned(self, buf: Any, mode: str, rng: Any, path: Any, record: Any) -> np.ndarray:
        """Decode the box of JPEG ``buf`` only, at a reduced DCT scale when the box allows,
        and resize it (see :meth:`Compose.decode`)."""
        from feedline.image import codec

        rng = np.random.default_rng() if rng is None else rng
        height, width, _ = codec.probe(buf, path=path, index=record)
        y, x, h, w = self.box(height, width, rng)
        denom = codec.dct_reduction((h, w), self.size)
        if denom == 1:
            img = codec._probed_region(buf, (y, x, h, w), 1, mode, height, width, path, record)
            return _resize(img, *self.size, self.interpolation)
        # at 1/denom scale, full-size edge e lies at e / denom: decode the whole pixels
        # that cover the box, plus the margin the resampling filter reaches into (so the
        # result is that of resizing the box out of the whole reduced image), and resize
        # the box, its fractional edges kept
        small = (-(-height // denom), -(-width // denom))
        margin = _FILTER_MARGIN
        top, left = max(y // denom - margin, 0), max(x // denom - margin, 0)
        bottom = min(-(-(y + h) // denom) + margin, small[0])
        right = min(-(-(x + w) // denom) + margin, small[1])
        img = codec._probed_region(buf, (top, left, bottom - top, right - left), denom, mode,
                                   height, width, path, record)
        box = (
            x / denom - left,
            y / denom - top,
            min((x + w) / denom, float(small[1])) - left,
            min((y + h) / denom, float(small[0])) - top,
        )
        return _resize(img, *self.size, self.interpolation, box=box)


class HorizontalFlip(Augmenter):
    """Mirror the image left-right with probability ``p`` (MXNet's ``rand_mirror``).

    Draws ``rng.random() < p`` once per call (also when ``p`` is 0 or 1, so that the
    draws of later augmenters do not depend on ``p``). The result is a view.

    Args:
        p: the probability of mirroring, a number in [0, 1] (else ``ValueError``).

    >>> import numpy as np
    >>> img = np.arange(3, dtype=np.uint8).reshape(1, 3, 1)
    >>> HorizontalFlip(p=1.0)(img)[0, :, 0].tolist()
    [2, 1, 0]
    """

    random = True
    _fields = ("p",)

    def __init__(self, p: float = 0.5) -> None:
        self.p = probability("p", p)

    def __call__(self, img, rng=None):
        _check_image(img, "HorizontalFlip")
        rng = np.random.default_rng() if rng is None else rng
        return img[:, ::-1] if rng.random() < self.p else img


class ColorJitter(Augmenter):
    """Randomly change brightness, contrast and saturation (in a random order).

    Each enabled adjustment (strength above 0) draws a factor ``a`` uniformly from
    ``[max(0, 1 - v), 1 + v]`` for its strength ``v``.

    Pixel values are on the 0..255 scale, so put this before :class:`Normalize`. The
    result has the input's dtype, clipped to [0, 255] (and rounded for ``uint8``).

    Args:
        brightness: strength ``v`` of ``img * a``; a non-negative number, 0 (the
            default) turns it off.
        contrast: strength of ``img * a + mean_gray * (1 - a)``, ``mean_gray`` the mean
            of the image's luma ``0.299 R + 0.587 G + 0.114 B``; 0 turns it off.
        saturation: strength of ``img * a + gray * (1 - a)`` with each pixel's luma
            ``gray`` (no effect on a 1-channel image); 0 turns it off.

    >>> import numpy as np
    >>> img = np.full((2, 2, 3), 100, np.uint8)
    >>> out = ColorJitter(brightness=0.5)(img, np.random.default_rng(0))
    >>> out.dtype, 50 <= int(out[0, 0, 0]) <= 150
    (dtype('uint8'), True)
    """

    random = True
    _fields = ("brightness", "contrast", "saturation")

    def __init__(self, brightness: float = 0.0, contrast: float = 0.0, saturation: float = 0.0):
        self.brightness = non_negative_float("brightness", brightness)
        self.contrast = non_negative_float("contrast", contrast)
        self.saturation = non_negative_float("saturation", saturation)

    def __call__(self, img, rng=None):
        _check_image(img, "ColorJitter")
        rng = np.random.default_rng() if rng is None else rng
        ops = [
            (name, strength)
            for name, strength in (
                ("brightness", self.brightness),
                ("contrast", self.contrast),
                ("saturation", self.saturation),
            )
            if strength > 0
        ]
        if not ops:
            return img
        out = img.astype(np.float32)
        for k in rng.permutation(len(ops)):
            name, strength = ops[int(k)]
            a = np.float32(rng.uniform(max(0.0, 1.0 - strength), 1.0 + strength))
            if name == "brightness":
                out *= a
            elif name == "contrast":
                mean = _luma(out).mean(dtype=np.float64)
                out *= a
                out += np.float32((1.0 - a) * mean)
            elif out.shape[2] == 3:
                gray = _luma(out)[:, :, None]
                out *= a
                out += gray * (np.float32(1.0) - a)
        np.clip(out, 0, 255, out=out)
        if img.dtype == np.uint8:
            return np.rint(out, out=out).astype(np.uint8)
        return out.astype(img.dtype, copy=False)


def _luma(img: np.ndarray) -> np.ndarray:
    if img.shape[2] == 1:
        return img[:, :, 0]
    return img @ _GRAY_WEIGHTS


class Pad(Augmenter):
    """Add a border of ``padding`` pixels.

    Args:
        padding: pixels on every side (an int) or ``(top, bottom, left, right)``;
            non-negative ints, else ``ValueError``/``TypeError``.
        fill: for ``"constant"``: a number or one number per channel (finite, else
            ``ValueError``); clipped to [0, 255] for ``uint8`` images.
        mode: ``"constant"`` (the default: filled with ``fill``), ``"edge"`` (repeat the
            border pixels), ``"reflect"`` (mirror without repeating the edge; the padding
            must be smaller than the image) or ``"symmetric"`` (mirror repeating the
            edge), as in :func:`numpy.pad`. Another value raises ``ValueError``.

    >>> import numpy as np
    >>> Pad((1, 0, 2, 0), fill=9)(np.zeros((1, 1, 1), np.uint8))[:, :, 0].tolist()
    [[9, 9, 9], [9, 9, 0]]
    """

    _fields = ("padding", "fill", "mode")

    def __init__(
        self, padding: int | tuple[int, int, int, int], *, fill: Any = 0, mode: str = "constant"
    ) -> None:
        if isinstance(padding, (tuple, list)):
            if len(padding) != 4:
                raise ValueError(
                    f"`padding` must be an int or (top, bottom, left, right), got {padding!r}"
                )
            self.padding = tuple(non_negative_int(f"padding[{i}]", p) for i, p in enumerate(padding))
        else:
            p = non_negative_int("padding", padding)
            self.padding = (p, p, p, p)
        self.mode = one_of("mode", mode, ("constant", "edge", "reflect", "symmetric"))
        fills = np.atleast_1d(np.asarray(fill, dtype=np.float64))
        if fills.ndim != 1 or fills.size == 0 or not np.all(np.isfinite(fills)):
            raise ValueError(f"`fill` must be a number or one number per channel, got {fill!r}")
        self.fill = fill

    def __call__(self, img, rng=None):
        _check_image(img, "Pad")
        top, bottom, left, right = self.padding
        if not any(self.padding):
            return img
        h, w, c = img.shape
        if self.mode != "constant":
            if self.mode == "reflect" and (max(top, bottom) >= h or max(left, right) >= w):
                raise ValueError(
                    f"Pad: mode 'reflect' needs padding smaller than the image ({h}x{w}), "
                    f"got {self.padding}"
                )
            return np.pad(img, ((top, bottom), (left, right), (0, 0)), mode=self.mode)
        fills = np.atleast_1d(np.asarray(self.fill))
        if fills.size not in (1, c):
            raise ValueError(f"Pad: `fill` has {fills.size} values for an image of {c} channels")
        out = np.empty((h + top + bottom, w + left + right, c), dtype=img.dtype)
        out[...] = fills.astype(img.dtype) if img.dtype != np.uint8 else np.clip(fills, 0, 255)
        out[top : top + h, left : left + w] = img
        return out


class Normalize(Augmenter):
    """``(img - mean) / std`` as ``float32``, per channel or with a mean image.

    Args:
        mean: a number, one number per channel, an ``(H, W, C)`` mean image (the size of
            the image at this point of the chain), or the path of a ``.npy`` file holding
            one; finite, else ``ValueError``.
        std: a positive number or one positive number per channel (else ``ValueError``).

    The output is HWC ``float32``; followed by :class:`ToCHW` inside :class:`Compose`, both
    run as one pass that writes the CHW result directly.

    >>> import numpy as np
    >>> img = np.full((1, 1, 3), 100, np.uint8)
    >>> Normalize(mean=[100, 50, 0], std=[1, 2, 4])(img)[0, 0].tolist()
    [0.0, 25.0, 25.0]
    """

    _fields = ("mean", "std")

    def __init__(self, mean: Any = 0.0, std: Any = 1.0) -> None:
        if isinstance(mean, (str, os.PathLike)):
            mean = np.load(os.fspath(mean), allow_pickle=False)
        mean_arr = np.asarray(mean, dtype=np.float32)
        if mean_arr.ndim == 3:
            pass  # a mean image
        elif mean_arr.ndim > 1 or mean_arr.size == 0:
            raise ValueError(
                "`mean` must be a number, one number per channel or an (H, W, C) mean image, "
                f"got an array of shape {mean_arr.shape}"
            )
        if not np.all(np.isfinite(mean_arr)):
            raise ValueError("`mean` must be finite")
        std_arr = np.asarray(std, dtype=np.float32)
        if std_arr.ndim > 1 or std_arr.size == 0 or not np.all(std_arr > 0) or not np.all(
            np.isfinite(std_arr)
        ):
            raise ValueError(f"`std` must be a positive number or one per channel, got {std!r}")
        self.mean = mean if isinstance(mean, np.ndarray) else mean_arr.tolist()
        self.std = std_arr.tolist()
        self._mean = mean_arr
        self._inv_std = (1.0 / std_arr.astype(np.float64)).astype(np.float32).reshape(-1)
        self._image_mean = mean_arr.ndim == 3
        if not self._image_mean:
            m = mean_arr.reshape(-1).astype(np.float64)
            self._bias = (-m * self._inv_std.astype(np.float64)).astype(np.float32)
        self._mean_chw: np.ndarray | None = None

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_mean_chw"] = None
        return state

    def _check(self, img: np.ndarray) -> None:
        c = img.shape[2]
        if self._image_mean:
            if self._mean.shape != img.shape:
                raise ValueError(
                    f"Normalize: mean image of shape {self._mean.shape} does not match the "
                    f"image of shape {img.shape}"
                )
        elif self._bias.size not in (1, c):
            raise ValueError(
                f"Normalize: `mean` has {self._bias.size} values for an image of {c} channels"
            )
        if self._inv_std.size not in (1, c):
            raise ValueError(
                f"Normalize: `std` has {self._inv_std.size} values for an image of {c} channels"
            )

    def __call__(self, img, rng=None, *, chw: bool = False, out: np.ndarray | None = None):
        """Normalise ``img``; with ``chw=True`` return (or fill ``out`` with) the CHW layout."""
        _check_image(img, "Normalize")
        self._check(img)
        src = img.transpose(2, 0, 1) if chw else img
        if out is None:
            out = np.empty(src.shape, dtype=np.float32)
        else:
            _check_out("Normalize", out, src.shape)
        if chw:
            inv = self._inv_std[:, None, None]
        else:
            inv = self._inv_std
        if self._image_mean:
            mean = self._mean
            if chw:
                if self._mean_chw is None:
                    self._mean_chw = np.ascontiguousarray(self._mean.transpose(2, 0, 1))
                mean = self._mean_chw
            np.subtract(src, mean, out=out, dtype=np.float32)
            out *= inv
        else:
            kernels = _kernels() if chw and img.dtype == np.uint8 else None
            if kernels is not None and out.flags.c_contiguous and out.dtype == np.float32:
                # one pass, the same float32 arithmetic (bit-identical)
                c = img.shape[2]
                kernels.normalize_chw(img, out, np.broadcast_to(self._inv_std, (c,)).tolist(),
                                      np.broadcast_to(self._bias, (c,)).tolist())
                return out
            bias = self._bias[:, None, None] if chw else self._bias
            np.multiply(src, inv, out=out, dtype=np.float32)
            out += bias
        return out

    def batch_chw(self, batch: np.ndarray, *, out: np.ndarray | None = None) -> np.ndarray:
        """Normalise a whole ``(N, C, H, W)`` batch (any dtype) to ``float32``, with the
        same arithmetic as the per-image call, so the results are bit-identical.

        Args:
            batch: an ``(N, C, H, W)`` array (another shape raises ``ValueError``).
            out: a float32 array of the batch's shape to write the result into (another
                shape raises ``ValueError``); ``None`` (the default) allocates one.

        >>> import numpy as np
        >>> batch = np.full((2, 3, 1, 1), 100, np.uint8)
        >>> Normalize(mean=[100, 50, 0], std=[1, 2, 4]).batch_chw(batch)[1, :, 0, 0].tolist()
        [0.0, 25.0, 25.0]
        """
        if not isinstance(batch, np.ndarray) or batch.ndim != 4:
            raise ValueError(
                f"Normalize.batch_chw expects an (N, C, H, W) array, got shape "
                f"{getattr(batch, 'shape', None)}"
            )
        self._check(batch[0].transpose(1, 2, 0))
        if out is None:
            out = np.empty(batch.shape, dtype=np.float32)
        else:
            _check_out("Normalize", out, batch.shape)
        inv = self._inv_std[:, None, None]
        if self._image_mean:
            if self._mean_chw is None:
                self._mean_chw = np.ascontiguousarray(self._mean.transpose(2, 0, 1))
            np.subtract(batch, self._mean_chw, out=out, dtype=np.float32)
            out *= inv
        else:
            np.multiply(batch, inv, out=out, dtype=np.float32)
            out += self._bias[:, None, None]
        return out


class ToCHW(Augmenter):
    """Reorder ``(H, W, C)`` to ``(C, H, W)``. Must be the last step of a :class:`Compose`
    (only :class:`Cast` may follow).

    >>> import numpy as np
    >>> ToCHW()(np.zeros((4, 5, 3), np.uint8)).shape
    (3, 4, 5)
    """

    def __call__(self, img, rng=None):
        _check_image(img, "ToCHW")
        return img.transpose(2, 0, 1)


class Cast(Augmenter):
    """Convert to ``dtype`` (values rounded and clipped to [0, 255] when converting
    floats to ``uint8``).

    Args:
        dtype: ``"float32"`` (the default) or ``"uint8"``, as a name or a numpy dtype;
            another raises ``ValueError``.

    >>> import numpy as np
    >>> Cast("uint8")(np.array([[[-3.0, 7.6, 300.0]]], np.float32)).tolist()
    [[[0, 8, 255]]]
    """

    _fields = ("dtype",)

    def __init__(self, dtype: Any = "float32") -> None:
        name = np.dtype(dtype).name if not isinstance(dtype, str) else dtype
        self.dtype = one_of("dtype", name, ("float32", "uint8"))

    def __call__(self, img, rng=None, *, out: np.ndarray | None = None):
        if not isinstance(img, np.ndarray):
            raise ValueError(f"Cast expects an image array, got {type(img).__name__}")
        target = np.dtype(self.dtype)
        if out is None:
            if img.dtype == target:
                return img
            out = np.empty(img.shape, dtype=target)
        else:
            _check_out("Cast", out, img.shape)
        if target == np.uint8 and img.dtype != np.uint8:
            np.copyto(out, np.clip(np.rint(img), 0, 255), casting="unsafe")
        else:
            _copy(out, img)
        return out


def _copy(out: np.ndarray, img: np.ndarray) -> None:
    """``np.copyto(out, img, casting="unsafe")``; a CHW view of a uint8 HWC image is
    copied by ``_kernels.hwc_to_chw`` in one pass (the same bytes, faster than numpy)."""
    if _chw_view(img, out) and (kernels := _kernels()) is not None:
        kernels.hwc_to_chw(img.transpose(1, 2, 0), out)
    else:
        np.copyto(out, img, casting="unsafe")


def _chw_view(img: np.ndarray, out: np.ndarray) -> bool:
    """Whether ``img`` is a uint8 ``(C, H, W)`` view of an HWC image (1 to 4 channels, the
    channel stride 1, as ``ToCHW`` leaves it, flipped or cropped) and ``out`` a C-contiguous
    uint8 array: the copy ``_kernels.hwc_to_chw`` makes."""
    return (
        img.dtype == np.uint8
        and img.ndim == 3
        and 1 <= img.shape[0] <= 4
        and img.strides[0] == 1
        and out.dtype == np.uint8
        and out.flags.c_contiguous
        and out.flags.writeable
        and not np.may_share_memory(img, out)
    )


class Compose(Augmenter):
    """Apply augmenters in order, reproducibly, with a fast fused tail.

    ``Compose(augmenters)(img, *, seed=0, epoch=0, index=0, rng=None, out=None)``:

    * random choices come from ``rng`` if given, else from :func:`make_rng` ``(seed,
      epoch, index)`` (only built when some augmenter is random);
    * ``Normalize`` immediately followed by ``ToCHW`` runs as one pass; a trailing
      ``Cast`` to the dtype already produced costs nothing;
    * the result is C-contiguous and writable; with ``out=`` (an array of the result's shape and
      dtype, e.g. one row of a batch) it is written there and ``out`` is returned.

    Args:
        augmenters: a list of augmenters, applied in order: any picklable callables
            ``f(img, rng)``; a callable that is not an :class:`Augmenter` is assumed to be
            random. ``ToCHW`` may only be followed by ``Cast`` (else ``ValueError``); a
            non-list or non-callable raises ``TypeError``.

    >>> import numpy as np
    >>> aug = Compose([CenterCrop(2), Cast("float32"), ToCHW()])
    >>> aug(np.ones((4, 4, 3), np.uint8)).shape
    (3, 2, 2)
    """

    _fields = ("augmenters",)

    def __init__(self, augmenters: Sequence[Callable]) -> None:
        if isinstance(augmenters, (str, bytes)) or not isinstance(augmenters, Sequence):
            raise TypeError(
                f"`augmenters` must be a list of augmenters, got {type(augmenters).__name__}"
            )
        augs = []
        for i, aug in enumerate(augmenters):
            if not callable(aug):
                raise TypeError(f"`augmenters[{i}]` must be callable, got {aug!r}")
            augs.append(aug)
        seen_chw = False
        for i, aug in enumerate(augs):
            if seen_chw and not isinstance(aug, Cast):
                raise ValueError(
                    f"`augmenters[{i}]` ({type(aug).__name__}) follows ToCHW; only Cast may follow "
                    "ToCHW, which must come last"
                )
            seen_chw = seen_chw or isinstance(aug, ToCHW)
        self.augmenters = augs
        self.random = any(getattr(a, "random", True) for a in augs)
        self._plan = _plan(augs)

    def decode_hints(self) -> dict[str, Any]:
        """Keyword arguments for :func:`feedline.image.decode` that do not change the
        result's shape: ``{"min_side": n}`` when the chain starts with ``Resize(n)``.

        >>> Compose([Resize(256), CenterCrop(224)]).decode_hints()
        {'min_side': 256}
        """
        if self.augmenters and isinstance(self.augmenters[0], Resize):
            return {"min_side": self.augmenters[0].shorter_side}
        return {}

    def __call__(
        self,
        img: np.ndarray,
        rng: np.random.Generator | None = None,
        *,
        seed: int = 0,
        epoch: int = 0,
        index: int = 0,
        out: np.ndarray | None = None,
    ) -> np.ndarray:
        if rng is None and self.random:
            rng = make_rng(seed, epoch, index)
        return self._run(img, rng, out, 0)

    def decode(
        self,
        buf: Any,
        *,
        mode: str = "RGB",
        plan: bool = True,
        rng: np.random.Generator | None = None,
        seed: int = 0,
        epoch: int = 0,
        index: int = 0,
        out: np.ndarray | None = None,
        path: str | None = None,
        record: int | None = None,
    ) -> np.ndarray:
        """Decode encoded image bytes and run the chain on them, with *decode planning*.

        ``plan=False`` is exactly ``self(decode(buf, mode=mode, **self.decode_hints()),
        rng, seed=seed, epoch=epoch, index=index, out=out)``. With ``plan=True`` (the
        default) the chain tells the decoder what it needs first, and the decoder does the
        cheapest sufficient work:

        * a chain that starts with :class:`RandomResizedCrop` on a JPEG: the crop box is
          drawn from the image's header size (the same random draws, so the same box, as
          without planning); when the box is at least twice the output size in both
          directions, the JPEG is decoded in the DCT domain at 1/2, 1/4 or 1/8 scale (the
          largest reduction that keeps the box at least as large as the output, see
          :func:`feedline.image.codec.dct_reduction`) and the box, mapped to that scale with
          its fractional edges kept, is resized to the output size. Otherwise the image is
          decoded at full size and the result is bit-identical to ``plan=False``;
        * any other chain decodes as with ``plan=False`` (a leading :class:`Resize`
          already decodes at a reduced scale through :meth:`decode_hints`).

        The planned result differs from full-decode-then-crop-and-resize only by the
        smoothing of the reduced-scale decode: on real photos the mean absolute difference
        is at most 1.5 levels (of 255) per pixel and channel, and at most 4 for every image
        (measured in ``tests/test_image_plan.py``). Only the box is decoded
        (:func:`feedline.image.codec.decode_region`; of a JPEG with restart markers, only
        the restart intervals that cover it); see ``docs/guides/images.md``.

        A payload that does not decode raises :class:`~feedline.exceptions.DecodeError`;
        an augmenter's ``ValueError`` becomes a ``DecodeError`` "cannot augment image of
        shape ...".

        Args:
            buf: the encoded image bytes (JPEG, PNG or whatever
                :func:`feedline.image.decode` reads).
            mode: ``"RGB"`` (the default, 3 channels) or ``"L"`` (grayscale, 1 channel).
            plan: plan the decode as described above; ``False`` decodes in full first.
            rng: the generator of the random choices; ``None`` (the default) uses
                :func:`make_rng` ``(seed, epoch, index)`` when some augmenter is random.
            seed: the run's seed, for :func:`make_rng`.
            epoch: the epoch, for :func:`make_rng`.
            index: the record's index, for :func:`make_rng`.
            out: an array of the result's shape and dtype (e.g. one row of a batch) to
                write the result into, which is then returned; ``None`` allocates.
            path: the file the image came from, named in errors.
            record: the record number of the image, named in errors.

        >>> import numpy as np, simplejpeg
        >>> jpeg = simplejpeg.encode_jpeg(np.full((600, 800, 3), 90, np.uint8))
        >>> aug = Compose([RandomResizedCrop(64), ToCHW()])
        >>> planned = aug.decode(jpeg, seed=1, index=3)
        >>> planned.shape
        (3, 64, 64)
        >>> exact = aug.decode(jpeg, seed=1, index=3, plan=False)
        >>> float(np.abs(planned.astype(int) - exact).mean()) < 1.5
        True
        """
        from feedline.exceptions import DecodeError
        from feedline.image import codec

        if rng is None and self.random:
            rng = make_rng(seed, epoch, index)
        first = self.augmenters[0] if self.augmenters else None
        start = 0
        if plan and isinstance(first, _PLANNED) and codec.image_format(buf) == "jpeg":
            try:
                img = first._planned(buf, mode, rng, path, record)
            except DecodeError:
                raise
            except ValueError as exc:
                height, width, _ = codec.probe(buf, path=path, index=record)
                raise DecodeError(
                    f"cannot augment image of shape {(height, width, codec.MODES[mode])}: "
                    f"{exc}", path=path, index=record,
                ) from exc
            start = 1
        else:
            img = codec.decode(buf, mode=mode, path=path, index=record, **self.decode_hints())
        try:
            return self._run(img, rng, out, start)
        except ValueError as exc:
            raise DecodeError(
                f"cannot augment image of shape {img.shape}: {exc}", path=path, index=record
            ) from exc

    def _run(
        self, img: np.ndarray, rng: Any, out: np.ndarray | None, start: int
    ) -> np.ndarray:
        """Run the fused steps from ``start`` on; see :meth:`__call__`."""
        steps = self._plan[start:]
        for step in steps[:-1]:
            img = step(img, rng)
        if steps:
            img = steps[-1](img, rng, out=out) if _accepts_out(steps[-1]) else steps[-1](img, rng)
        if out is not None:
            if img is not out:
                _check_out("Compose", out, img.shape)
                _copy(out, img)
            return out
        if img.flags.c_contiguous and img.flags.writeable:
            return img
        return np.array(img, order="C")


class _NormalizeCHW:
    """Normalize + ToCHW fused (internal to :class:`Compose`)."""

    def __init__(self, normalize: Normalize) -> None:
        self.normalize = normalize

    def __call__(self, img, rng=None, *, out=None):
        return self.normalize(img, chw=True, out=out)


#: Pixels (of the reduced image) decoded around a planned RandomResizedCrop box: the reach
#: of the resampling filters when the box shrinks by less than 2 (what dct_reduction
#: leaves): Lanczos' 3 pixels x 2, plus one.
_FILTER_MARGIN = 7

#: Augmenters that plan the decode at the head of a Compose (a ``_planned`` method).
_PLANNED = (RandomCrop, CenterCrop, RandomResizedCrop)


def _accepts_out(step: Any) -> bool:
    return isinstance(step, (_NormalizeCHW, Normalize, Cast))


def _plan(augs: list) -> list:
    """Fuse Normalize+ToCHW and drop Casts that cannot change anything."""
    plan: list = []
    dtype = None  # dtype known to be produced so far (None: depends on input)
    i = 0
    while i < len(augs):
        aug = augs[i]
        nxt = augs[i + 1] if i + 1 < len(augs) else None
        if isinstance(aug, Normalize) and isinstance(nxt, ToCHW):
            plan.append(_NormalizeCHW(aug))
            dtype = "float32"
            i += 2
            continue
        if isinstance(aug, Normalize):
            dtype = "float32"
        elif isinstance(aug, Cast):
            if dtype == aug.dtype:
                i += 1
                continue
            dtype = aug.dtype
        plan.append(aug)
        i += 1
    return plan
