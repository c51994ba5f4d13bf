"""The fused normalise + CHW kernel (feedline.image._kernels) gives numpy's exact floats."""

from __future__ import annotations

import numpy as np
import pytest

from feedline.image import augment
from feedline.image.augment import Cast, Compose, HorizontalFlip, Normalize, RandomCrop, ToCHW


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



def _views(img: np.ndarray):
    """The layouts the kernels meet: whole, flipped in x and/or y, crops with row strides
    (flipped too), steps in x, and a non-packed channel order."""
    h, w = img.shape[:2]
    yield img
    yield img[:, ::-1]
    yield img[::-1]
    yield img[::-1, ::-1]
    if h > 2 and w > 2:
        yield img[1:-1, 1:-1]
        yield img[1:-1, -2:0:-1]
    yield img[::2, ::2]
    yield img[:, ::-2]
    yield img[:, :, ::-1]


_SHAPES = [(h, w) for w in range(1, 71) for h in (1, 2, 5)] + [(37, 53), (64, 224), (9, 96)]


@pytest.mark.parametrize("channels", [1, 2, 3, 4])
def test_hwc_to_chw_is_an_exact_copy(channels, simd):
    kernels = augment._kernels()
    rng = np.random.default_rng(channels)
    for h, w in _SHAPES:
        img = rng.integers(0, 256, (h, w, channels), dtype=np.uint8)
        for view in _views(img):
            expected = np.empty((channels, *view.shape[:2]), np.uint8)
            np.copyto(expected, view.transpose(2, 0, 1))
            got = np.full(expected.shape, 7, np.uint8)
            assert kernels.hwc_to_chw(view, got) is None
            np.testing.assert_array_equal(got, expected, err_msg=f"{view.shape} {view.strides}")


@pytest.mark.parametrize("channels", [1, 2, 3, 4])
def test_normalize_kernel_on_all_layouts(channels, simd, monkeypatch):
    rng = np.random.default_rng(10 + channels)
    mean = rng.uniform(0, 255, channels).tolist()
    std = rng.uniform(0.5, 80, channels).tolist()
    norm = Normalize(mean=mean, std=std)
    for h, w in _SHAPES:
        img = rng.integers(0, 256, (h, w, channels), dtype=np.uint8)
        for view in _views(img):
            fused = np.full((channels, *view.shape[:2]), np.nan, np.float32)
            assert norm(view, chw=True, out=fused) is fused
            with monkeypatch.context() as m:
                m.setattr(augment, "_kernels", lambda: None)
                plain = norm(view, chw=True)
            np.testing.assert_array_equal(
                fused.view(np.uint32), plain.view(np.uint32), err_msg=f"{view.shape} {view.strides}"
            )


def test_normalize_kernel_on_every_byte_value(simd, monkeypatch):
    """Each of the 256 values through each channel's scale and bias, both directions."""
    img = np.stack([np.arange(256, dtype=np.uint8)] * 3, axis=-1).reshape(4, 64, 3)
    img = np.ascontiguousarray(img)
    norm = Normalize(mean=(123.68, 116.28, 103.53), std=(58.395, 57.12, 57.375))
    for view in (img, img[:, ::-1]):
        fused = np.empty((3, 4, 64), np.float32)
        norm(view, chw=True, out=fused)
        with monkeypatch.context() as m:
            m.setattr(augment, "_kernels", lambda: None)
            plain = norm(view, chw=True)
        np.testing.assert_array_equal(fused.view(np.uint32), plain.view(np.uint32))


def test_simd_hook_switches_the_new_kernels():
    """_set_simd(False) runs the portable loops: the same results, both ways."""
    kernels = augment._kernels()
    rng = np.random.default_rng(5)
    img = rng.integers(0, 256, (31, 229, 3), dtype=np.uint8)[:, ::-1]
    results = []
    try:
        for on in (True, False):
            kernels._set_simd(on)
            u8 = np.empty((3, 31, 229), np.uint8)
            f32 = np.empty((3, 31, 229), np.float32)
            kernels.hwc_to_chw(img, u8)
            kernels.normalize_chw(img, f32, [0.1, 0.2, 0.3], [-1.0, 2.0, 0.5])
            results.append((u8, f32.view(np.uint32)))
    finally:
        kernels._set_simd(True)
    np.testing.assert_array_equal(results[0][0], results[1][0])
    np.testing.assert_array_equal(results[0][1], results[1][1])


