"""What the hardening guards cost: feedline with and without each guard, in one run.

* ``image``: JPEG decode of photo-sized images (480 x 360, from the scikit-learn sample
  photos) with the pixel budget (the header is read first) vs ``max_pixels=None`` (no
  header read), images/s;
* ``timeout``: ``Dataset.range(n).map(f, num_workers=2)`` with and without ``timeout=``
  (which sends one item per message so that a timeout names its element), for a cheap
  mapper (about 20 us) and a costlier one (about 1 ms), items/s;
* ``resync``: TFRecord ``on_error="skip"`` over 20,000 records with 1% of them damaged
  (a length field running past the end: each is resynchronised by scanning for a frame
  whose length and data CRCs check) vs the same file undamaged, records/s.

No peer has these guards, so there is no peer column: the ratio is guarded over unguarded
(1.00x = free). Results go to ``benchmarks/results/hardening.md``.

    python benchmarks/bench_hardening.py
"""

from __future__ import annotations

import argparse
import pathlib
import struct
import sys
import tempfile
import time

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from feedline import Dataset, ExecutionOptions, tfrecord  # noqa: E402

import harness  # noqa: E402


def _pair(guarded, plain, repeat: int) -> tuple[float, float]:
    """Best seconds of each, timed alternately (a busy machine slows both alike)."""
    best_g = best_p = float("inf")
    for _ in range(repeat):
        best_g = min(best_g, harness.timed(guarded, repeat=1, warmup=0))
        best_p = min(best_p, harness.timed(plain, repeat=1, warmup=0))
    return best_g, best_p


def _photos(count: int) -> list[bytes]:
    import simplejpeg
    from sklearn.datasets import load_sample_images

    out = []
    for k, img in enumerate(load_sample_images().images):
        for j in range(count // 2):
            top, left = (j * 7) % 60, (j * 11 + k) % 150
            crop = np.ascontiguousarray(img[top : top + 360, left : left + 480])
            out.append(simplejpeg.encode_jpeg(crop, quality=90))
    return out


def bench_image(repeat: int) -> list[list[str]]:
    from feedline.image.codec import decode

    photos = _photos(64)

    def run(max_pixels):
        def go():
            for p in photos:
                decode(p, max_pixels=max_pixels)
        return go

    run(None)()  # warm up
    guarded, plain = _pair(run(89_478_485), run(None), repeat)
    return [["image decode, 480x360 JPEG", harness.fmt_rate(harness.rate(len(photos), guarded)),
             harness.fmt_rate(harness.rate(len(photos), plain)), harness.ratio(harness.rate(len(photos), guarded), harness.rate(len(photos), plain))]]


def _cheap(x):
    return x * 2


def _costly(x):
    end = time.perf_counter() + 0.001
    while time.perf_counter() < end:
        pass
    return x


def bench_timeout(repeat: int) -> list[list[str]]:
    rows = []
    for label, fn, n in (("map, ~20 us mapper", _cheap, 20_000), ("map, ~1 ms mapper", _costly, 1_000)):
        with_t = Dataset.range(n).map(fn, num_workers=2, execution=ExecutionOptions(timeout=60))
        without = Dataset.range(n).map(fn, num_workers=2)
        try:
            with_t.to_list()
            without.to_list()  # warm up: workers started
            t_guarded, t_plain = _pair(with_t.to_list, without.to_list, repeat)
        finally:
            with_t.close()
            without.close()
        rows.append([f"{label}, workers=2, timeout=60", harness.fmt_rate(harness.rate(n, t_guarded)),
                     harness.fmt_rate(harness.rate(n, t_plain)), harness.ratio(harness.rate(n, t_guarded), harness.rate(n, t_plain))])
    return rows


def bench_resync(repeat: int) -> list[list[str]]:
    d = pathlib.Path(tempfile.mkdtemp(prefix="feedline-bench-"))
    clean, damaged = d / "clean.tfrecord", d / "damaged.tfrecord"
    records = [bytes([i % 251]) * 200 for i in range(20_000)]
    with tfrecord.TFRecordWriter(str(clean)) as w:
        for r in records:
            w.write(r)
    data = bytearray(clean.read_bytes())
    raw = struct.pack("<Q", 1 << 40)
    header = raw + struct.pack("<I", tfrecord.masked_crc(raw))
    for k in range(50, len(records), 100):
        at = k * (200 + 16)
        data[at : at + 12] = header
    damaged.write_bytes(bytes(data))
    got = list(tfrecord.TFRecordReader(str(damaged), on_error="skip"))
    assert len(got) == len(records) - len(range(50, len(records), 100))

    def read(path):
        return lambda: list(tfrecord.TFRecordReader(str(path), on_error="skip"))

    t_damaged, t_clean = _pair(read(damaged), read(clean), repeat)
    return [["TFRecord skip, 1% damaged (200 B records)",
             harness.fmt_rate(harness.rate(len(got), t_damaged)),
             harness.fmt_rate(harness.rate(len(records), t_clean)), harness.ratio(harness.rate(len(got), t_damaged), harness.rate(len(records), t_clean))]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rows = bench_image(args.repeat) + bench_timeout(args.repeat) + bench_resync(args.repeat)
    table = harness.markdown_table(
        ["case", "guarded", "unguarded", "guarded speed / unguarded"], rows
    )
    text = (
        "## Hardening guards\n\n"
        "What the guards of issue 17 cost (feedline against itself; no peer has them). "
        "`guarded speed / unguarded` is the guarded rate over the unguarded one (1.00x = free).\n\n"
        + table
        + "\n"
    )
    path = harness.write_section("hardening", text)
    print(text)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
