"""`feedline inspect` and `feedline index` on every peer-written fixture (in-process)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from feedline import tfrecord
from feedline.cli import main
from feedline.cli.inspect import detect_format

# file -> (format, compression, record count) as the fixtures' expected.json files say
FIXTURES = {
    "tensorflow/raw.tfrecord": ("tfrecord", None, 12),
    "tensorflow/raw.gz.tfrecord": ("tfrecord", "GZIP", 12),
    "tensorflow/raw.zlib.tfrecord": ("tfrecord", "ZLIB", 12),
    "tensorflow/corrupt_data_crc.tfrecord": ("tfrecord", None, 6),
    "tensorflow/corrupt_length_crc.tfrecord": ("tfrecord", None, 4),
    "tensorflow/truncated.tfrecord": ("tfrecord", None, 8),
    "tensorflow/examples.tfrecord": ("tfrecord", None, 24),
    "tensorflow/sequence_examples.tfrecord": ("tfrecord", None, 10),
    "tensorflow/table.csv": ("csv", None, 30),
    "tensorflow/table_missing_required.csv": ("csv", None, 2),
    "tensorflow/cifar10_batch.bin": ("cifar10", None, 25),
    "public/pwnall_singles.tfrecords": ("tfrecord", None, 3),
    "public/tfx_penguin_eval.tfrecord.gz": ("tfrecord", "GZIP", 100),
    "public/tfx_sequence_eval.tfrecord.gz": ("tfrecord", "GZIP", 4500),
    "mxnet/raw.rec": ("recordio", None, 17),
    "mxnet/raw.idx": ("recordio_idx", None, 17),
    "mxnet/images.rec": ("recordio", None, 12),
    "mxnet/images.idx": ("recordio_idx", None, 12),
    "mxnet/part-a.rec": ("recordio", None, None),
    "mxnet/part-b.rec": ("recordio", None, None),
    "mxnet/part-c.rec": ("recordio", None, None),
}
DAMAGED = {
    "tensorflow/corrupt_data_crc.tfrecord": "record 6 at byte 2743",
    "tensorflow/corrupt_length_crc.tfrecord": "record 4 at byte 324",
    "tensorflow/truncated.tfrecord": "record 8 at byte 9110",
}


def _inspect_json(capsys, *argv):
    rc = main(["inspect", "--json", *map(str, argv)])
    return rc, json.loads(capsys.readouterr().out)


def test_every_fixture_is_covered(fixtures_dir):
    on_disk = {
        str(p.relative_to(fixtures_dir))
        for p in fixtures_dir.rglob("*")
        if p.is_file() and p.suffix not in (".json", ".md", ".py")  # not scripts that made them
        and p.relative_to(fixtures_dir).parts[0] in ("tensorflow", "mxnet", "public")
    }
    assert on_disk == set(FIXTURES)


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_inspect_every_fixture(fixtures_dir, capsys, name):
    fmt, compression, count = FIXTURES[name]
    path = fixtures_dir / name
    assert detect_format(path) == (fmt, compression)
    rc, [info] = _inspect_json(capsys, path)
    assert (info["format"], info["compression"]) == (fmt, compression)
    assert info["size_bytes"] == path.stat().st_size
    if count is not None:
        assert info["count"] == count
    if name in DAMAGED:
        assert rc == 1 and DAMAGED[name] in info["error"] and str(path) in info["error"]
    else:
        assert rc == 0 and info["error"] is None
    assert len(info["records"]) == min(3, info["count"])
    # the human-readable form prints the same facts
    assert main(["inspect", "--limit", "1", str(path)]) == rc
    text = capsys.readouterr().out
    assert f"{path}: {fmt}" in text and f"records: {info['count']}" in text


def test_inspect_decodes_records(fixtures_dir, capsys):
    tf = fixtures_dir / "tensorflow"
    rc, infos = _inspect_json(
        capsys,
        tf / "examples.tfrecord",
        tf / "sequence_examples.tfrecord",
        fixtures_dir / "mxnet" / "images.rec",
        tf / "table.csv",
        tf / "cifar10_batch.bin",
        tf / "raw.tfrecord",
    )
    assert rc == 0
    ex, seq, rec, table, cifar, raw = infos
    first = ex["records"][0]
    assert first["type"] == "Example"
    assert first["features"]["big"] == {
        "kind": "int64",
        "count": 2,
        "values": [4611686018427387904, -9223372036854775808],
    }
    assert first["features"]["label"]["values"] == [6]
    assert ex["record_bytes"] == {"min": 186, "mean": 208.0, "max": 234}
    assert seq["records"][2]["type"] == "SequenceExample"
    assert seq["records"][2]["feature_lists"]["tokens"]["steps"] == 6
    mx = json.loads((fixtures_dir / "mxnet" / "expected.json").read_text())["images.rec"]["records"]
    for shown, want in zip(rec["records"], mx):
        assert shown["header"]["flag"] == want["flag"]
        assert shown["header"]["id"] == want["id"]
        assert shown["payload_format"] == want["format"].lstrip(".").replace("jpg", "jpeg")
    assert table["columns"] == 4 and table["records"][0]["fields"][2] == "quoted, with comma 0"
    labels = json.loads((fixtures_dir / "tensorflow" / "expected.json").read_text())[
        "cifar10_batch.bin"
    ]["labels"]
    assert [r["label"] for r in cifar["records"]] == labels[:3]
    assert raw["records"][0] == {"index": 0, "bytes": 0, "type": "raw", "head_hex": ""}


def test_inspect_limit_and_missing_file(fixtures_dir, capsys, tmp_path):
    rc, [info] = _inspect_json(
        capsys, "--limit", "0", fixtures_dir / "tensorflow" / "examples.tfrecord"
    )
    assert rc == 0 and info["records"] == [] and info["count"] == 24
    assert main(["inspect", "--json", str(tmp_path / "nope.tfrecord")]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == f"feedline inspect: error: {tmp_path / 'nope.tfrecord'}: no such file\n"
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    rc, [info] = _inspect_json(capsys, empty)
    assert rc == 0 and info["format"] == "empty" and info["count"] == 0
    junk = tmp_path / "junk"
    junk.write_bytes(bytes(range(256)) * 3)
    rc, [info] = _inspect_json(capsys, junk)
    assert rc == 2 and info["format"] == "unknown" and info["status"] == 2  # as bench and index
    with pytest.raises(SystemExit):
        main(["inspect", "--limit", "-1", str(junk)])


def test_inspect_mnist_idx(tmp_path, capsys):
    idx = pytest.importorskip("feedline.idx")
    images = tmp_path / "train-images-idx3-ubyte"
    idx.write_idx(images, np.arange(2 * 28 * 28, dtype=np.uint8).reshape(2, 28, 28) % 251)
    labels = tmp_path / "labels-idx1-ubyte.gz"
    idx.write_idx(labels, np.array([5, 0, 4], dtype=np.uint8))
    rc, (im, lb) = _inspect_json(capsys, images, labels)
    assert rc == 0
    assert (im["format"], im["compression"], im["count"], im["shape"]) == (
        "idx",
        None,
        2,
        [2, 28, 28],
    )
    assert im["record_bytes"] == {"min": 784, "mean": 784.0, "max": 784}
    assert (lb["format"], lb["compression"], lb["count"]) == ("idx", "GZIP", 3)
    assert [r["values"] for r in lb["records"]] == [[5], [0], [4]]


def test_inspect_text_and_gzip_csv(tmp_path, capsys):
    from feedline import text

    plain = tmp_path / "notes.txt"
    text.write_lines(plain, ["just words", "more words here"])
    gz = tmp_path / "t.csv.gz"
    text.write_lines(gz, ["a,b", "1,2", "3,4"], compression="GZIP")
    rc, (t, c) = _inspect_json(capsys, plain, gz)
    assert rc == 0
    assert (t["format"], t["count"], t["records"][1]["text"]) == ("text", 2, "more words here")
    assert (c["format"], c["compression"], c["count"], c["columns"]) == ("csv", "GZIP", 3, 2)


# --------------------------------------------------------------------------- index


def test_index_every_fixture(fixtures_dir, tmp_path, capsys):
    names = sorted(FIXTURES)
    rc = main(
        ["index", "--json", "--output-dir", str(tmp_path), *(str(fixtures_dir / n) for n in names)]
    )
    results = {r["path"]: r for r in json.loads(capsys.readouterr().out)}
    assert rc == 2  # formats without an index are the wrong type of file (2); damaged ones 1
    for name in names:
        fmt, _, count = FIXTURES[name]
        r = results[str(fixtures_dir / name)]
        if fmt in ("tfrecord", "recordio") and name not in DAMAGED:
            assert r["error"] is None and r["index"].startswith(str(tmp_path))
            if count is not None:
                assert r["records"] == count
        elif name in DAMAGED:
            assert DAMAGED[name] in r["error"] and r["status"] == 1
        else:
            label = {"csv": "CSV", "cifar10": "CIFAR-10", "recordio_idx": "RecordIO .idx"}[fmt]
            assert r["error"] == (f"{fixtures_dir / name}: a {label} file; feedline index reads "
                                  "only TFRecord and RecordIO files") and r["status"] == 2
    expected = json.loads((fixtures_dir / "tensorflow" / "expected.json").read_text())
    index = tfrecord.TFRecordIndex.load(tmp_path / "raw.tfrecord.index")
    assert index.offsets.tolist() == expected["raw.tfrecord"]["record_offsets"]
    gz_index = tfrecord.TFRecordIndex.load(tmp_path / "raw.gz.tfrecord.index")
    assert gz_index.compression == "GZIP" and gz_index.offsets.tolist() == index.offsets.tolist()
    mx = json.loads((fixtures_dir / "mxnet" / "expected.json").read_text())["raw.rec"]
    lines = (tmp_path / "raw.idx").read_text().splitlines()
    assert [int(line.split("\t")[1]) for line in lines] == mx["idx_offsets"]


def test_index_skip_damaged_and_default_location(fixtures_dir, tmp_path, capsys):
    src = tmp_path / "c.tfrecord"
    src.write_bytes((fixtures_dir / "tensorflow" / "corrupt_length_crc.tfrecord").read_bytes())
    assert main(["index", str(src)]) == 1
    assert "record 4 at byte 324: corrupted record: length CRC mismatch" in capsys.readouterr().err
    assert main(["index", "--skip-damaged", str(src)]) == 0
    assert f"{src}: tfrecord, 11 records -> {src}.index" in capsys.readouterr().out
    with tfrecord.TFRecordFile(src) as f:
        assert len(f) == 11
    # a reader resynchronises by the index it finds beside the file
    it = tfrecord.read(src, on_error="skip")
    assert len(list(it)) == 11 and it.skipped == 1