def test_hwc_to_chw_rejects_wrong_arrays():
    kernels = augment._kernels()
    img = np.zeros((4, 5, 3), np.uint8)
    with pytest.raises(ValueError, match="uint8"):
        kernels.hwc_to_chw(img.astype(np.float32), np.empty((3, 4, 5), np.uint8))
    with pytest.raises(ValueError, match="uint8"):
        kernels.hwc_to_chw(img, np.empty((3, 4, 5), np.float32))
    with pytest.raises(ValueError, match="uint8"):
        kernels.hwc_to_chw(img[..., 0], np.empty((4, 5), np.uint8))
    with pytest.raises(ValueError, match="shape"):
        kernels.hwc_to_chw(img, np.empty((3, 5, 4), np.uint8))
    with pytest.raises(ValueError, match="1 to 4 channels"):
        kernels.hwc_to_chw(np.zeros((4, 5, 5), np.uint8), np.empty((5, 4, 5), np.uint8))
    with pytest.raises((ValueError, BufferError)):  # not C-contiguous
        kernels.hwc_to_chw(img, np.empty((5, 4, 3), np.uint8).transpose(2, 0, 1))
    readonly = np.empty((3, 4, 5), np.uint8)
    readonly.flags.writeable = False
    with pytest.raises((ValueError, BufferError)):
        kernels.hwc_to_chw(img, readonly)
    with pytest.raises(TypeError):
        kernels.hwc_to_chw(img)


@pytest.mark.parametrize("channels", [1, 3, 4])
def test_cast_into_a_batch_row_matches_copyto(channels, monkeypatch):
    """Cast("uint8") with out= (a CHW view into a C-contiguous row) gives np.copyto's bytes,
    through the kernel and without it."""
    rng = np.random.default_rng(20 + channels)
    for h, w in [(1, 1), (5, 17), (37, 53), (224, 224)]:
        img = rng.integers(0, 256, (h, w, channels), dtype=np.uint8)
        for view in _views(img):
            chw = view.transpose(2, 0, 1)
            batch = np.zeros((2, *chw.shape), np.uint8)
            row = batch[1]
            assert Cast("uint8")(chw, out=row) is row
            np.testing.assert_array_equal(batch[1], chw)
            assert not batch[0].any()
            with monkeypatch.context() as m:
                m.setattr(augment, "_kernels", lambda: None)
                plain = np.empty_like(batch[1])
                Cast("uint8")(chw, out=plain)
            np.testing.assert_array_equal(batch[1], plain)


def test_cast_uses_the_kernel_for_chw_views(monkeypatch):
    calls = []
    real = augment._kernels()

    class Spy:
        def hwc_to_chw(self, src, dst):
            calls.append(src.strides)
            return real.hwc_to_chw(src, dst)

    monkeypatch.setattr(augment, "_kernels", lambda: Spy())
    img = np.arange(4 * 6 * 3, dtype=np.uint8).reshape(4, 6, 3)
    out = np.empty((3, 4, 6), np.uint8)
    Cast("uint8")(img[:, ::-1].transpose(2, 0, 1), out=out)
    assert calls == [(18, -3, 1)]
    np.testing.assert_array_equal(out, img[:, ::-1].transpose(2, 0, 1))
    Cast("uint8")(np.ascontiguousarray(out), out=np.empty_like(out))  # already CHW: copyto
    Cast("uint8")(img.transpose(2, 0, 1), out=np.empty((3, 4, 6), np.float32))  # not uint8
    assert len(calls) == 1


def test_a_uint8_chain_into_a_batch_matches_the_chain_without(monkeypatch):
    rng = np.random.default_rng(4)
    img = rng.integers(0, 256, (60, 70, 3), dtype=np.uint8)
    aug = Compose([RandomCrop(48), HorizontalFlip(), ToCHW(), Cast("uint8")])
    fused = np.zeros((6, 3, 48, 48), np.uint8)
    for i in range(6):
        aug(img, seed=1, index=i, out=fused[i])
    monkeypatch.setattr(augment, "_kernels", lambda: None)
    plain = np.stack([aug(img, seed=1, index=i) for i in range(6)])
    np.testing.assert_array_equal(fused, plain)


def test_a_chain_ending_in_tochw_copies_into_out_with_the_kernel(monkeypatch):
    """Compose's own final copy into ``out=`` (no trailing Cast) takes the kernel too."""
    calls = []
    real = augment._kernels()

    class Spy:
        def __getattr__(self, name):
            return getattr(real, name)

        def hwc_to_chw(self, src, dst):
            calls.append(src.shape)
            return real.hwc_to_chw(src, dst)

    rng = np.random.default_rng(5)
    img = rng.integers(0, 256, (40, 50, 3), dtype=np.uint8)
    chain = Compose([RandomCrop(24), HorizontalFlip(p=1.0), ToCHW()])
    with monkeypatch.context() as m:
        m.setattr(augment, "_kernels", lambda: Spy())
        fast = chain(img, seed=1, out=np.empty((3, 24, 24), np.uint8))
    assert calls == [(24, 24, 3)]
    with monkeypatch.context() as m:
        m.setattr(augment, "_kernels", lambda: None)
        slow = chain(img, seed=1, out=np.empty((3, 24, 24), np.uint8))
    np.testing.assert_array_equal(fast, slow)
