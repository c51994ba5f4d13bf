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

from feedline._internal.lazy import lazy_exports
from feedline.image.codec import decode, image_format, probe

# public name -> module that defines it (loaded on first use)
_EXPORTS = {
    "Augmenter": "feedline.image.augment",
    "Compose": "feedline.image.augment",
    "Resize": "feedline.image.augment",
    "CenterCrop": "feedline.image.augment",
    "RandomCrop": "feedline.image.augment",
    "RandomResizedCrop": "feedline.image.augment",
    "HorizontalFlip": "feedline.image.augment",
    "ColorJitter": "feedline.image.augment",
    "Pad": "feedline.image.augment",
    "Normalize": "feedline.image.augment",
    "ToCHW": "feedline.image.augment",
    "Cast": "feedline.image.augment",
    "pack_images": "feedline.image.pack",
    "PackResult": "feedline.image.pack",
    "read_list": "feedline.image.listfile",
    "write_list": "feedline.image.listfile",
    "list_folder": "feedline.image.listfile",
    "ListItem": "feedline.image.listfile",
    "ImageRecordIter": "feedline.image.record_iter",
}

__all__ = ["decode", "probe", "image_format", *_EXPORTS]


__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)
