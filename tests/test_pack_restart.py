"""``pack_images(..., restart_markers=True)`` / ``feedline pack --restart-markers``: every
JPEG payload rewritten losslessly with restart markers, nothing else changed."""

from __future__ import annotations

import io
import pathlib

import numpy as np
import pytest

simplejpeg = pytest.importorskip("simplejpeg")
Image = pytest.importorskip("PIL.Image")

from feedline import recordio  # noqa: E402
from feedline.cli import main as cli_main  # noqa: E402
from feedline.exceptions import DecodeError, FeedlineError  # noqa: E402
from feedline.image import EncodeOptions, codec  # noqa: E402
from feedline.image.listfile import read_list  # noqa: E402
from feedline.image.pack import pack_images  # noqa: E402
from feedline.image.record_iter import ImageRecordIter  # noqa: E402

needs_extension = pytest.mark.skipif(
    not codec.region_decoding(), reason="needs the C extension feedline.image._libjpeg"
)


def _photo(h: int, w: int, seed: int) -> np.ndarray:
    """A smooth colour gradient with texture: compresses like a photo, not like noise."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    base = np.stack([x / w * 200, y / h * 180, (x + y) / (h + w) * 220], axis=-1)
    texture = rng.normal(0, 12, (h, w, 3))
    return np.clip(base + texture + 20 * np.sin(x / 5)[..., None], 0, 255).astype(np.uint8)


def _pil_bytes(arr: np.ndarray, **save) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, **save)
    return buf.getvalue()


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> pathlib.Path:
    """photos/<class>/...: JPEGs of sizes that are and are not multiples of the MCU,
    4:2:0, 4:4:4, grayscale and progressive, plus one PNG; 9 images in 2 classes."""
    root = tmp_path_factory.mktemp("restart") / "photos"
    files = {
        "a/0.jpg": simplejpeg.encode_jpeg(_photo(96, 128, 0), quality=90, colorsubsampling="420"),
        "a/1.jpg": simplejpeg.encode_jpeg(_photo(71, 133, 1), quality=85, colorsubsampling="444"),
        "a/2.jpg": simplejpeg.encode_jpeg(_photo(150, 57, 2), quality=95, colorsubsampling="422"),
        "a/3.jpg": simplejpeg.encode_jpeg(
            _photo(66, 90, 3)[:, :, :1].copy(), quality=90, colorspace="GRAY"
        ),
        "a/4.png": _pil_bytes(_photo(40, 52, 4), format="PNG"),
        "b/5.jpg": _pil_bytes(_photo(88, 120, 5), format="JPEG", quality=88, progressive=True),
        "b/6.jpg": simplejpeg.encode_jpeg(_photo(200, 160, 6), quality=80),
        "b/7.jpg": simplejpeg.encode_jpeg(_photo(33, 47, 7), quality=92),
        "b/8.jpg": simplejpeg.encode_jpeg(_photo(128, 96, 8), quality=75),
    }
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return root


def _payloads(result) -> dict[int, bytes]:
    """Record id -> image payload of a one-shard RecordIO or TFRecord pack."""
    out: dict[int, bytes] = {}
    if result.index_files:
        reader = recordio.IndexedRecordIO(result.index_files[0], result.files[0], "r")
        for key in reader.keys:
            header, payload = recordio.unpack(reader.read_idx(key))
            out[int(header.id)] = payload
        reader.close()
        return out
    example = pytest.importorskip("feedline.example")
    from feedline import tfrecord

    for record in tfrecord.read(result.files[0]):
        features = example.decode_example(record)
        index = int(np.asarray(features["image/id"]).ravel()[0])
        encoded = features["image/encoded"]
        out[index] = bytes(encoded if isinstance(encoded, (bytes, bytearray)) else list(encoded)[0])
    return out


@needs_extension
@pytest.mark.parametrize("format", ["recordio", "tfrecord"])
@pytest.mark.parametrize("pass_through", [True, False], ids=["pass_through", "reencoded"])
def test_restart_markers_keep_the_pixels(tree, tmp_path, format, pass_through):
    plain = pack_images(tree, tmp_path / "plain", format=format, encode=EncodeOptions(pass_through=pass_through))
    marked = pack_images(
        tree, tmp_path / "marked", format=format, encode=EncodeOptions(pass_through=pass_through, restart_markers=True)
    )
    assert marked.count == plain.count == 9 and marked.skipped == []
    before, after = _payloads(plain), _payloads(marked)
    assert sorted(after) == sorted(before) == list(range(9))
    jpegs = 0
    for index, payload in after.items():
        if codec.image_format(before[index]) != "jpeg":
            assert payload == before[index]  # the PNG is stored unchanged
            continue
        jpegs += 1
        assert not codec.has_restart_layout(before[index])
        assert codec.has_restart_layout(payload) and payload != before[index]
        np.testing.assert_array_equal(codec.decode(payload), codec.decode(before[index]))
    assert jpegs == (8 if pass_through else 9)  # re-encoding turns the PNG into a JPEG too
    # the list and the labels do not change
    assert pathlib.Path(marked.list_file).read_text() == pathlib.Path(plain.list_file).read_text()


def test_pass_through_without_the_option_keeps_the_file_bytes(tree, tmp_path):
    result = pack_images(tree, tmp_path / "plain", encode=EncodeOptions(pass_through=True, restart_markers=False))
    payloads = _payloads(result)
    for item in read_list(result.list_file):
        assert payloads[item.index] == (tree / item.path).read_bytes()


@needs_extension
def test_png_is_stored_unchanged(tree, tmp_path):
    result = pack_images(tree, tmp_path / "m", encode=EncodeOptions(pass_through=True, restart_markers=True))
    payloads = _payloads(result)
    for item in read_list(result.list_file):
        original = (tree / item.path).read_bytes()
        if item.path.endswith(".png"):
            assert payloads[item.index] == original
        else:
            assert payloads[item.index] != original


@needs_extension
def test_worker_processes_do_the_same(tree, tmp_path, leak_check):
    one = pack_images(tree, tmp_path / "one", encode=EncodeOptions(pass_through=True, restart_markers=True))
    two = pack_images(
        tree, tmp_path / "two", encode=EncodeOptions(pass_through=True, restart_markers=True), num_workers=2
    )
    leak_check.assert_clean()
    for x, y in zip(one.files + one.index_files, two.files + two.index_files):
        assert pathlib.Path(x).read_bytes() == pathlib.Path(y).read_bytes()


@needs_extension
def test_image_record_iter_gives_the_same_batches(tree, tmp_path):
    plain = pack_images(tree, tmp_path / "plain", encode=EncodeOptions(pass_through=True))
    marked = pack_images(tree, tmp_path / "marked", encode=EncodeOptions(pass_through=True, restart_markers=True))
    options = dict(
        data_shape=(3, 24, 24), batch_size=4, random_resized_crop=True, min_random_area=0.1,
        max_random_area=0.6, rand_mirror=True, seed=7, dtype="uint8", shuffle=True,
        preprocess_threads=0,
    )

    def epochs(result) -> list[tuple[np.ndarray, np.ndarray]]:
        with ImageRecordIter(
            path_imgrec=result.files[0], path_imgidx=result.index_files[0], **options
        ) as it:
            out = []
            for _ in range(2):
                out += [(b.data[0].copy(), b.label[0].copy()) for b in it]
                it.reset()
        return out

    want, got = epochs(plain), epochs(marked)
    assert len(got) == len(want) == 6  # 9 images, round_batch: 3 batches an epoch
    for (data, label), (want_data, want_label) in zip(got, want):
        assert data.dtype == np.uint8 and data.shape == (4, 3, 24, 24)
        np.testing.assert_array_equal(label, want_label)
        np.testing.assert_array_equal(data, want_data)


@needs_extension
def test_cli_flag(tree, tmp_path, capsys):
    out = tmp_path / "cli"
    argv = ["pack", str(tree), str(out), "--pass-through", "--restart-markers", "--quiet"]
    assert cli_main(argv) == 0
    assert "packed 9 images into 1 file(s):" in capsys.readouterr().out
    result = pack_images(tree, tmp_path / "api", encode=EncodeOptions(pass_through=True, restart_markers=True))
    assert (tmp_path / "cli.rec").read_bytes() == pathlib.Path(result.files[0]).read_bytes()
    marked = [p for p in _payloads(result).values() if codec.has_restart_layout(p)]
    assert len(marked) == 8


def test_option_validation(tree, tmp_path):
    with pytest.raises(TypeError, match=r"`restart_markers` must be a bool, got 'yes'"):
        pack_images(tree, tmp_path / "x", encode=EncodeOptions(restart_markers="yes"))
    assert not (tmp_path / "x.rec").exists()


def test_missing_extension_fails_before_writing(tree, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(codec, "_region_decoder", lambda: None)
    out = tmp_path / "out"
    with pytest.raises(FeedlineError, match=r"feedline\.image\._libjpeg"):
        pack_images(tree, out / "x", encode=EncodeOptions(pass_through=True, restart_markers=True))
    assert not out.exists()  # not even the output folder or the .lst
    code = cli_main(["pack", str(tree), str(out / "x"), "--restart-markers", "--quiet"])
    assert code == 1
    err = capsys.readouterr().err
    assert "feedline pack: error:" in err and "feedline.image._libjpeg" in err
    assert not out.exists()
    # without the option nothing needs the extension
    assert pack_images(tree, out / "y", encode=EncodeOptions(pass_through=True)).count == 9


@pytest.fixture()
def broken(tree, tmp_path) -> pathlib.Path:
    """A folder whose ``bad/bad.jpg`` is a JPEG cut in half (the header still reads)."""
    root = tmp_path / "broken"
    (root / "good").mkdir(parents=True)
    (root / "bad").mkdir()
    (root / "good" / "ok.jpg").write_bytes((tree / "a/0.jpg").read_bytes())
    data = (tree / "b/6.jpg").read_bytes()
    (root / "bad" / "bad.jpg").write_bytes(data[: len(data) // 2])
    return root


@needs_extension
def test_broken_jpeg_reencoded_fails_as_before(broken, tmp_path):
    out = tmp_path / "out"
    for restart_markers in (False, True):
        with pytest.raises(DecodeError, match=r"bad\.jpg: cannot decode image"):
            pack_images(broken, out / "x", encode=EncodeOptions(restart_markers=restart_markers))
        assert not (out / "x.rec").exists() and not (out / "x.lst").exists()
        result = pack_images(broken, out / f"s{restart_markers}", encode=EncodeOptions(restart_markers=restart_markers),
                             on_error="skip")
        assert result.count == 1 and [s[:2] for s in result.skipped] == [(0, "bad/bad.jpg")]
        assert "cannot decode image" in result.skipped[0][2]


@needs_extension
def test_broken_jpeg_passed_through_follows_on_error(broken, tmp_path):
    out = tmp_path / "out"
    # without the option the bytes are stored as they are (no decode) ...
    assert pack_images(broken, out / "plain", encode=EncodeOptions(pass_through=True)).count == 2
    # ... with it the rewrite decodes them, and a failure is an undecodable image
    with pytest.raises(DecodeError, match=r"bad\.jpg: cannot add restart markers: .+"):
        pack_images(broken, out / "x", encode=EncodeOptions(pass_through=True, restart_markers=True))
    assert not (out / "x.rec").exists() and not (out / "x.lst").exists()
    result = pack_images(
        broken, out / "s", encode=EncodeOptions(pass_through=True, restart_markers=True), on_error="skip"
    )
    assert result.count == 1 and [s[:2] for s in result.skipped] == [(0, "bad/bad.jpg")]
    assert "cannot add restart markers" in result.skipped[0][2]
    assert codec.has_restart_layout(next(iter(_payloads(result).values())))
    with pytest.warns(RuntimeWarning, match=r"pack: skipping bad/bad\.jpg: .*cannot add restart"):
        pack_images(broken, out / "w", encode=EncodeOptions(pass_through=True, restart_markers=True), on_error="warn")
