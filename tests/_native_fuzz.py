"""A seeded, bounded mutation fuzz of every entry point of feedline's three C extensions,
checking each against its pure-Python path (a differential fuzz):

* ``feedline.image._libjpeg``: ``decode_region`` (every scale, grey and RGB, with and
  without restart-marker splicing) against the full decode cut to the box,
  ``add_restart_markers`` (its output decodes to the input's pixels), ``restart_layout``;
* ``feedline.image._kernels``: ``normalize_chw`` and ``hwc_to_chw`` against numpy,
  ``resample`` against Pillow, over random shapes, strides, boxes (also non-finite and
  out-of-range ones) and both code paths (AVX2 and portable);
* ``feedline.formats.example._wire``: ``encode_example``, ``decode_example`` and
  ``scan_examples`` (``parse_example``) against the Python encoder and decoders, over
  random feature dicts and mutated records.

``python tests/_native_fuzz.py ITERATIONS SEED`` runs it (``tests/test_sanitizers.py``
does so under AddressSanitizer and UBSan, with the sanitized builds of the extensions
registered first: ``FEEDLINE_SANITIZED_DIR`` names the folder holding them); a mismatch
raises AssertionError, any other non-feedline exception escapes, and prints its case.
``tests/test_hardening3_differential.py`` calls :func:`run` in-process.
"""

from __future__ import annotations

import importlib.util
import io
import os
import random
import struct
import sys

import numpy as np

_MODULES = {
    "_libjpeg": "feedline.image._libjpeg",
    "_kernels": "feedline.image._kernels",
    "_wire": "feedline.formats.example._wire",
}


def load_sanitized(folder: str) -> None:
    """Register the extension builds found in ``folder`` under their package names,
    before feedline imports them; one not built there is registered as missing."""
    for stem, name in _MODULES.items():
        found = [f for f in os.listdir(folder) if f.startswith(stem + ".") and f.endswith(".so")]
        if not found:  # not built there (no libjpeg headers): its fuzz is left out
            sys.modules[name] = None  # type: ignore[assignment]  # import -> ImportError
            continue
        spec = importlib.util.spec_from_file_location(name, os.path.join(folder, found[0]))
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[name] = module


def mutate(data: bytes, rng: random.Random) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        kind, n = rng.randrange(5), len(b)
        if kind == 0 and n:
            for _ in range(rng.randint(1, 6)):
                b[rng.randrange(n)] ^= 1 << rng.randrange(8)
        elif kind == 1 and n:
            del b[rng.randrange(n):]
        elif kind == 2 and n >= 4:
            i = rng.randrange(n - 3)
            b[i:i + 4] = struct.pack(">I", rng.choice([0, 1, 0xFFFF, 0x7FFFFFFF, 0xFFFFFFFF]))
        elif kind == 3:
            i = rng.randrange(n + 1)
            b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 12)))
        elif kind == 4 and n:
            i = rng.randrange(n)
            b[i:i] = b[i:i + rng.randint(1, 48)]
    return bytes(b)


# ------------------------------------------------------------------------------ images

def _jpegs(rng: np.random.Generator) -> list[bytes]:
    import simplejpeg
    from PIL import Image

    from _jpeg_sampling import jpeg_with_sampling
    from feedline.image import codec

    out = []
    for height, width, sub in [(37, 53, "420"), (16, 24, "444"), (41, 30, "422"),
                               (9, 70, "440"), (5, 3, "411"), (64, 48, "Gray")]:
        pixels = rng.integers(0, 256, (height, width, 1 if sub == "Gray" else 3), np.uint8)
        out.append(simplejpeg.encode_jpeg(pixels, quality=90, colorsubsampling=sub,
                                          colorspace="GRAY" if sub == "Gray" else "RGB"))
    cmyk = io.BytesIO()
    Image.fromarray(rng.integers(0, 256, (19, 26, 4), np.uint8), "CMYK").save(cmyk, "JPEG")
    out.append(cmyk.getvalue())
    out.append(jpeg_with_sampling(29, 45, ((1, 4), (1, 1), (1, 1)), seed=1))
    out.append(jpeg_with_sampling(33, 40, ((2, 2), (2, 1), (1, 1)), seed=2))
    out += [codec.add_restart_markers(j, interval_pixels=16) for j in out[:3]]  # spliced
    return out


