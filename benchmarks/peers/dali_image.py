"""Peer side of bench_image.py: NVIDIA DALI's CPU-only pipelines on a packed ``.rec`` + ``.idx``.

Runs under the DALI peer's Python (``harness.run_peer("dali", ...)``; the environment has
``nvidia-dali-cuda120``, whose pipelines run on the CPU alone with ``device_id=None``)::

    python benchmarks/peers/dali_image.py REC IDX BATCH THREADS WORKLOAD DTYPE EPOCHS

``WORKLOAD`` ``crop``: MXNet-style, ``fn.decoders.image_crop`` (DALI's region decode of a
224x224 window at a uniformly random position) then ``crop_mirror_normalize`` (random
mirror; float32: mean/std normalise; NCHW). ``resized``: ImageNet-style,
``fn.decoders.image_random_crop`` (its RandomResizedCrop window, area 0.08-1, ratio 3/4-4/3)
+ ``fn.resize`` to 224x224 + ``crop_mirror_normalize`` (random mirror, NCHW). One warm-up
epoch, then the best of EPOCHS timed epochs; every batch is copied out as numpy. Prints
one JSON object on its last line.
"""

import json
import sys

import numpy as np
from nvidia.dali import __version__ as dali_version
from nvidia.dali import fn, pipeline_def, types
from peer_timing import best_of

MEAN = [123.68, 116.28, 103.53]
STD = [58.395, 57.12, 57.375]


def build(rec, idx, batch, threads, workload, dtype):
    @pipeline_def(batch_size=batch, num_threads=threads, device_id=None, seed=0,
                  prefetch_queue_depth=2)
    def pipe():
        jpegs, labels = fn.readers.mxnet(path=[rec], index_path=[idx], random_shuffle=False,
                                         name="reader")
        mirror = fn.random.coin_flip(probability=0.5)
        if workload == "crop":
            images = fn.decoders.image_crop(jpegs, device="cpu", output_type=types.RGB,
                                            crop=(224, 224),
                                            crop_pos_x=fn.random.uniform(range=(0.0, 1.0)),
                                            crop_pos_y=fn.random.uniform(range=(0.0, 1.0)))
        else:
            images = fn.decoders.image_random_crop(jpegs, device="cpu", output_type=types.RGB,
                                                   random_area=(0.08, 1.0),
                                                   random_aspect_ratio=(3 / 4, 4 / 3))
            images = fn.resize(images, resize_x=224, resize_y=224)
        if dtype == "float32":
            out = fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="CHW",
                                           mean=MEAN, std=STD, mirror=mirror)
        else:
            out = fn.crop_mirror_normalize(images, dtype=types.UINT8, output_layout="CHW",
                                           mirror=mirror)
        return out, labels

    p = pipe()
    p.build()
    return p


def main():
    rec, idx, batch, threads, workload, dtype, epochs = sys.argv[1:8]
    batch, threads, epochs = int(batch), int(threads), int(epochs)
    p = build(rec, idx, batch, threads, workload, dtype)
    size = p.epoch_size("reader")
    steps = -(-size // batch)

    def epoch():
        count = 0
        for _ in range(steps):
            data, _labels = p.run()
            arrays = data.as_array()
            count += arrays.shape[0]
        return min(count, size)

    best, images = best_of(epochs, epoch)  # one warm-up epoch, then the best
    shape = list(np.asarray(p.run()[0].as_array()).shape)
    print(json.dumps({"version": dali_version, "images": images, "seconds": best,
                      "images_per_s": images / best, "batch_shape": shape}))


if __name__ == "__main__":
    main()
