"""feedline.image.augment: shapes, crop bounds, determinism, normalisation values, pickling."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest

pytest.importorskip("PIL.Image")
sklearn_datasets = pytest.importorskip("sklearn.datasets")

from feedline.image.augment import (  # noqa: E402
    Cast,
    CenterCrop,
    ColorJitter,
    Compose,
    HorizontalFlip,
    Normalize,
    Pad,
    RandomCrop,
    RandomResizedCrop,
    Resize,
    ToCHW,
    make_rng,
)

MEAN = [123.68, 116.28, 103.53]
STD = [58.395, 57.12, 57.375]


@pytest.fixture(scope="module")
def photo() -> np.ndarray:
    """A real photograph, 427 x 640 RGB uint8."""
    return sklearn_datasets.load_sample_images().images[1]


def coords(h: int, w: int) -> np.ndarray:
    """An image whose pixel (y, x) holds (y, x, y + x): crops reveal where they came from."""
    y, x = np.mgrid[:h, :w]
    return np.dstack([y, x, y + x]).astype(np.int32)


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


# ---------------------------------------------------------------------------- Resize
@pytest.mark.parametrize(
    ("shape", "size", "expected"),
    [
        ((427, 640, 3), 256, (256, 383, 3)),  # 640 * 256 // 427
        ((640, 427, 3), 256, (383, 256, 3)),
        ((100, 100, 1), 32, (32, 32, 1)),
        ((20, 30, 3), 60, (60, 90, 3)),  # scales up too
    ],
)
def test_resize_shorter_side(shape, size, expected):
    img = np.full(shape, 77, np.uint8)
    out = Resize(size)(img)
    assert out.shape == expected and out.dtype == np.uint8
    assert (out == 77).all()  # a flat image stays flat under every filter


def test_resize_real_photo_keeps_content(photo):
    small = Resize(107, interpolation="box")(photo)
    assert small.shape == (107, 160, 3)
    # box filtering by ~4 is close to 4x4 block means
    blocks = photo[:424, :640].reshape(106, 4, 160, 4, 3).mean((1, 3))
    assert np.abs(small[:106].astype(float) - blocks).mean() < 8


def test_resize_float_and_validation():
    out = Resize(4)(np.full((8, 12, 3), 0.5, np.float32))
    assert out.shape == (4, 6, 3) and out.dtype == np.float32
    np.testing.assert_allclose(out, 0.5, atol=1e-6)
    with pytest.raises(ValueError, match=r"`shorter_side` must be a positive int, got 0"):
        Resize(0)
    with pytest.raises(ValueError, match=r"`interpolation` must be one of .*got 'cubic'"):
        Resize(10, interpolation="cubic")
    with pytest.raises(ValueError, match=r"Resize expects an \(H, W, C\) image array"):
        Resize(10)(np.zeros((4, 4), np.uint8))


# ---------------------------------------------------------------------------- crops
def test_center_crop_values_and_view():
    img = coords(7, 10)
    out = CenterCrop((3, 4))(img)
    assert out.shape == (3, 4, 3)
    assert (out[0, 0, 0], out[0, 0, 1]) == (2, 3)  # (7-3)//2, (10-4)//2
    assert np.shares_memory(out, img)
    assert CenterCrop(7)(coords(7, 7)).shape == (7, 7, 3)


def test_crops_reject_small_images():
    with pytest.raises(
        ValueError,
        match=r"CenterCrop: image of 5x9 \(height x width\) is smaller than the crop 6x6; "
        r"put Resize or Pad before the crop",
    ):
        CenterCrop(6)(np.zeros((5, 9, 3), np.uint8))
    with pytest.raises(ValueError, match=r"RandomCrop: image of 4x4 .* smaller than the crop 2x5"):
        RandomCrop((2, 5))(np.zeros((4, 4, 3), np.uint8), rng())
    with pytest.raises(ValueError, match=r"`size` must be an int or a \(height, width\) pair"):
        CenterCrop((1, 2, 3))
    with pytest.raises(TypeError, match=r"`size\[0\]` must be a positive int, got 2.5"):
        RandomCrop((2.5, 2))


def test_random_crop_bounds_and_coverage():
    img = coords(6, 9)
    seen = set()
    for seed in range(400):
        out = RandomCrop((4, 5))(img, rng(seed))
        y, x = int(out[0, 0, 0]), int(out[0, 0, 1])
        assert 0 <= y <= 2 and 0 <= x <= 4
        np.testing.assert_array_equal(out, img[y : y + 4, x : x + 5])
        seen.add((y, x))
    assert seen == {(y, x) for y in range(3) for x in range(5)}  # every position reachable


def test_random_crop_is_a_view_and_deterministic(photo):
    a = RandomCrop(224)(photo, rng(5))
    b = RandomCrop(224)(photo, rng(5))
    assert np.shares_memory(a, photo)
    np.testing.assert_array_equal(a, b)


def test_random_resized_crop_box_respects_scale_and_ratio():
    aug = RandomResizedCrop(32, scale=(0.2, 0.6), ratio=(0.5, 2.0))
    for seed in range(300):
        y, x, h, w = aug.box(120, 200, rng(seed))
        assert 0 <= y and y + h <= 120 and 0 <= x and x + w <= 200
        assert 0.2 * 0.9 <= h * w / (120 * 200) <= 0.6 * 1.1
        assert 0.5 * 0.9 <= w / h <= 2.0 * 1.1


def test_random_resized_crop_draws_as_generator_uniform():
    """The box's draws are torchvision's sequence written with Generator.uniform: the
    same boxes (a change here would change every seeded epoch)."""

    def reference(aug, height, width, gen):
        area = height * width
        lo, hi = math.log(aug.ratio[0]), math.log(aug.ratio[1])
        for _ in range(10):
            target = area * gen.uniform(aug.scale[0], aug.scale[1])
            aspect = math.exp(gen.uniform(lo, hi))
            w, h = int(round(math.sqrt(target * aspect))), int(round(math.sqrt(target / aspect)))
            if 0 < w <= width and 0 < h <= height:
                return int(gen.integers(0, height - h + 1)), int(gen.integers(0, width - w + 1)), h, w
        return None

    for aug in (RandomResizedCrop(8), RandomResizedCrop(8, scale=(0.3, 0.9), ratio=(0.2, 5.0))):
        for seed in range(2000):
            want = reference(aug, 90 + seed % 300, 400 - seed % 250, rng(seed))
            if want is not None:
                assert aug.box(90 + seed % 300, 400 - seed % 250, rng(seed)) == want


def test_make_rng_is_seed_sequence_of_the_three_ints():
    for triple in [(0, 0, 0), (3, 1, 7), (2**32 - 1, 5, 2**32 - 1), (2**32, 0, 1), (1, 2**40, 3)]:
        want = np.random.Generator(np.random.PCG64(np.random.SeedSequence(list(triple))))
        assert np.array_equal(make_rng(*triple).integers(1 << 62, size=8),
                              want.integers(1 << 62, size=8))


def test_random_resized_crop_fallback_is_central():
    # no box of ratio 1 and the whole area fits a 10 x 100 image: the central box
    aug = RandomResizedCrop(8, scale=(1.0, 1.0), ratio=(1.0, 1.0))
    assert aug.box(10, 100, rng()) == (0, 45, 10, 10)
    assert RandomResizedCrop(8, scale=(1.0, 1.0), ratio=(0.5, 20)).box(10, 100, rng()) == (
        0,
        0,
        10,
        100,
    )


def test_random_resized_crop_output(photo):
    img = coords(60, 80).astype(np.uint8)
    out = RandomResizedCrop((16, 24))(img, rng(3))
    assert out.shape == (16, 24, 3) and out.dtype == np.uint8
    real = RandomResizedCrop(224)(photo, rng(1))
    assert real.shape == (224, 224, 3)
    np.testing.assert_array_equal(real, RandomResizedCrop(224)(photo, rng(1)))
    with pytest.raises(ValueError, match=r"`scale` must lie in \(0, 1\], got \(0.5, 1.5\)"):
        RandomResizedCrop(8, scale=(0.5, 1.5))
    with pytest.raises(ValueError, match=r"`ratio` must satisfy 0 < low <= high, got \(2, 1\)"):
        RandomResizedCrop(8, ratio=(2, 1))
    with pytest.raises(TypeError, match=r"`scale` must be a \(low, high\) pair of numbers"):
        RandomResizedCrop(8, scale=0.5)


# ---------------------------------------------------------------------------- flip
def test_horizontal_flip_probabilities():
    img = coords(2, 5)
    never = HorizontalFlip(p=0.0)
    always = HorizontalFlip(p=1.0)
    for seed in range(20):
        np.testing.assert_array_equal(never(img, rng(seed)), img)
        np.testing.assert_array_equal(always(img, rng(seed)), img[:, ::-1])
    flips = sum(HorizontalFlip()(img, rng(s))[0, 0, 1] == 4 for s in range(1000))
    assert 430 < flips < 570
    assert np.shares_memory(always(img, rng()), img)
    with pytest.raises(ValueError, match=r"`p` must be a number in \[0, 1\], got 1.5"):
        HorizontalFlip(p=1.5)


# ---------------------------------------------------------------------------- color jitter
def test_color_jitter_brightness_range():
    img = np.full((3, 3, 3), 100, np.uint8)
    values = {int(ColorJitter(brightness=0.4)(img, rng(s))[0, 0, 0]) for s in range(200)}
    assert min(values) >= 60 and max(values) <= 140
    assert len(values) > 30


def test_color_jitter_contrast_keeps_mean_and_saturation_keeps_gray(photo):
    crop = photo[:64, :64]
    out = ColorJitter(contrast=0.5)(crop.astype(np.float32), rng(1))
    luma = np.array([0.299, 0.587, 0.114], np.float32)
    before, after = (crop.astype(np.float32) @ luma).mean(), (out @ luma).mean()
    assert abs(before - after) < 1.0 or out.max() == 255 or out.min() == 0
    gray = np.repeat(crop[:, :, :1], 3, axis=2)
    np.testing.assert_array_equal(ColorJitter(saturation=0.9)(gray, rng(2)), gray)


def test_color_jitter_dtype_clip_and_identity():
    img = np.array([[[250, 10, 128]]], np.uint8)
    out = ColorJitter(brightness=3.0)(img, rng(4))
    assert out.dtype == np.uint8
    assert ColorJitter()(img, rng()) is img
    f = ColorJitter(brightness=0.5, contrast=0.5, saturation=0.5)(img.astype(np.float32), rng(0))
    assert f.dtype == np.float32 and f.min() >= 0 and f.max() <= 255
    with pytest.raises(ValueError, match=r"`contrast` must be a non-negative number, got -0.1"):
        ColorJitter(contrast=-0.1)


# ---------------------------------------------------------------------------- pad
def test_pad_constant_per_channel_and_modes():
    img = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
    out = Pad((1, 2, 3, 0), fill=(7, 8, 9))(img)
    assert out.shape == (5, 6, 3)
    np.testing.assert_array_equal(out[1:3, 3:], img)
    assert out[0, 0].tolist() == [7, 8, 9] and out[4, 5].tolist() == [7, 8, 9]
    edge = Pad(1, mode="edge")(img)
    np.testing.assert_array_equal(edge[0, 1:4], img[0])
    np.testing.assert_array_equal(Pad(1, mode="reflect")(img)[0, 1:4], img[1])
    assert Pad(0)(img) is img


def test_pad_validation():
    with pytest.raises(ValueError, match=r"`padding` must be an int or \(top, bottom, left, right\)"):
        Pad((1, 2))
    with pytest.raises(ValueError, match=r"`padding\[2\]` must be a non-negative int, got -1"):
        Pad((0, 0, -1, 0))
    with pytest.raises(ValueError, match=r"`mode` must be one of .* got 'wrap'"):
        Pad(1, mode="wrap")
    with pytest.raises(ValueError, match=r"Pad: `fill` has 2 values for an image of 3 channels"):
        Pad(1, fill=(1, 2))(np.zeros((2, 2, 3), np.uint8))
    with pytest.raises(ValueError, match=r"Pad: mode 'reflect' needs padding smaller than"):
        Pad(2, mode="reflect")(np.zeros((2, 2, 3), np.uint8))


# ---------------------------------------------------------------------------- normalise
def test_normalize_per_channel_values(photo):
    crop = photo[:8, :8]
    out = Normalize(mean=MEAN, std=STD)(crop)
    expected = (crop.astype(np.float64) - MEAN) / STD
    assert out.dtype == np.float32 and out.shape == (8, 8, 3)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
    scalar = Normalize(mean=127.5, std=127.5)(crop)
    np.testing.assert_allclose(scalar, crop / 127.5 - 1.0, atol=1e-6)


def test_normalize_mean_image_array_and_file(tmp_path, photo):
    crop = photo[:6, :5]
    mean_img = np.random.default_rng(0).uniform(0, 255, (6, 5, 3)).astype(np.float32)
    np.save(tmp_path / "mean.npy", mean_img)
    for mean in (mean_img, tmp_path / "mean.npy", str(tmp_path / "mean.npy")):
        out = Normalize(mean=mean, std=2.0)(crop)
        np.testing.assert_allclose(out, (crop - mean_img) / 2.0, rtol=1e-5, atol=1e-4)
    with pytest.raises(ValueError, match=r"mean image of shape \(6, 5, 3\) does not match .*\(4, 4, 3\)"):
        Normalize(mean=mean_img)(photo[:4, :4])


def test_normalize_validation():
    with pytest.raises(ValueError, match=r"`std` must be a positive number or one per channel"):
        Normalize(mean=0, std=[1, 0, 1])
    with pytest.raises(ValueError, match=r"`mean` must be a number, one number per channel or an"):
        Normalize(mean=np.zeros((2, 3)))
    with pytest.raises(ValueError, match=r"Normalize: `mean` has 3 values for an image of 1 channels"):
        Normalize(mean=MEAN)(np.zeros((2, 2, 1), np.uint8))


def test_to_chw_and_cast():
    img = coords(2, 3)
    chw = ToCHW()(img)
    assert chw.shape == (3, 2, 3)
    np.testing.assert_array_equal(chw[1], img[:, :, 1])
    assert Cast("uint8")(np.array([[[-3.0, 7.5, 8.5, 300.0]]], np.float32)).tolist() == [
        [[0, 8, 8, 255]]
    ]
    u8 = np.zeros((1, 1, 1), np.uint8)
    assert Cast(np.uint8)(u8) is u8
    assert Cast("float32")(u8).dtype == np.float32
    with pytest.raises(ValueError, match=r"`dtype` must be one of 'float32', 'uint8', got 'float64'"):
        Cast("float64")


# ---------------------------------------------------------------------------- compose
def train_chain() -> Compose:
    return Compose([RandomCrop(224), HorizontalFlip(), Normalize(MEAN, STD), ToCHW()])


def test_compose_fused_tail_equals_step_by_step(photo):
    aug = train_chain()
    out = aug(photo, seed=3, epoch=1, index=17)
    g = make_rng(3, 1, 17)
    step = HorizontalFlip()(RandomCrop(224)(photo, g), g)
    expected = ((step.astype(np.float64) - MEAN) / STD).transpose(2, 0, 1)
    assert out.shape == (3, 224, 224) and out.dtype == np.float32
    assert out.flags.c_contiguous and out.flags.writeable
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


def test_compose_deterministic_per_seed_epoch_index(photo):
    aug = train_chain()
    a = aug(photo, seed=1, epoch=0, index=5)
    np.testing.assert_array_equal(a, aug(photo, seed=1, epoch=0, index=5))
    for other in ({"seed": 2, "epoch": 0, "index": 5}, {"seed": 1, "epoch": 1, "index": 5},
                  {"seed": 1, "epoch": 0, "index": 6}):
        assert not np.array_equal(a, aug(photo, **other))
    np.testing.assert_array_equal(aug(photo, make_rng(1, 0, 5)), a)


def test_compose_pickles_and_keeps_results(photo, tmp_path):
    aug = Compose(
        [
            Resize(256),
            RandomResizedCrop(128, scale=(0.3, 1.0)),
            HorizontalFlip(),
            ColorJitter(0.2, 0.2, 0.2),
            Pad(2, fill=(1, 2, 3)),
            Normalize(mean=MEAN, std=STD),
            ToCHW(),
            Cast("float32"),
        ]
    )
    clone = pickle.loads(pickle.dumps(aug))
    assert clone == aug
    assert "RandomResizedCrop(size=(128, 128)" in repr(aug)
    np.testing.assert_array_equal(
        clone(photo, seed=9, epoch=2, index=3), aug(photo, seed=9, epoch=2, index=3)
    )
    assert aug(photo, seed=9, epoch=2, index=3).shape == (3, 132, 132)


def test_compose_uint8_chw_output_and_out_buffer(photo):
    aug = Compose([CenterCrop(64), HorizontalFlip(p=1.0), ToCHW(), Cast("uint8")])
    out = aug(photo)
    assert out.dtype == np.uint8 and out.flags.c_contiguous
    np.testing.assert_array_equal(out, photo[181:245, 288:352][:, ::-1].transpose(2, 0, 1))
    batch = np.zeros((2, 3, 224, 224), np.float32)
    chain = train_chain()
    for i in range(2):
        filled = chain(photo, seed=0, epoch=0, index=i, out=batch[i])
        assert np.shares_memory(filled, batch)
        np.testing.assert_array_equal(batch[i], chain(photo, seed=0, epoch=0, index=i))
    row = np.zeros((3, 64, 64), np.float32)
    aug(photo, out=row)
    np.testing.assert_array_equal(row, out)
    with pytest.raises(ValueError, match=r"Cast: `out` has shape \(3, 8, 8\), the result has \(3, 64, 64\)"):
        aug(photo, out=np.zeros((3, 8, 8), np.uint8))
    with pytest.raises(ValueError, match=r"Compose: `out` has shape \(8,\), the result has \(64, 64, 3\)"):
        Compose([CenterCrop(64)])(photo, out=np.zeros(8, np.uint8))
    with pytest.raises(ValueError, match=r"Normalize: `out` has shape \(3, 8, 8\), the result has"):
        chain(photo, out=np.zeros((3, 8, 8), np.float32))


def test_compose_result_is_writable_after_resize(photo):
    out = Compose([Resize(32)])(photo)
    assert out.flags.writeable and out.flags.c_contiguous and out.shape == (32, 47, 3)


def test_compose_validation_and_hints():
    with pytest.raises(ValueError, match=r"`augmenters\[1\]` \(Normalize\) follows ToCHW"):
        Compose([ToCHW(), Normalize()])
    with pytest.raises(TypeError, match=r"`augmenters\[0\]` must be callable, got 3"):
        Compose([3])
    with pytest.raises(TypeError, match=r"`augmenters` must be a list of augmenters, got Resize"):
        Compose(Resize(3))
    assert Compose([Resize(256), CenterCrop(224)]).decode_hints() == {"min_side": 256}
    assert Compose([CenterCrop(224)]).decode_hints() == {}
    assert not Compose([Resize(3), CenterCrop(2)]).random
    assert Compose([Compose([RandomCrop(2)])]).random


def _plus_one(img, rng):
    return img + 1


def test_compose_accepts_plain_functions_and_nesting():
    img = np.zeros((4, 4, 3), np.uint8)
    aug = Compose([_plus_one, Compose([CenterCrop(2), _plus_one])])
    out = pickle.loads(pickle.dumps(aug))(img, seed=0)
    assert out.shape == (2, 2, 3) and (out == 2).all()
