"""feedline.image.pack / ``feedline pack``: im2rec round trips on real photos."""

from __future__ import annotations

import io
import json
import os
import pathlib
import subprocess
import textwrap

import numpy as np
import pytest

simplejpeg = pytest.importorskip("simplejpeg")
Image = pytest.importorskip("PIL.Image")
sklearn_datasets = pytest.importorskip("sklearn.datasets")

from feedline import recordio  # noqa: E402
from feedline.cli import main as cli_main  # noqa: E402
from feedline.exceptions import DataError, DecodeError  # noqa: E402
from feedline.image import EncodeOptions, SourceOptions  # noqa: E402
from feedline.image.codec import decode  # noqa: E402
from feedline.image.listfile import ListItem, list_folder, read_list, write_list  # noqa: E402
from feedline.image.pack import encode_image, pack_images  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
from peer_envs import peer_python  # noqa: E402


def _png_bytes(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="PNG")
    return buf.getvalue()


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> pathlib.Path:
    """photos/<class>/... : small crops of scikit-learn's two real photos, JPEG and PNG,
    one in a nested folder; 7 images in 3 classes."""
    china, flower = sklearn_datasets.load_sample_images().images
    root = tmp_path_factory.mktemp("pack") / "photos"
    rng = np.random.default_rng(0)

    def crop(photo, h, w):
        y, x = rng.integers(0, photo.shape[0] - h), rng.integers(0, photo.shape[1] - w)
        return np.ascontiguousarray(photo[y : y + h, x : x + w])

    files = {
        "china/a.jpg": simplejpeg.encode_jpeg(crop(china, 48, 64), quality=90),
        "china/b.JPG": simplejpeg.encode_jpeg(crop(china, 64, 40), quality=80),
        "china/c.jpeg": simplejpeg.encode_jpeg(crop(china, 50, 50), quality=95),
        "flower/x.png": _png_bytes(crop(flower, 40, 56)),
        "flower/y.png": _png_bytes(crop(flower, 36, 36)),
        "mixed/sub/z.jpg": simplejpeg.encode_jpeg(crop(flower, 44, 70), quality=90),
        "mixed/w.png": _png_bytes(crop(china, 30, 60)),
        "mixed/notes.txt": b"not an image",
    }
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return root


def _read_rec(rec: str, idx: str) -> dict[int, tuple]:
    out = {}
    reader = recordio.IndexedRecordIO(idx, rec, "r")
    for key in reader.keys:
        header, payload = recordio.unpack(reader.read_idx(key))
        out[key] = (header, payload)
    reader.close()
    return out


def test_list_folder_matches_im2rec_conventions(tree, tmp_path):
    items, classes = list_folder(tree)
    assert classes == ["china", "flower", "mixed"]
    assert [(i.index, i.labels, i.path) for i in items] == [
        (0, (0.0,), "china/a.jpg"),
        (1, (0.0,), "china/b.JPG"),
        (2, (0.0,), "china/c.jpeg"),
        (3, (1.0,), "flower/x.png"),
        (4, (1.0,), "flower/y.png"),
        (5, (2.0,), "mixed/w.png"),  # a folder's files before its subfolders (os.walk)
        (6, (2.0,), "mixed/sub/z.jpg"),
    ]
    write_list(tmp_path / "a.lst", items)
    assert (tmp_path / "a.lst").read_text().splitlines()[6] == "6\t2.000000\tmixed/sub/z.jpg"
    assert read_list(tmp_path / "a.lst") == items


