"""Images: decode, augment, pack (im2rec) and read packed image datasets.

* :func:`decode` (:mod:`feedline.image.codec`): JPEG through libjpeg-turbo with
  reduced-size DCT decoding, other formats through Pillow;
* augmenters (:mod:`feedline.image.augment`): ``Resize``, ``CenterCrop``, ``RandomCrop``,
  ``RandomResizedCrop``, ``HorizontalFlip``, ``ColorJitter``, ``Pad``, ``Normalize``,
  ``ToCHW``, ``Cast``, chained reproducibly by ``Compose``; ``Compose.decode(jpeg, ...)``
  decodes and augments with *decode planning* (a ``RandomResizedCrop`` box at least twice
  the output is decoded at 1/2, 1/4 or 1/8 DCT scale);
* :func:`pack_images` (:mod:`feedline.image.pack`, CLI ``feedline pack``): MXNet's im2rec,
  into RecordIO or TFRecord shards; ``.lst`` files in :mod:`feedline.image.listfile`;
* :class:`ImageRecordIter` (:mod:`feedline.image.record_iter`): MXNet's iterator as a
  configured :class:`feedline.Dataset` pipeline.

Needs the ``image`` extra (``pip install 'feedline[image]'``: simplejpeg, Pillow), imported
only when an image is decoded or encoded; the other names load lazily on first use.

>>> from feedline.image import decode, Compose, RandomCrop, HorizontalFlip
>>> import numpy as np
>>> aug = Compose([RandomCrop(2), HorizontalFlip()])
>>> aug(np.zeros((4, 4, 3), np.uint8), seed=0, epoch=0, index=0).shape
(2, 2, 3)
"""

from __future__ import annotations

from feedline._internal.lazy import attach_stub

# decoding is eager: it is what the package is imported for
from feedline.image.codec import decode as decode
from feedline.image.codec import image_format as image_format
from feedline.image.codec import probe as probe

# the lazy names are declared once, in __init__.pyi (what type checkers read)
__getattr__, __dir__, _lazy = attach_stub(globals())

__all__ = list(_lazy)
