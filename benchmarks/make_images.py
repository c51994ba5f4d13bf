"""Build the benchmark image set: a few thousand JPEGs of ImageNet-like size from real photos.

The photos are the ones scikit-image (``skimage/data/*.png|jpg``) and scikit-learn
(``load_sample_images``: china, flower) ship; scikit-image is optional (without it the two
scikit-learn photos are used). Each output image is a random crop (30-100 % of the photo's
area, aspect ratio 3/4-4/3) of one photo, rescaled to a width drawn from 400-520 px,
mirrored half of the time, and saved as a JPEG (quality 90, 4:2:0) under
``benchmarks/data/images/<photo name>/<photo name>_<n>.jpg``: one class per source photo,
as ``feedline pack`` expects. The set is a pure function of ``--seed`` and ``--count``.

Usage::

    python benchmarks/make_images.py                 # 3000 images into benchmarks/data/images
    python benchmarks/make_images.py --count 500 --out /tmp/imgs --seed 1
"""

from __future__ import annotations

import argparse
import math
import pathlib
import shutil
import sys

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "data" / "images"

# scikit-image's bundled colour photographs (grey-level and synthetic images are left out)
SKIMAGE_PHOTOS = (
    "astronaut.png",
    "chelsea.png",
    "coffee.png",
    "hubble_deep_field.jpg",
    "ihc.png",
    "motorcycle_left.png",
    "motorcycle_right.png",
    "retina.jpg",
    "rocket.jpg",
)


def source_photos() -> dict[str, np.ndarray]:
    """Name -> RGB uint8 array of every photo available, in a fixed order."""
    from PIL import Image
    from sklearn.datasets import load_sample_images

    photos: dict[str, np.ndarray] = {}
    sample = load_sample_images()
    for fname, img in zip(sample.filenames, sample.images):
        photos[pathlib.Path(fname).stem] = np.asarray(img, dtype=np.uint8)
    try:
        import skimage
    except ImportError:
        print("scikit-image not installed: using scikit-learn's two photos only", file=sys.stderr)
    else:
        data_dir = pathlib.Path(skimage.__file__).parent / "data"
        for fname in SKIMAGE_PHOTOS:
            path = data_dir / fname
            if path.exists():
                with Image.open(path) as im:
                    photos[path.stem] = np.array(im.convert("RGB"))
    return photos


def make_image(photo: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One random crop of ``photo``, rescaled to a width in [400, 520], maybe mirrored."""
    from PIL import Image

    h, w = photo.shape[:2]
    for _ in range(20):
        area = h * w * rng.uniform(0.3, 1.0)
        aspect = math.exp(rng.uniform(math.log(3 / 4), math.log(4 / 3)))
        cw, ch = int(round(math.sqrt(area * aspect))), int(round(math.sqrt(area / aspect)))
        if cw <= w and ch <= h:
            break
    else:
        ch, cw = h, w
    y, x = int(rng.integers(0, h - ch + 1)), int(rng.integers(0, w - cw + 1))
    crop = photo[y : y + ch, x : x + cw]
    out_w = int(rng.integers(400, 521))
    out_h = max(1, int(round(ch * out_w / cw)))
    img = np.asarray(
        Image.fromarray(np.ascontiguousarray(crop)).resize((out_w, out_h), Image.Resampling.BILINEAR)
    )
    if rng.random() < 0.5:
        img = img[:, ::-1]
    return np.ascontiguousarray(img)


def build(out: pathlib.Path, count: int, seed: int, quality: int = 90) -> dict[str, int]:
    """Write ``count`` JPEGs under ``out`` (emptied first); return images per class."""
    import simplejpeg

    photos = source_photos()
    names = list(photos)
    if out.exists():
        shutil.rmtree(out)
    per_class = dict.fromkeys(names, 0)
    for name in names:
        (out / name).mkdir(parents=True)
    for i in range(count):
        rng = np.random.default_rng([seed, i])
        name = names[i % len(names)]
        img = make_image(photos[name], rng)
        data = simplejpeg.encode_jpeg(img, quality=quality, colorspace="RGB", colorsubsampling="420")
        (out / name / f"{name}_{i:05d}.jpg").write_bytes(data)
        per_class[name] += 1
        if (i + 1) % 500 == 0 or i + 1 == count:
            print(f"\r{i + 1}/{count} images", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    return per_class


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=3000, help="number of images (default 3000)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--quality", type=int, default=90, help="JPEG quality (default 90)")
    parser.add_argument(
        "--out", type=pathlib.Path, default=DEFAULT_OUT, help=f"output folder (default {DEFAULT_OUT})"
    )
    args = parser.parse_args(argv)
    if args.count <= 0:
        parser.error(f"--count must be a positive int, got {args.count}")
    per_class = build(args.out, args.count, args.seed, args.quality)
    print(f"wrote {args.count} JPEGs in {len(per_class)} classes under {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