def test_list_errors(tmp_path):
    (tmp_path / "bad.lst").write_text("0\t1.0\ta.jpg\nx\t1\tb.jpg\n")
    with pytest.raises(DataError, match=r"bad\.lst: line 2: index 'x' is not an int"):
        read_list(tmp_path / "bad.lst")
    (tmp_path / "short.lst").write_text("0\ta.jpg\n")
    with pytest.raises(DataError, match=r"line 1: expected index<TAB>label\(s\)<TAB>path, got 2"):
        read_list(tmp_path / "short.lst")
    (tmp_path / "lbl.lst").write_text("0\tcat\ta.jpg\n")
    with pytest.raises(DataError, match=r"line 1: bad label: could not convert"):
        read_list(tmp_path / "lbl.lst")
    (tmp_path / "loose").mkdir()
    (tmp_path / "loose" / "a.jpg").write_bytes(b"x")
    with pytest.raises(ValueError, match=r"1 image\(s\) directly in the root folder \(e\.g\. 'a\.jpg'\)"):
        list_folder(tmp_path / "loose")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match=r"empty: no class subfolders found"):
        list_folder(tmp_path / "empty")
    with pytest.raises(ValueError, match=r"labels must be finite numbers, got nan"):
        write_list(tmp_path / "n.lst", [ListItem(0, (float("nan"),), "a.jpg")])


def test_pass_through_round_trip_keeps_bytes(tree, tmp_path):
    result = pack_images(tree, tmp_path / "train", encode=EncodeOptions(pass_through=True))
    assert result.files == [str(tmp_path / "train.rec")]
    assert result.index_files == [str(tmp_path / "train.idx")]
    assert result.list_file == str(tmp_path / "train.lst")
    assert result.classes == ["china", "flower", "mixed"] and result.count == 7
    items = read_list(result.list_file)
    records = _read_rec(result.files[0], result.index_files[0])
    assert sorted(records) == [item.index for item in items]
    for item in items:
        header, payload = records[item.index]
        assert header.id == item.index and header.flag == 0
        assert header.label == item.labels[0]
        original = (tree / item.path).read_bytes()
        assert payload == original  # JPEG and PNG bytes identical
        np.testing.assert_array_equal(decode(payload), decode(original))
    # no temporary files are left next to the outputs
    assert sorted(os.listdir(tmp_path)) == ["train.idx", "train.lst", "train.rec"]


def test_png_reencoding_is_pixel_exact(tree, tmp_path):
    result = pack_images(tree, tmp_path / "png", encode=EncodeOptions(encoding=".png"))
    records = _read_rec(result.files[0], result.index_files[0])
    for item in read_list(result.list_file):
        _, payload = records[item.index]
        assert payload[:8] == b"\x89PNG\r\n\x1a\n"
        np.testing.assert_array_equal(decode(payload), decode((tree / item.path).read_bytes()))


def test_resize_and_center_crop(tree, tmp_path):
    resized = pack_images(tree, tmp_path / "r", encode=EncodeOptions(resize=24, quality=90))
    for _, payload in _read_rec(resized.files[0], resized.index_files[0]).values():
        img = decode(payload)
        assert min(img.shape[:2]) == 24 and payload[:3] == b"\xff\xd8\xff"
    square = pack_images(tree, tmp_path / "s", encode=EncodeOptions(resize=20, center_crop=True))
    shapes = {decode(p).shape for _, p in _read_rec(square.files[0], square.index_files[0]).values()}
    assert shapes == {(20, 20, 3)}


def test_center_crop_keeps_the_middle(tree, tmp_path):
    result = pack_images(tree, tmp_path / "c", encode=EncodeOptions(center_crop=True, encoding=".png"))
    records = _read_rec(result.files[0], result.index_files[0])
    _, payload = records[1]  # china/b.JPG is 64 x 40: rows 12..52 survive
    original = decode((tree / "china/b.JPG").read_bytes())
    np.testing.assert_array_equal(decode(payload), original[12:52])


def test_grayscale(tree, tmp_path):
    result = pack_images(tree, tmp_path / "g", encode=EncodeOptions(encoding=".png", color="gray"))
    records = _read_rec(result.files[0], result.index_files[0])
    _, payload = records[3]
    assert decode(payload, mode="L").shape == (40, 56, 1)
    rgb = decode(payload)
    assert (rgb[:, :, 0] == rgb[:, :, 1]).all()


