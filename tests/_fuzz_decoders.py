"""The fuzz loop of tests/test_hardening_fuzz.py, run in a subprocess under an address-space
limit: seeded mutations (bit flips, truncation, overwritten length fields, inserted and
repeated bytes) of a valid file per decoder; any exception that is not a feedline
exception is printed as ``BAD <decoder> <seed> <type>: <message>``."""

from __future__ import annotations

import gzip
import io
import os
import random
import shutil
import struct
import sys
import tempfile
import traceback

import numpy as np

from feedline import csv as fcsv
from feedline import example, fixed, idx, ndarray_file, recordio, text, tfrecord
from feedline.exceptions import FeedlineError


def _mutate(data: bytes, rng: random.Random) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        kind = rng.randrange(6)
        n = len(b)
        if kind == 0 and n:  # flip bits
            for _ in range(rng.randint(1, 8)):
                i = rng.randrange(n)
                b[i] ^= 1 << rng.randrange(8)
        elif kind == 1 and n:  # truncate
            del b[rng.randrange(n) :]
        elif kind == 2 and n >= 8:  # a huge or odd integer over a length/shape field
            i = rng.randrange(n - 7)
            value = rng.choice([(1 << 64) - 1, 1 << 40, 1 << 62, 0x7FFFFFFF, 0xFFFFFFFF, 0])
            b[i : i + 8] = struct.pack("<Q", value)
        elif kind == 3:  # insert random bytes
            i = rng.randrange(n + 1)
            b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
        elif kind == 4 and n:  # repeat a slice
            i = rng.randrange(n)
            j = min(n, i + rng.randint(1, 64))
            b[i:i] = b[i:j]
        elif kind == 5 and n:  # overwrite with 0xff
            i = rng.randrange(n)
            b[i : i + rng.randint(1, 8)] = b"\xff" * min(8, n - i)
    return bytes(b)


