"""Record what PaddlePaddle's ``paddle.dataset.mnist`` / ``paddle.dataset.cifar`` reader
creators and ``paddle.reader.shuffle`` give, for ``tests/test_paddle_programs.py``.

The datasets' files are the tiny ones ``paddle_dataset_files.py`` writes (PaddlePaddle's
``reader_creator`` functions read local files; nothing is downloaded); the samples are
stored as digests of their float32 bytes. The shuffle orders are those of
``random.seed(seed)`` followed by ``passes`` calls of the same shuffled reader.

Run it under a Python that has ``paddlepaddle`` (not feedline's environment)::

    python -m venv /tmp/paddle && /tmp/paddle/bin/pip install paddlepaddle==3.3.1
    /tmp/paddle/bin/python tests/peer_outputs/make_paddle_datasets_outputs.py
"""

from __future__ import annotations

import json
import pathlib
import platform
import random
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import paddle_dataset_files as files  # noqa: E402

OUTPUT = HERE / "paddle_datasets_outputs.json"


def main() -> None:
    import paddle
    import paddle.dataset.cifar as cifar
    import paddle.dataset.mnist as mnist
    import paddle.reader

    tmp = tempfile.mkdtemp()
    files.write_mnist(tmp)
    ten, hundred = files.write_cifar(tmp)
    readers = {
        "mnist_train": mnist.reader_creator(f"{tmp}/train-images-idx3-ubyte.gz",
                                            f"{tmp}/train-labels-idx1-ubyte.gz", 7),
        "mnist_test": mnist.reader_creator(f"{tmp}/t10k-images-idx3-ubyte.gz",
                                           f"{tmp}/t10k-labels-idx1-ubyte.gz", 3),
        "cifar_train10": cifar.reader_creator(ten, "data_batch"),
        "cifar_test10": cifar.reader_creator(ten, "test_batch"),
        "cifar_train100": cifar.reader_creator(hundred, "train"),
        "cifar_test100": cifar.reader_creator(hundred, "test"),
    }
    datasets = {name: files.digest(list(reader())) for name, reader in readers.items()}

    def numbers(n):
        def reader():
            return iter(range(n))
        return reader

    shuffles = []
    for n, buf, seed, passes in files.shuffle_cases():
        random.seed(seed)
        shuffled = paddle.reader.shuffle(numbers(n), buf)
        shuffles.append({"items": n, "buf_size": buf, "seed": seed,
                         "orders": [list(shuffled()) for _ in range(passes)]})
    document = {
        "generated_by": "tests/peer_outputs/make_paddle_datasets_outputs.py",
        "paddle_version": paddle.__version__,
        "python_version": platform.python_version(),
        "datasets": datasets,
        "chunk_shuffle": shuffles,
    }
    OUTPUT.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    print(json.dumps({"written": str(OUTPUT)}))


if __name__ == "__main__":
    main()