def _sj_colorspace(data: bytes) -> str:
    import simplejpeg

    try:
        return simplejpeg.decode_jpeg_header(data)[2]
    except (KeyError, ValueError):
        return "unknown"


def fuzz_jpeg(iterations: int, seed: int) -> int:
    from feedline.exceptions import DecodeError
    from feedline.image import codec

    if not codec.region_decoding():
        return 0
    native = codec.require_region_decoding("the JPEG fuzz")
    rng, nrng = random.Random(seed), np.random.default_rng(seed)
    corpus = _jpegs(nrng)
    checked = 0
    for i in range(iterations):
        valid = corpus[i % len(corpus)]
        data = valid if i % 4 == 0 else mutate(valid, rng)
        native.restart_layout(data)
        scale = rng.choice([1, 2, 4, 8])
        mode = rng.choice(["RGB", "L"])
        native._set_splicing(rng.random() < 0.7)
        try:
            full = codec.decode(data, mode=mode, strict=True,
                                target_size=None if scale == 1 else (1, 1))
            height, width, _ = codec.probe(data)
        except DecodeError:
            full = None
        if full is not None and scale > 1:
            dims = (-(-height // scale), -(-width // scale))
            if full.shape[:2] != dims:  # target_size (1, 1) picked 1/8: redo at 1/scale
                full = codec._decode_jpeg(data, mode, scale, False, True, None, None, None)
        if full is not None:
            fh, fw = full.shape[:2]
            y, x = rng.randrange(fh), rng.randrange(fw)
            h, w = rng.randint(1, fh - y), rng.randint(1, fw - x)
            region = codec.decode_region(data, (y, x, h, w), scale=scale, mode=mode)
            assert np.array_equal(region, full[y:y + h, x:x + w]), (i, seed, (y, x, h, w), scale)
            cmyk = data is valid and _sj_colorspace(data) in ("CMYK", "YCCK")
            if data is valid and not cmyk:  # the path without the extension: Pillow's libjpeg
                other = codec._pillow_jpeg(data, mode, scale, (fh, fw), None, None)
                assert np.array_equal(other, full), (i, seed, scale, mode, "fallback differs")
            checked += 1
        else:  # damaged: the C entry point must fail cleanly whatever the box
            out = np.empty((rng.randint(1, 40), rng.randint(1, 40), 1 if mode == "L" else 3),
                           np.uint8)
            # a region that may not match the buffer (too big, negative, zero): refused
            h, w = out.shape[0] + rng.choice([0, 0, 0, 1, -1, 1000]), out.shape[1] + rng.choice([0, 0, 1, -1])
            try:
                native.decode_region(data, out, rng.randint(-2, 30), rng.randint(-2, 30),
                                     h, w, rng.choice([scale, scale, 3, 0, -8]), mode == "L",
                                     rng.random() < 0.5, rng.random() < 0.5)
            except (ValueError, NotImplementedError):
                pass
        if i % 5 == 0:
            try:
                marked = native.add_restart_markers(data, rng.choice([1, 8, 32, 1000]))
            except ValueError:
                marked = None
            if marked is not None and full is not None and scale == 1:
                again = codec.decode(marked, mode=mode)
                assert np.array_equal(again, full), (i, seed, "restart markers changed pixels")
    native._set_splicing(True)
    return checked


# ------------------------------------------------------------------------------ kernels

def _pillow_resize(src: np.ndarray, size: tuple[int, int], box, flt: int) -> np.ndarray:
    from PIL import Image

    names = ["BOX", "BILINEAR", "HAMMING", "BICUBIC", "LANCZOS"]
    img = Image.fromarray(src[:, :, 0] if src.shape[2] == 1 else src)
    out = np.asarray(img.resize(size, getattr(Image.Resampling, names[flt]), box=box))
    return out.reshape(size[1], size[0], src.shape[2])


def fuzz_kernels(iterations: int, seed: int) -> int:
    from feedline.image import _kernels as kernels

    rng = np.random.default_rng(seed)
    checked = 0
    for i in range(iterations):
        kernels._set_simd(bool(i % 2))
        h, w = int(rng.integers(1, 70)), int(rng.integers(1, 90))
        c = int(rng.choice([1, 3]))
        base = rng.integers(0, 256, (h + 4, w + 4, c), np.uint8)
        src = base[2:2 + h, 2:2 + w]
        if rng.random() < 0.3:
            src = src[::-1]
        if rng.random() < 0.2:
            src = src[:, ::-1]
        scale = rng.normal(size=c).astype(np.float32)
        bias = rng.normal(size=c).astype(np.float32)
        dst = np.empty((c, h, w), np.float32)
        kernels.normalize_chw(src, dst, scale.tolist(), bias.tolist())
        want = (src.astype(np.float32) * scale + bias).transpose(2, 0, 1)
        assert np.array_equal(dst, want), (i, seed, "normalize_chw")
        chw = np.empty((c, h, w), np.uint8)
        kernels.hwc_to_chw(src, chw)
        assert np.array_equal(chw, src.transpose(2, 0, 1)), (i, seed, "hwc_to_chw")
        # wrong arguments: another shape, dtype, channel count or scale length is refused
        wrong = [(src, np.empty((c, h + 1, w), np.float32), scale.tolist(), bias.tolist()),
                 (src, np.empty((c, h, w), np.float64), scale.tolist(), bias.tolist()),
                 (src, dst, scale.tolist()[:-1], bias.tolist()),
                 (src.astype(np.int16), dst, scale.tolist(), bias.tolist()),
                 (src[..., :0], np.empty((0, h, w), np.float32), [], []),
                 (src, dst[:, ::2], scale.tolist(), bias.tolist())]
        for args in wrong:
            try:
                kernels.normalize_chw(*args)
            except (ValueError, TypeError):
                pass
        for args in [(src, np.empty((c, w, h), np.uint8)), (src, np.empty((c + 1, h, w), np.uint8)),
                     (src.astype(np.float32), chw), (src, chw[:, :, ::-1])]:
            try:
                kernels.hwc_to_chw(*args)
            except (ValueError, TypeError):
                pass
        # resample: pixels contiguous within a row (a row flip is fine)
        rsrc = np.ascontiguousarray(src) if rng.random() < 0.5 else base[2:2 + h, 2:2 + w]
        oh, ow = int(rng.integers(1, 60)), int(rng.integers(1, 60))
        flt = int(rng.integers(0, 5))
        kind = rng.random()
        if kind < 0.7:  # a valid box, fractional or whole
            x0, x1 = sorted(rng.uniform(0, w, 2))
            y0, y1 = sorted(rng.uniform(0, h, 2))
            if rng.random() < 0.3:
                x0, y0, x1, y1 = 0, 0, w, h
            elif rng.random() < 0.3:
                x0, y0 = int(x0), int(y0)
                x1, y1 = min(w, x0 + ow), min(h, y0 + oh)
            box = (float(x0), float(y0), float(x1), float(y1))
        else:  # hostile: out of range by a hair or by far, NaN, infinite, reversed
            pick = [float("nan"), float("inf"), -float("inf"), -1e-9, w + 1e-9, h + 1e-7,
                    1e300, -1e300, 2.0 ** 40, float(w), float(h), 0.0]
            box = tuple(float(rng.choice(pick)) for _ in range(4))
        out = np.empty((oh, ow, c), np.uint8)
        try:
            kernels.resample(rsrc, out, box, flt)
        except ValueError:
            assert kind >= 0.7, (i, seed, box, "valid box refused")
            continue
        if box[2] - box[0] > 0 and box[3] - box[1] > 0:
            want = _pillow_resize(np.ascontiguousarray(rsrc), (ow, oh), box, flt)
            assert np.array_equal(out, want), (i, seed, box, flt, "resample != Pillow")
        checked += 1
    kernels._set_simd(True)
    return checked


# ------------------------------------------------------------------------------ Examples

def _random_features(rng: random.Random) -> dict:
    features: dict = {}
    for k in range(rng.randint(0, 5)):
        kind = rng.randrange(9)
        n = rng.randint(0, 6)
        if kind == 0:
            value: object = [rng.randint(-2 ** 63, 2 ** 63 - 1) for _ in range(n)]
        elif kind == 1:
            value = [rng.uniform(-1e30, 1e30) for _ in range(n)]
        elif kind == 2:
            value = [bytes(rng.randrange(256) for _ in range(rng.randint(0, 9))) for _ in range(n)]
        elif kind == 3:
            value = np.frombuffer(bytes(rng.randrange(256) for _ in range(n)), dtype=np.bool_)
        elif kind == 4:
            dtype = rng.choice([np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32,
                                np.int64, np.float32, np.float64])
            value = (np.random.default_rng(rng.randrange(1 << 30)).integers(-100, 100, n)
                     .astype(dtype))
        elif kind == 5:
            value = rng.randint(-5, 5)
        elif kind == 6:
            value = "é" * rng.randint(0, 3)
        elif kind == 7:
            value = []
        else:
            value = None
        features[f"f{k}"] = value
    return features


def _both(fn):
    """``fn()`` with the extension, then with the Python path: (result or exception type)."""
    from feedline.formats.example import _native

    results = []
    saved = _native.extension
    for ext in (saved, lambda: None):
        _native.extension = ext
        try:
            results.append(fn())
        except Exception as exc:  # noqa: BLE001 - compared, not hidden
            results.append(type(exc))
        finally:
            _native.extension = saved
    return results


def _same(a, b) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        if a.dtype != b.dtype or a.shape != b.shape:
            return False
        return bool(np.array_equal(a, b, equal_nan=a.dtype.kind == "f"))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if hasattr(a, "indices") and hasattr(b, "indices"):  # sparse values
        return all(_same(getattr(a, f), getattr(b, f)) for f in ("indices", "values", "dense_shape"))
    return a == b


def fuzz_examples(iterations: int, seed: int) -> int:
    import warnings

    from feedline.formats.example import codec as ex
    from feedline.formats.example import spec

    rng = random.Random(seed)
    # written by other encoders: a packed FloatList and a packed Int64List of 0 bytes
    corpus = [b"\x0a\x0b\x0a\x09\x0a\x01a\x12\x04\x12\x02\x0a\x00",
              b"\x0a\x0b\x0a\x09\x0a\x01a\x12\x04\x1a\x02\x0a\x00"]
    checked = 0
    for i in range(iterations):
        features = _random_features(rng)
        packed = rng.random() < 0.8
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            enc = _both(lambda: ex.encode_example(features, packed=packed))  # noqa: B023
        assert _same(enc[0], enc[1]), (i, seed, "encode_example", features)
        if isinstance(enc[0], bytes):
            corpus.append(enc[0])
        if not corpus:
            continue
        record = corpus[rng.randrange(len(corpus))]
        record = record if rng.random() < 0.3 else mutate(record, rng)
        dec = _both(lambda: ex.decode_example(record))  # noqa: B023
        assert _same(dec[0], dec[1]), (i, seed, "decode_example", record)
        batch = [corpus[rng.randrange(len(corpus))] for _ in range(rng.randint(1, 4))]
        if rng.random() < 0.5:
            batch[0] = mutate(batch[0], rng)
        wanted = {name: spec.VarLenFeature(rng.choice(["int64", "float32", "string"]))
                  for name in ["a"] + [f"f{k}" for k in range(rng.randint(0, 4))]}
        parsed = _both(lambda: ex.parse_example(batch, wanted))  # noqa: B023
        assert _same(parsed[0], parsed[1]), (i, seed, "parse_example", batch, wanted)
        checked += 1
    return checked


def run(iterations: int, seed: int) -> dict[str, int]:
    """Every fuzz with ``iterations`` cases each; returns the cases checked per part."""
    return {"jpeg": fuzz_jpeg(iterations, seed), "kernels": fuzz_kernels(iterations, seed),
            "examples": fuzz_examples(iterations, seed)}


if __name__ == "__main__":
    folder = os.environ.get("FEEDLINE_SANITIZED_DIR")
    if folder:
        load_sanitized(folder)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    print(run(int(sys.argv[1]), int(sys.argv[2])))
    sys.stdout.flush()
