"""ArrayPool hands an array out again only when nothing outside the pool refers to it,
and ImageRecordIter's batches (drawn from such a pool on the decode-thread backend) stay
intact for as long as the consumer holds them."""

from __future__ import annotations

import hashlib
import threading

import numpy as np
import pytest

from feedline._internal.array_pool import ArrayPool


def test_a_dropped_array_is_reused_and_a_held_one_never():
    pool = ArrayPool(keep=4)
    a = pool.take((4, 5), np.float32)
    address = a.ctypes.data
    b = pool.take((4, 5), np.float32)
    assert b.ctypes.data != address
    del a
    c = pool.take((4, 5), np.float32)
    assert c.ctypes.data == address and pool.reused == 1
    assert c.shape == (4, 5) and c.dtype == np.float32


@pytest.mark.parametrize("holder", ["view", "list", "memoryview", "torch"])
def test_anything_that_refers_to_an_array_keeps_it_out_of_reuse(holder):
    pool = ArrayPool(keep=4)
    a = pool.take((8,), np.uint8)
    address = a.ctypes.data
    if holder == "view":
        kept = a[2:]
    elif holder == "list":
        kept = [a]
    elif holder == "memoryview":
        kept = memoryview(a)
    else:
        torch = pytest.importorskip("torch", reason="pip install torch")
        kept = torch.from_numpy(a)
    del a
    for _ in range(3):
        assert pool.take((8,), np.uint8).ctypes.data != address
    del kept
    assert pool.take((8,), np.uint8).ctypes.data == address


def test_shape_and_dtype_must_match_and_keep_bounds_what_is_kept():
    pool = ArrayPool(keep=2)
    a = pool.take((3,), np.float32)
    address = a.ctypes.data
    del a
    assert pool.take((3,), np.float64).ctypes.data != address  # another dtype: a new array
    held = [pool.take((5,), np.uint8) for _ in range(4)]      # beyond keep: not kept
    assert len(pool._arrays) <= 2
    del held
    with pytest.raises(ValueError, match="`keep` must be a positive int, got 0"):
        ArrayPool(keep=0)


def test_threads_taking_at_once_never_share_an_array():
    pool = ArrayPool(keep=8)
    seen: list[int] = []
    lock = threading.Lock()
    errors = []

    def work():
        for _ in range(200):
            arrays = [pool.take((16,), np.int64) for _ in range(3)]
            addresses = [x.ctypes.data for x in arrays]
            if len(set(addresses)) != 3:
                errors.append(addresses)
            for x in arrays:
                x[:] = threading.get_ident()
            for x in arrays:
                if not (x == threading.get_ident()).all():
                    errors.append("overwritten while held")
            with lock:
                seen.extend(addresses)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert pool.reused > 0


def test_image_batches_held_by_the_consumer_are_never_overwritten(tmp_path):
    sklearn_datasets = pytest.importorskip("sklearn.datasets", reason="pip install scikit-learn")
    simplejpeg = pytest.importorskip("simplejpeg", reason="pip install 'feedline[image]'")
    from feedline.image import EncodeOptions, ImageRecordIter, pack_images
    from feedline.image.listfile import ListItem, write_list

    photo = sklearn_datasets.load_sample_images().images[0]
    items = []
    for i in range(40):
        y, x = 3 * i, 5 * i
        data = simplejpeg.encode_jpeg(np.ascontiguousarray(photo[y:y + 48, x:x + 48]), quality=90)
        (tmp_path / f"{i}.jpg").write_bytes(data)
        items.append(ListItem(i, (float(i),), f"{i}.jpg"))
    write_list(tmp_path / "all.lst", items)
    packed = pack_images(tmp_path / "all.lst", tmp_path / "all", root=tmp_path,
                         encode=EncodeOptions(pass_through=True))
    it = ImageRecordIter(path_imgrec=packed.files[0], data_shape=(3, 32, 32), batch_size=4,
                         rand_crop=True, rand_mirror=True, mean_r=120.0, std_r=50.0,
                         preprocess_threads=2, backend="thread", shuffle=True, seed=3)

    def digest(array) -> str:
        return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()

    with it:
        held = [batch.data[0] for batch in it]               # epoch 0, every batch kept
        before = [digest(a) for a in held]
        for _ in range(3):                                   # more epochs, batches dropped
            for batch in it:
                assert batch.data[0].dtype == np.float32
        assert [digest(a) for a in held] == before           # nothing overwrote a held batch
        assert len({a.ctypes.data for a in held}) == len(held)
        first_pass = [digest(batch.data[0]) for batch in it]  # batches dropped as we go
        second = [digest(batch.data[0]) for batch in it]
        assert it._decoder._pool.reused > 0                  # dropped batches were refilled
    assert len(first_pass) == len(second) == 10
