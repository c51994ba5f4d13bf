"""The MXNet design document's Cifar iterator ("Efficient Data Loaders", section "MXNet
IO Python Interface"), as written, and the small packed dataset it reads: shared by the
tests that run it on feedline (``test_image_record_iter.py``) and under MXNet's own
``Module.fit`` (``test_mxnet_training.py``)."""

from __future__ import annotations

import pathlib

import numpy as np

PAGE_BLOCK = """
dataiter = mx.io.ImageRecordIter(
    # Dataset Parameter, indicating the data file, please check the data is already there
    path_imgrec="data/cifar/train.rec",
    # Dataset Parameter, indicating the image size after preprocessing
    data_shape=(3,28,28),
    # Batch Parameter, tells how many images in a batch
    batch_size=100,
    # Augmentation Parameter, when offers mean_img, each image will subtract the mean value at each pixel
    mean_img="data/cifar/cifar10_mean.bin",
    # Augmentation Parameter, randomly crop a patch of the data_shape from the original image
    rand_crop=True,
    # Augmentation Parameter, randomly mirror the image horizontally
    rand_mirror=True,
    # Augmentation Parameter, randomly shuffle the data
    shuffle=False,
    # Backend Parameter, preprocessing thread number
    preprocess_threads=4,
    # Backend Parameter, prefetch buffer size
    prefetch_buffer=1,
    # Optional, the device context which data loader optimized for, could be 'gpu' or 'cpu'
    ctx="gpu",
    # The out data type, could be 'float32' 'int8' or 'uint8'
    dtype="float32")
"""


def make_cifar_folder(root: pathlib.Path, *, learnable: bool = False) -> pathlib.Path:
    """120 CIFAR-sized 32x32 JPEGs in 3 class folders, packed by ``feedline pack`` into
    ``root/data/cifar/train.rec`` (+ ``.idx``), as the page's iterator expects; with
    ``learnable`` each class has one bright channel a network can learn. Returns ``root``."""
    import simplejpeg

    from feedline.image import pack_images

    rng = np.random.default_rng(0)
    folder = root / "images"
    for c in range(3):
        (folder / f"class{c}").mkdir(parents=True)
        for k in range(40):
            img = rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)
            if learnable:
                img[..., c] = 200
            (folder / f"class{c}" / f"{k}.jpg").write_bytes(
                simplejpeg.encode_jpeg(img, quality=90))
    pack_images(folder, root / "data" / "cifar" / "train")
    return root
