"""PaddlePaddle's ``paddle.dataset`` readers over files you already have.

``paddle.dataset.mnist.train()`` and ``paddle.dataset.cifar.train10()`` download their
data on first use; feedline never downloads at run time. Each reader creator here reads
local files instead and returns a reader (a random-access :class:`~feedline.Dataset`)
whose samples have PaddlePaddle's layout:

==============================  ===========================================================
reader creator                  samples
==============================  ===========================================================
``mnist.train(directory)``      ``(float32 (784,) in [-1, 1], int label)`` from the MNIST IDX
``mnist.test(directory)``       files in ``directory``; without ``directory``, the 8x8 digits
                                scikit-learn ships (``(64,)`` vectors; ``feedline[demo]``)
``cifar.train10(path)``         ``(float32 (3072,) in [0, 1], int label)`` from the CIFAR
``cifar.test10(path)``          ``python`` tarball at ``path`` (``cifar-10-python.tar.gz``,
``cifar.train100(path)``        ``cifar-100-python.tar.gz``; fine labels for CIFAR-100)
``cifar.test100(path)``
==============================  ===========================================================

>>> import feedline
>>> from feedline.datasets import mnist
>>> train = mnist.train()                    # scikit-learn's digits: no directory given
>>> image, label = train[0]
>>> image.dtype, image.shape, float(image.min()) >= -1.0, type(label).__name__
(dtype('float32'), (64,), True, 'int')
>>> batches = feedline.batch(train, 128)     # the reader design's batch reader
>>> len(next(iter(batches())))
128
"""

from feedline.datasets import cifar, mnist

__all__ = ["mnist", "cifar"]