def test_shards_shuffle_and_workers(tree, tmp_path, leak_check):
    a = pack_images(tree, tmp_path / "a" / "t", num_shards=3, shuffle=True, seed=5, encode=EncodeOptions(pass_through=True))
    assert [os.path.basename(p) for p in a.files] == [
        "t-00000-of-00003.rec",
        "t-00001-of-00003.rec",
        "t-00002-of-00003.rec",
    ]
    assert a.counts == [3, 2, 2]
    ids = []
    for rec, idx in zip(a.files, a.index_files):
        ids += [h.id for h, _ in _read_rec(rec, idx).values()]
    assert sorted(ids) == list(range(7)) and ids != list(range(7))
    # same seed, 2 worker processes: byte-identical files
    b = pack_images(
        tree, tmp_path / "b" / "t", num_shards=3, shuffle=True, seed=5, encode=EncodeOptions(pass_through=True), num_workers=2
    )
    for x, y in zip(a.files + a.index_files, b.files + b.index_files):
        assert pathlib.Path(x).read_bytes() == pathlib.Path(y).read_bytes()
    leak_check.assert_clean()  # the worker processes are gone
    c = pack_images(tree, tmp_path / "c" / "t", num_shards=3, shuffle=True, seed=6, encode=EncodeOptions(pass_through=True))
    assert pathlib.Path(c.index_files[0]).read_bytes() != pathlib.Path(a.index_files[0]).read_bytes()


def test_lst_source_with_multiple_labels(tree, tmp_path):
    lst = tmp_path / "multi.lst"
    write_list(lst, [ListItem(10, (1.0, 2.5, 3.0), "china/a.jpg"), ListItem(20, (4.0, 5.0), "flower/x.png")])
    packed = pack_images(lst, tmp_path / "m", root=tree, source_options=SourceOptions(pack_label=True), encode=EncodeOptions(pass_through=True))
    assert packed.list_file is None and packed.classes is None
    records = _read_rec(packed.files[0], packed.index_files[0])
    assert sorted(records) == [10, 20]
    header, _ = records[10]
    assert header.flag == 3 and header.label.tolist() == [1.0, 2.5, 3.0] and header.id == 10
    first_only = pack_images(lst, tmp_path / "f", root=tree, encode=EncodeOptions(pass_through=True))
    header, _ = _read_rec(first_only.files[0], first_only.index_files[0])[20]
    assert header.flag == 0 and header.label == 4.0


def test_missing_and_corrupt_images(tree, tmp_path):
    lst = tmp_path / "broken.lst"
    (tmp_path / "bad.jpg").write_bytes((tree / "china/a.jpg").read_bytes()[:300])
    (tmp_path / "china").mkdir()
    (tmp_path / "china" / "a.jpg").write_bytes((tree / "china/a.jpg").read_bytes())
    write_list(
        lst,
        [ListItem(0, (0,), "china/a.jpg"), ListItem(1, (0,), "gone.jpg"), ListItem(2, (1,), "bad.jpg")],
    )
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(FileNotFoundError, match=r"gone\.jpg"):
        pack_images(lst, out / "x", root=tmp_path)
    assert os.listdir(out) == []  # nothing half-written, not even temporary files
    write_list(lst, [ListItem(0, (0,), "china/a.jpg"), ListItem(2, (1,), "bad.jpg")])
    with pytest.raises(DecodeError, match=r"bad\.jpg: cannot decode image: .*"):
        pack_images(lst, out / "x", root=tmp_path)
    assert os.listdir(out) == []
    result = pack_images(lst, out / "x", root=tmp_path, on_error="skip")
    assert result.count == 1 and [s[:2] for s in result.skipped] == [(2, "bad.jpg")]
    with pytest.warns(RuntimeWarning, match=r"pack: skipping bad\.jpg: .*cannot decode image"):
        pack_images(lst, out / "y", root=tmp_path, on_error="warn")