def _samples(d: str) -> dict:
    """name -> (valid bytes, file name, reader(path))."""
    out = {}

    def write(name: str, data: bytes) -> str:
        p = os.path.join(d, name)
        with open(p, "wb") as f:
            f.write(data)
        return p

    # TFRecord of Examples
    ex = [example.encode_example({"x": np.arange(i + 1, dtype=np.int64), "s": [b"ab" * i],
                                  "f": np.ones(3, np.float32)}) for i in range(6)]
    p = os.path.join(d, "t.tfrecord")
    with tfrecord.TFRecordWriter(p) as w:
        for r in ex:
            w.write(r)
    tf_bytes = open(p, "rb").read()
    out["tfrecord"] = (tf_bytes, "t.tfrecord", lambda path: list(tfrecord.read(path)))
    out["tfrecord.gz"] = (gzip.compress(tf_bytes, mtime=0), "t.tfrecord.gz",
                          lambda path: list(tfrecord.read(path, compression="GZIP")))
    out["tfrecord-skip"] = (tf_bytes, "s.tfrecord",
                            lambda path: list(tfrecord.TFRecordReader(path, on_error="skip")))
    tfrecord.build_index(p)
    index_bytes = open(p + ".index", "rb").read()

    def read_index(path):
        target = path[: -len(".index")]
        with open(target, "wb") as f:
            f.write(tf_bytes)
        with tfrecord.TFRecordFile(target, index_path=path) as tf_file:
            return [tf_file[i] for i in range(len(tf_file))]

    out["tfrecord index"] = (index_bytes, "i.tfrecord.index", read_index)
    spec = {"x": example.VarLenFeature(np.int64), "s": example.VarLenFeature(bytes),
            "f": example.FixedLenFeature([3], np.float32)}
    out["example"] = (ex[3], "e.pb", lambda path: (
        example.decode_example(open(path, "rb").read()),
        example.parse_single_example(open(path, "rb").read(), spec)))
    # RecordIO + .idx
    rec, idx_path = os.path.join(d, "r.rec"), os.path.join(d, "r.idx")
    with recordio.IndexedRecordIO(idx_path, rec, "w") as w:
        for i in range(6):
            w.write_idx(i, recordio.pack(recordio.IRHeader(0, float(i), i, 0), b"payload" * i))
    rec_bytes = open(rec, "rb").read()
    out["recordio"] = (rec_bytes, "m.rec", lambda path: [recordio.unpack(r) for r in recordio.read(path)])

    def read_idx_file(path):
        target = path[: -len(".idx")] + ".rec"
        with open(target, "wb") as f:
            f.write(rec_bytes)
        r = recordio.IndexedRecordIO(path, target, "r")
        try:
            return [r.read_idx(k) for k in r.keys]
        finally:
            r.close()

    out["recordio idx"] = (open(idx_path, "rb").read(), "k.idx", read_idx_file)
    # CSV, text, fixed-length, IDX, NDArray, images
    csv_text = b"".join(b'%d,%f,"x,%d"\n' % (i, i / 3, i) for i in range(8))
    out["csv"] = (csv_text, "c.csv", lambda path: list(fcsv.read_csv(path, [0, 0.0, ""])))
    out["text"] = (csv_text, "l.txt", lambda path: list(text.read_lines(path, encoding="utf-8")))
    out["text.gz"] = (gzip.compress(csv_text, mtime=0), "l.txt.gz", lambda path: list(text.read_lines(path)))
    out["fixed"] = (bytes(range(100)), "f.bin",
                    lambda path: list(fixed.read_fixed(path, 10, header_bytes=4, footer_bytes=6)))
    out["idx"] = (idx.encode_idx(np.arange(24, dtype=np.int16).reshape(2, 3, 4)), "a.idx",
                  lambda path: idx.read_idx(path))
    out["idx.gz"] = (gzip.compress(idx.encode_idx(np.arange(6, dtype=np.uint8)), mtime=0), "a.idx.gz",
                     lambda path: idx.read_idx(path))
    out["ndarray_file"] = (ndarray_file.dumps({"w": np.ones((2, 3), np.float32), "b": np.arange(4)}),
                           "n.params", lambda path: ndarray_file.load(path))
    try:
        import simplejpeg
        from PIL import Image

        from feedline.image.codec import decode

        img = (np.arange(16 * 24 * 3) % 251).astype(np.uint8).reshape(16, 24, 3)
        out["jpeg"] = (simplejpeg.encode_jpeg(img, quality=80), "j.jpg",
                       lambda path: decode(open(path, "rb").read(), path=path))
        buf = io.BytesIO()
        Image.fromarray(img).save(buf, format="PNG")
        out["png"] = (buf.getvalue(), "p.png", lambda path: decode(open(path, "rb").read(), path=path))
    except ImportError:
        pass
    return out


def main() -> int:
    iterations, seed, extra_mib = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    d = tempfile.mkdtemp(prefix="feedline-fuzz-")
    samples = _samples(d)
    for _name, (data, fname, reader) in samples.items():  # warm up: every valid sample reads
        path = os.path.join(d, "valid-" + fname)
        with open(path, "wb") as f:
            f.write(data)
        reader(path)
    import resource

    with open("/proc/self/status") as f:
        vm = next(int(line.split()[1]) for line in f if line.startswith("VmSize:")) * 1024
    resource.setrlimit(resource.RLIMIT_AS, (vm + extra_mib << 20, vm + extra_mib << 20))
    bad = 0
    for name, (data, fname, reader) in samples.items():
        for k in range(iterations):
            rng = random.Random(f"{seed}-{name}-{k}")
            path = os.path.join(d, fname)
            with open(path, "wb") as f:
                f.write(_mutate(data, rng))
            try:
                reader(path)
            except FeedlineError:
                pass
            except Exception as exc:  # noqa: BLE001 - this is what the fuzz test looks for
                bad += 1
                where = traceback.extract_tb(exc.__traceback__)[-1]
                print(f"BAD {name} {k} {type(exc).__name__}: {str(exc)[:200]} "
                      f"({os.path.basename(where.filename)}:{where.lineno})", flush=True)
    print(f"DONE {len(samples)} decoders x {iterations}, {bad} bad", flush=True)
    shutil.rmtree(d, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
