"""The pieces of ``feedline demo``: data, pipelines, network, plots.

The demo is the README's main job, end to end on a real dataset available offline —
the 1,797 handwritten digits (8x8 pixels) that scikit-learn ships, standing in for the
PaddlePaddle seeds' MNIST (``--mnist DIR`` uses real MNIST IDX files):

1. :mod:`feedline.demo.data` packs the training images into sharded MXNet RecordIO
   files (with ``.idx`` indexes; an ``IRHeader`` carries the label) and the test images
   into sharded TFRecord files of ``tf.train.Example`` protos;
2. :mod:`feedline.demo.pipeline` streams them back: shuffled file list, interleaved
   shards, a shuffle buffer, decoding in worker processes, batching and prefetching;
3. :mod:`feedline.demo.network` is the seeds' network — fc 200, fc 200, softmax 10,
   Adam — as a :func:`feedline.train.network`;
4. :mod:`feedline.cli.demo` trains it with the runner (progress bar, a test every pass,
   checkpoints, CSV logs), prints a summary with the pipeline's per-stage timing, and
   :mod:`feedline.demo.plot` draws the loss and accuracy curves.

Needs ``pip install 'feedline[demo]'``.
"""

__all__: list[str] = []
