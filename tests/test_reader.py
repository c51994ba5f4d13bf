"""The PaddlePaddle reader API: decorators, fixed defects, the seed document's examples."""

from __future__ import annotations

import gc
import itertools

import numpy as np
import pytest

import feedline.reader as reader
from feedline import Dataset, batch
from feedline.exceptions import ComposeNotAligned

from resume_helpers import assert_resumes_everywhere


def items(*values):
    def r():
        return iter(values)

    return r


def counting(n):
    def r():
        yield from range(n)

    return r


# ------------------------------------------------------------ the decorators
def test_map_readers_zips_and_applies():
    assert list(reader.map_readers(lambda a, b: a * b, counting(4), counting(3))()) == [0, 1, 4]
    assert list(reader.map_readers(str, counting(2))()) == ["0", "1"]


def test_compose_flattens_tuples_and_checks_alignment():
    r = reader.compose(items((1, 2), (3, 4)), items("a", "b"), items((9,), (8,)))
    assert list(r()) == [(1, 2, "a", 9), (3, 4, "b", 8)]
    with pytest.raises(ComposeNotAligned, match="the inputs must have the same length"):
        list(reader.compose(counting(3), counting(2))())
    assert list(reader.compose(counting(3), counting(2), check_alignment=False)()) == [
        (0, 0),
        (1, 1),
    ]


def test_compose_accepts_none_items():
    """PaddlePaddle mistakes a None item for a reader that ended; feedline does not."""
    r = reader.compose(items(None, 1), items("x", None))
    assert list(r()) == [(None, "x"), (1, None)]


def test_chain_firstn_batch():
    assert list(reader.chain(counting(2), counting(3))()) == [0, 1, 0, 1, 2]
    assert list(reader.firstn(counting(10), 3)()) == [0, 1, 2]
    assert list(batch(counting(5), 2)()) == [[0, 1], [2, 3], [4]]
    assert list(batch(counting(5), 2, drop_last=True)()) == [[0, 1], [2, 3]]


def test_shuffle_is_a_permutation_new_each_call():
    r = reader.shuffle(counting(50), 10)
    a, b = list(r()), list(r())
    assert sorted(a) == sorted(b) == list(range(50)) and a != b
    seeded = reader.shuffle(counting(50), 10, seed=3)
    assert list(seeded()) == list(reader.shuffle(counting(50), 10, seed=3)())


def test_buffered_keeps_order_and_propagates_errors(leak_check):
    assert list(reader.buffered(counting(100), 7)()) == list(range(100))

    def broken():
        yield 1
        raise OSError("disk went away")

    with pytest.raises(OSError, match="disk went away"):
        list(reader.buffered(broken, 4)())
    leak_check.assert_clean()


