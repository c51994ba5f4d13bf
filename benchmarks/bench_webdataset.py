"""WebDataset tar shards: feedline.webdataset vs the webdataset package, one run.

Writes image-text shards with feedline (``benchmarks/data/webdataset/``): each sample a
JPEG (about 256x256), a class (``.cls``), a caption (``.txt``) and metadata (``.json``),
``--samples`` samples in 8 shards, plus a "small" set of samples without image (only
cls/txt/json, where per-sample overhead dominates). Both libraries read every sample of
every shard, sequentially in this process, page cache warm; best of ``--repeat`` after a
warm-up:

* decode off: samples as dicts of ``bytes`` — ``feedline.webdataset.read(urls)`` vs
  ``webdataset.WebDataset(urls, shardshuffle=False)``;
* decode on: ``.cls`` -> int, ``.txt`` -> str, ``.json`` -> object, ``.jpg`` -> ``uint8``
  HWC RGB array — ``read(urls, decode=True)`` vs ``.decode("rgb8")``.

Results go to ``benchmarks/results/webdataset.md``.

    python benchmarks/bench_webdataset.py              # full size
    python benchmarks/bench_webdataset.py --samples 400   # smoke run
"""

from __future__ import annotations

import argparse
import importlib.metadata
import pathlib
import shutil
import sys

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from feedline import webdataset as fwds  # noqa: E402
from feedline.image.pack import encode_image  # noqa: E402

import harness  # noqa: E402

DATA = HERE / "data" / "webdataset"
SHARDS = 8


def _image(rng: np.random.Generator, i: int) -> np.ndarray:
    """A smooth 256x256 RGB picture (compresses like a photo, not like noise)."""
    y, x = np.mgrid[0:256, 0:256].astype(np.float32)
    a, b, c = rng.uniform(0.01, 0.08, 3)
    img = np.stack([np.sin(x * a + i) * 90 + 128, np.cos(y * b) * 90 + 128,
                    np.sin((x + y) * c) * 90 + 128], axis=-1)
    img += rng.normal(0, 6, img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)


def make_shards(kind: str, samples: int) -> list[str]:
    out = DATA / f"{kind}-{samples}"
    pattern = out / "shard-%03d.tar"
    paths = [str(pattern).replace("%03d", f"{i:03d}") for i in range(SHARDS)]
    if all(pathlib.Path(p).exists() for p in paths):
        return paths
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    rng = np.random.default_rng(0)
    per = -(-samples // SHARDS)
    images = [encode_image(_image(rng, i), encoding=".jpg", quality=90) for i in range(32)]
    with fwds.ShardWriter(str(pattern), maxcount=per) as w:
        for i in range(samples):
            sample = {"__key__": f"{i:08d}", "cls": i % 1000,
                      "txt": f"a photo of thing number {i} in a field",
                      "json": {"id": i, "width": 256, "height": 256, "source": "bench"}}
            if kind == "image":
                sample["jpg"] = images[i % len(images)]
            w.write(sample)
    return w.paths


def read_feedline(paths: list[str], decode: bool) -> int:
    n = 0
    for _ in fwds.read(paths, decode=decode):
        n += 1
    return n


def read_wds(paths: list[str], decode: bool) -> int:
    import webdataset as wds

    ds = wds.WebDataset(paths, shardshuffle=False)
    if decode:
        ds = ds.decode("rgb8")
    n = 0
    for _ in ds:
        n += 1
    return n


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=4000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    try:
        version = importlib.metadata.version("webdataset")
    except importlib.metadata.PackageNotFoundError:
        version = None
    rows = []
    for kind, samples in (("image", args.samples), ("small", args.samples * 5)):
        paths = make_shards(kind, samples)
        mb = sum(pathlib.Path(p).stat().st_size for p in paths) / 1e6
        for decode in (False, True):
            count = read_feedline(paths, decode)
            assert count == samples, (count, samples)
            ours = harness.timed(lambda p=paths, d=decode: read_feedline(p, d), repeat=args.repeat)
            theirs = None
            if version is not None:
                assert read_wds(paths, decode) == samples
                theirs = harness.timed(lambda p=paths, d=decode: read_wds(p, d),
                                       repeat=args.repeat)
            label = "jpg+cls+txt+json" if kind == "image" else "cls+txt+json"
            rows.append([
                f"{samples:,} samples ({label}), {mb:.0f} MB",
                "on" if decode else "off",
                harness.fmt_rate(harness.rate(samples, ours)),
                harness.fmt_rate(None if theirs is None else harness.rate(samples, theirs)),
                harness.ratio(harness.rate(1, ours),
                              None if theirs is None else harness.rate(1, theirs)),
            ])
            print(rows[-1], flush=True)
    table = harness.markdown_table(
        ["shards (8)", "decode", "feedline samples/s", "webdataset samples/s",
         "feedline / webdataset"], rows)
    harness.write_section(
        "webdataset",
        f"""## WebDataset tar shards (feedline.webdataset vs the webdataset package)

Every sample of 8 tar shards written by feedline, read sequentially in one process, page
cache warm; best of {args.repeat} after a warm-up. Decode off: samples as dicts of
`bytes` (`feedline.webdataset.read(urls)` against `webdataset.WebDataset(urls,
shardshuffle=False)`, webdataset {version or harness.NOT_INSTALLED}). Decode on: `.cls`,
`.txt`, `.json` and the 256x256 `.jpg` decoded to a `uint8` RGB array
(`read(urls, decode=True)` — JPEG through libjpeg-turbo — against `.decode("rgb8")`,
JPEG through Pillow).

{table}
""",
    )


if __name__ == "__main__":
    main()