def test_argument_validation(tree, tmp_path):
    with pytest.raises(ValueError, match=r"`pass_through` keeps the original bytes: it cannot be"):
        pack_images(tree, tmp_path / "x", encode=EncodeOptions(resize=10, pass_through=True))
    with pytest.raises(ValueError, match=r"`quality` must be an int in \[0, 9\] for encoding '\.png', got 50"):
        pack_images(tree, tmp_path / "x", encode=EncodeOptions(encoding=".png", quality=50))
    with pytest.raises(ValueError, match=r"`num_shards` must be a positive int, got 0"):
        pack_images(tree, tmp_path / "x", num_shards=0)
    with pytest.raises(ValueError, match=r"`format` must be one of 'recordio', 'tfrecord', got 'zip'"):
        pack_images(tree, tmp_path / "x", format="zip")
    with pytest.raises(FileNotFoundError, match=r"`source` '.*nowhere' is neither a folder nor a \.lst"):
        pack_images(tmp_path / "nowhere", tmp_path / "x")
    with pytest.raises(ValueError, match=r"`root` is only for a \.lst source"):
        pack_images(tree, tmp_path / "x", root=tree)
    with pytest.raises(ValueError, match=r"`img` must be a uint8 array of shape"):
        encode_image(np.zeros((2, 2, 4), np.uint8))


def test_cli_pack(tree, tmp_path, capsys):
    assert cli_main(["pack", str(tree), str(tmp_path / "cli"), "--resize", "16", "--num-shards", "2"]) == 0
    captured = capsys.readouterr()
    assert "pack: 7/7 images (100%)" in captured.err
    assert "packed 7 images into 2 file(s):" in captured.out
    assert "classes: 3 (china, flower, mixed)" in captured.out
    assert (tmp_path / "cli-00001-of-00002.idx").exists() and (tmp_path / "cli.lst").exists()
    code = cli_main(["pack", str(tree), str(tmp_path / "bad"), "--pass-through", "--resize", "8", "--quiet"])
    assert code == 2
    assert "feedline pack: error: `pass_through` keeps the original bytes" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli_main(["pack", str(tree), str(tmp_path / "bad"), "--num-workers", "0"])
    assert "--num-workers: must be a positive int, got 0" in capsys.readouterr().err


def test_tfrecord_shards_follow_example_conventions(tree, tmp_path):
    example = pytest.importorskip("feedline.example")
    from feedline import tfrecord

    result = pack_images(tree, tmp_path / "tf", format="tfrecord", num_shards=2, encode=EncodeOptions(encoding=".png"))
    assert [os.path.basename(p) for p in result.files] == [
        "tf-00000-of-00002.tfrecord",
        "tf-00001-of-00002.tfrecord",
    ]
    assert result.index_files == []
    items = {item.index: item for item in read_list(result.list_file)}
    seen = set()
    for path in result.files:
        for record in tfrecord.read(path):
            features = example.decode_example(record)
            index = int(np.asarray(features["image/id"]).ravel()[0])
            item = items[index]
            seen.add(index)
            encoded = _first_bytes(features["image/encoded"])
            img = decode(encoded)
            np.testing.assert_array_equal(img, decode((tree / item.path).read_bytes()))
            assert int(np.asarray(features["image/class/label"]).ravel()[0]) == int(item.labels[0])
            assert int(np.asarray(features["image/height"]).ravel()[0]) == img.shape[0]
            assert int(np.asarray(features["image/width"]).ravel()[0]) == img.shape[1]
            assert int(np.asarray(features["image/channels"]).ravel()[0]) == 3
            assert _first_bytes(features["image/format"]) == b"png"
            assert _first_bytes(features["image/filename"]) == item.path.encode()
    assert seen == set(items)


def _first_bytes(value) -> bytes:
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    return bytes(list(value)[0])


MXNET_READ = textwrap.dedent(
    """
    import json, sys
    import mxnet as mx
    rec, idx = sys.argv[1], sys.argv[2]
    r = mx.recordio.MXIndexedRecordIO(idx, rec, "r")
    out = {"records": {}}
    for key in sorted(r.keys):
        header, img = mx.recordio.unpack_img(r.read_idx(key))
        out["records"][str(key)] = [float(header.label), int(header.id), list(img.shape), float(img.mean())]
    it = mx.io.ImageRecordIter(path_imgrec=rec, path_imgidx=idx, data_shape=(3, 16, 16), batch_size=7,
                               resize=16, rand_crop=False, shuffle=False, round_batch=False)
    batch = next(iter(it))
    out["iter_labels"] = sorted(batch.label[0].asnumpy().tolist())
    out["iter_shape"] = list(batch.data[0].shape)
    print(json.dumps(out))
    """
)