def test_cache_reads_lazily_on_first_iteration():
    calls = []

    def r():
        calls.append(1)
        return iter([1, 2, 3])

    cached = reader.cache(r)
    assert calls == []
    assert list(cached()) == [1, 2, 3]
    assert list(cached()) == [1, 2, 3]
    assert calls == [1]
    assert_resumes_everywhere(cached)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: batch(counting(3), 0), "`batch_size` must be a positive int, got 0"),
        (lambda: reader.shuffle(counting(3), 0), "`buf_size` must be a positive int, got 0"),
        (lambda: reader.shuffle(counting(3), -5), "`buf_size` must be a positive int, got -5"),
        (lambda: reader.buffered(counting(3), 0), "`size` must be a positive int, got 0"),
        (lambda: reader.firstn(counting(3), -1), "`n` must be a non-negative int, got -1"),
    ],
)
def test_bad_sizes_are_rejected_at_construction(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_a_reader_that_is_not_callable_is_rejected():
    with pytest.raises(TypeError, match=r"`reader` must be callable, got list \[1, 2\]"):
        reader.shuffle([1, 2], 4)
    with pytest.raises(TypeError, match=r"`readers\[1\]` must be callable"):
        reader.compose(counting(2), 5)


def test_decorators_stop_threads_on_break(leak_check):
    r = reader.buffered(reader.shuffle(counting(100_000), 100), 10)
    it = iter(r())
    assert next(it) is not None
    del it
    gc.collect()
    leak_check.assert_clean()


# ------------------------------------------------------------ the seed document's examples
def reader_creator_random_image(width, height):
    def reader_():
        while True:
            yield np.random.uniform(-1, 1, size=width * height)

    return reader_


def reader_creator_bool(t):
    def reader_():
        while True:
            yield t

    return reader_


def test_seed_example_random_images_composed_with_real_ones():
    """Seed: PaddlePaddle's "Python Data Reader Design Doc", section "Data Reader Decorator /
    Compose Multiple Data Readers" (with preloaded arrays standing in for mnist).

    compose(mnist, random images, True, False): 5 columns per item; the feeding map
    picks columns 0, 2, 3, 4 and skips column 1 (the real label)."""
    real = Dataset.from_arrays(np.random.rand(10, 784).astype("float32"), np.arange(10))
    composed = reader.compose(
        real, reader_creator_random_image(20, 20), reader_creator_bool(True),
        reader_creator_bool(False), check_alignment=False,
    )
    feeding = {"true_image": 0, "fake_image": 2, "true_label": 3, "false_label": 4}
    batches = list(batch(composed, 4)())
    assert [len(b) for b in batches] == [4, 4, 2]
    first = batches[0][0]
    assert len(first) == 5
    picked = {name: first[col] for name, col in feeding.items()}
    assert picked["true_image"].shape == (784,)
    assert picked["fake_image"].shape == (400,)
    assert picked["true_label"] is True and picked["false_label"] is False


def test_seed_example_custom_batch_reader():
    """Seed: PaddlePaddle's "Python Data Reader Design Doc", section "Batch Reader
    Interface" (the custom batch reader, as written)."""
    def custom_batch_reader():
        while True:
            b = []
            for _ in range(128):
                b.append((np.random.uniform(-1, 1, 28 * 28),))
            yield b

    first_three = list(itertools.islice(custom_batch_reader(), 3))
    assert [len(b) for b in first_three] == [128, 128, 128]
    # a batch reader is also a reader of batches: feedline stages accept it
    ds = Dataset.from_reader(custom_batch_reader).take(2)
    assert [len(b) for b in ds] == [128, 128]


def test_seed_example_numpy_fromfile_mnist_reader_creator(tmp_path):
    """Seed: PaddlePaddle's "Python Data Reader Design Doc", section "Q & A / How to create
    custom data reader creator" (files made by the test; ``with`` instead of open/close)."""
    n = 6
    images = np.random.default_rng(0).integers(0, 256, size=(n, 28 * 28), dtype=np.uint8)
    labels = np.arange(n, dtype=np.uint8)
    images.tofile(tmp_path / "images")
    labels.tofile(tmp_path / "labels")

    def reader_creator(image_path, label_path, n):
        def reader_():
            with open(image_path, "rb") as f, open(label_path, "rb") as lf:
                imgs = np.fromfile(f, "ubyte", count=n * 28 * 28).reshape((n, 28 * 28))
                imgs = imgs.astype("float32") / 255.0 * 2.0 - 1.0
                lbls = np.fromfile(lf, "ubyte", count=n).astype("int")
            for i in range(n):
                yield imgs[i, :], lbls[i]

        return reader_

    mnist = reader_creator(tmp_path / "images", tmp_path / "labels", n)
    got = list(batch(reader.shuffle(mnist, 4, seed=1), 4)())
    assert [len(b) for b in got] == [4, 2]
    seen = sorted(int(lbl) for b in got for _, lbl in b)
    assert seen == list(range(n))
    img, lbl = next(iter(mnist()))
    assert img.shape == (784,) and img.min() >= -1.0 and img.max() <= 1.0 and lbl == 0


def _double(x):
    return 2 * x


@pytest.mark.parametrize("order", [True, False])
def test_xmap_readers_runs_in_processes_and_cleans_up_on_break(order, leak_check):
    r = reader.xmap_readers(_double, counting(200), 2, 16, order=order)
    out = list(r())
    assert (out if order else sorted(out)) == [2 * i for i in range(200)]
    it = iter(r())
    assert next(it) in range(0, 400, 2)
    del it
    gc.collect()
    r.close()
    leak_check.assert_clean()


def _fail_on_seven(x):
    if x == 7:
        raise ValueError("item 7 is bad")
    return x


def test_xmap_readers_error_reaches_the_consumer_with_its_traceback(leak_check):
    r = reader.xmap_readers(_fail_on_seven, counting(20), 2, 4, order=True)
    with pytest.raises(ValueError, match="item 7 is bad") as info:
        list(r())
    assert "_fail_on_seven" in str(info.value.__cause__)
    r.close()
    leak_check.assert_clean()
