"""The fused normalise + CHW kernel (feedline.image._kernels) gives numpy's exact floats."""

from __future__ import annotations

import numpy as np
import pytest

from feedline.image import augment
from feedline.image.augment import Compose, HorizontalFlip, Normalize, RandomCrop, ToCHW


def test_the_extension_is_built():
    """CI builds it (it needs only a C compiler); without it numpy does the same work."""
    assert augment._kernels() is not None


@pytest.mark.parametrize(
    ("channels", "mean", "std"),
    [
        (3, (123.68, 116.28, 103.53), (58.395, 57.12, 57.375)),
        (1, 5.5, 3.3),
        (3, 10, (1, 2, 3)),
        (4, (1, 2, 3, 4), 7.0),
    ],
)
def test_kernel_is_bit_identical_to_numpy(channels, mean, std, monkeypatch):
    rng = np.random.default_rng(channels)
    img = rng.integers(0, 256, (37, 53, channels), dtype=np.uint8)
    norm = Normalize(mean=mean, std=std)
    for view in (img, img[:, ::-1], img[3:30, 5:40], img[::2, ::-3]):
        fused = np.empty((channels, *view.shape[:2]), np.float32)
        assert norm(view, chw=True, out=fused) is fused
        with monkeypatch.context() as m:
            m.setattr(augment, "_kernels", lambda: None)
            plain = norm(view, chw=True)
        np.testing.assert_array_equal(fused.view(np.uint32), plain.view(np.uint32))


def test_kernel_rejects_wrong_arrays():
    kernels = augment._kernels()
    img = np.zeros((4, 5, 3), np.uint8)
    with pytest.raises(ValueError, match="uint8"):
        kernels.normalize_chw(img.astype(np.float32), np.empty((3, 4, 5), np.float32),
                              [1.0] * 3, [0.0] * 3)
    with pytest.raises(ValueError, match="shape"):
        kernels.normalize_chw(img, np.empty((3, 5, 4), np.float32), [1.0] * 3, [0.0] * 3)
    with pytest.raises(ValueError, match="3 values"):
        kernels.normalize_chw(img, np.empty((3, 4, 5), np.float32), [1.0] * 2, [0.0] * 3)


def test_a_chain_with_the_kernel_matches_the_chain_without(monkeypatch):
    rng = np.random.default_rng(3)
    img = rng.integers(0, 256, (60, 70, 3), dtype=np.uint8)
    aug = Compose([RandomCrop(32), HorizontalFlip(), Normalize(mean=100, std=30), ToCHW()])
    fused = [aug(img, seed=1, index=i) for i in range(6)]
    monkeypatch.setattr(augment, "_kernels", lambda: None)
    plain = [aug(img, seed=1, index=i) for i in range(6)]
    for a, b in zip(fused, plain):
        np.testing.assert_array_equal(a, b)