@pytest.mark.slow
def test_mxnet_reads_what_we_pack(tree, tmp_path):
    python = peer_python("mxnet")
    result = pack_images(tree, tmp_path / "mx", encode=EncodeOptions(resize=20, encoding=".png"))
    script = tmp_path / "read.py"
    script.write_text(MXNET_READ)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run(
        [str(python), str(script), result.files[0], result.index_files[0]],
        capture_output=True, text=True, timeout=120, env=env, check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    ours = _read_rec(result.files[0], result.index_files[0])
    assert sorted(int(k) for k in seen["records"]) == sorted(ours)
    for key, (label, rid, shape, mean) in seen["records"].items():
        header, payload = ours[int(key)]
        img = decode(payload)  # MXNet decodes to BGR: same mean, same shape
        assert (label, rid, tuple(shape)) == (header.label, header.id, img.shape)
        assert abs(mean - img.mean()) < 1e-3
    assert seen["iter_labels"] == sorted(h.label for h, _ in ours.values())
    assert seen["iter_shape"] == [7, 3, 16, 16]


TF_READ = textwrap.dedent(
    """
    import json, sys
    import tensorflow as tf
    spec = {
        "image/encoded": tf.io.FixedLenFeature([], tf.string),
        "image/format": tf.io.FixedLenFeature([], tf.string),
        "image/class/label": tf.io.FixedLenFeature([], tf.int64),
        "image/height": tf.io.FixedLenFeature([], tf.int64),
        "image/width": tf.io.FixedLenFeature([], tf.int64),
        "image/channels": tf.io.FixedLenFeature([], tf.int64),
        "image/filename": tf.io.FixedLenFeature([], tf.string),
        "image/id": tf.io.FixedLenFeature([], tf.int64),
    }
    out = []
    for record in tf.data.TFRecordDataset(sys.argv[1:]):
        ex = tf.io.parse_single_example(record, spec)
        img = tf.io.decode_image(ex["image/encoded"], channels=3)
        out.append([int(ex["image/id"]), int(ex["image/class/label"]), int(ex["image/height"]),
                    int(ex["image/width"]), int(ex["image/channels"]), ex["image/format"].numpy().decode(),
                    ex["image/filename"].numpy().decode(), list(img.shape), float(tf.reduce_mean(tf.cast(img, tf.float64)))])
    print(json.dumps(out))
    """
)


@pytest.mark.slow
def test_tensorflow_parses_our_tfrecord_shards(tree, tmp_path):
    pytest.importorskip("feedline.example")
    python = peer_python("tensorflow")
    result = pack_images(tree, tmp_path / "tf", format="tfrecord", num_shards=2, encode=EncodeOptions(resize=20))
    script = tmp_path / "read_tf.py"
    script.write_text(TF_READ)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    done = subprocess.run(
        [str(python), str(script), *result.files],
        capture_output=True, text=True, timeout=300, env=env, check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    rows = json.loads(done.stdout.strip().splitlines()[-1])
    items = {item.index: item for item in read_list(result.list_file)}
    assert sorted(r[0] for r in rows) == sorted(items)
    for rid, label, height, width, channels, fmt, filename, shape, mean in rows:
        item = items[rid]
        assert (label, fmt, filename, channels) == (int(item.labels[0]), "jpeg", item.path, 3)
        assert shape == [height, width, 3] and min(height, width) == 20
        assert abs(mean - decode_mean(result.files, rid)) < 1.0


def decode_mean(files, rid) -> float:
    from feedline import example, tfrecord

    for path in files:
        for record in tfrecord.read(path):
            features = example.decode_example(record)
            if int(features["image/id"][0]) == rid:
                return float(decode(features["image/encoded"][0]).mean())
    raise AssertionError(f"id {rid} not found")
