"""Peer side of bench_image.py: ``mx.io.ImageRecordIter`` on a packed ``.rec`` + ``.idx``.

Runs under the MXNet peer's Python (``harness.run_peer("mxnet", ...)``)::

    python benchmarks/peers/mxnet_image.py REC IDX BATCH THREADS DTYPE EPOCHS

decode + random crop 224 + random mirror (+ mean/std normalisation for float32) + batch,
``preprocess_threads=THREADS``; one warm-up epoch, then the best of EPOCHS timed epochs.
Every batch is waited for (``wait_to_read``), since MXNet computes asynchronously. Prints one
JSON object on its last line.
"""

import json
import sys

import mxnet as mx
from peer_timing import best_of

MEAN = (123.68, 116.28, 103.53)
STD = (58.395, 57.12, 57.375)


def main():
    rec, idx, batch, threads, dtype, epochs = sys.argv[1:7]
    batch, threads, epochs = int(batch), int(threads), int(epochs)
    kwargs = dict(
        path_imgrec=rec, path_imgidx=idx, data_shape=(3, 224, 224), batch_size=batch,
        rand_crop=True, rand_mirror=True, preprocess_threads=threads, prefetch_buffer=4,
        shuffle=False, round_batch=False, dtype=dtype, verbose=False,
    )
    if dtype == "float32":
        kwargs.update(mean_r=MEAN[0], mean_g=MEAN[1], mean_b=MEAN[2],
                      std_r=STD[0], std_g=STD[1], std_b=STD[2])
    it = mx.io.ImageRecordIter(**kwargs)

    def epoch():
        it.reset()
        count = 0
        for b in it:
            b.data[0].wait_to_read()
            count += b.data[0].shape[0] - b.pad
        return count

    best, images = best_of(epochs, epoch)  # one warm-up epoch, then the best
    print(json.dumps({"version": mx.__version__, "images": images, "seconds": best,
                      "images_per_s": images / best}))


if __name__ == "__main__":
    main()
