"""The command line's one error boundary: every subcommand given a missing file, a
directory of the wrong kind, a damaged file or a bad option prints exactly one line
``feedline COMMAND: error: ...`` on stderr and exits non-zero, never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from feedline import recordio, tfrecord
from feedline.cli import UsageError, main
from feedline.exceptions import CorruptRecordError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(capsys, *argv):
    """``main(argv)`` -> (status, stdout, stderr); a parser error counts as its exit code."""
    try:
        status = main([str(a) for a in argv])
    except SystemExit as exc:
        status = exc.code
    out, err = capsys.readouterr()
    return status, out, err


def _one_line(err: str, command: str, *fragments: str) -> None:
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert err.startswith(f"feedline {command}: error: "), err
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in err, (fragment, err)


@pytest.fixture
def damaged(tmp_path):
    """A TFRecord and a RecordIO file cut inside their 3rd record, an image folder with a
    file that is no image, and an MNIST folder whose training images are cut short."""
    tf = tmp_path / "cut.tfrecord"
    tfrecord.write(str(tf), [b"a" * 40] * 4)
    tf.write_bytes(tf.read_bytes()[: 2 * (16 + 40) + 20])
    rec = tmp_path / "cut.rec"
    with recordio.RecordIOWriter(str(rec)) as w:
        for _ in range(4):
            w.write(b"b" * 40)
    rec.write_bytes(rec.read_bytes()[: 2 * 48 + 20])
    images = tmp_path / "images" / "cat"
    images.mkdir(parents=True)
    (images / "x.jpg").write_bytes(b"this is not a JPEG")
    mnist = tmp_path / "mnist"
    mnist.mkdir()
    from feedline.idx import write_idx

    write_idx(mnist / "train-images-idx3-ubyte", np.zeros((4, 28, 28), np.uint8))
    write_idx(mnist / "train-labels-idx1-ubyte", np.zeros(4, np.uint8))
    write_idx(mnist / "t10k-images-idx3-ubyte", np.zeros((2, 28, 28), np.uint8))
    write_idx(mnist / "t10k-labels-idx1-ubyte", np.zeros(2, np.uint8))
    path = mnist / "train-images-idx3-ubyte"
    path.write_bytes(path.read_bytes()[:-100])
    return {"tfrecord": tf, "rec": rec, "images": tmp_path / "images", "mnist": mnist}


# --------------------------------------------------------------------------- missing file

@pytest.mark.parametrize("command", ["inspect", "index", "bench"])
def test_missing_file(capsys, tmp_path, command):
    status, out, err = _run(capsys, command, tmp_path / "nope.tfrecord")
    assert status == 2 and out == ""
    assert err == f"feedline {command}: error: {tmp_path / 'nope.tfrecord'}: no such file\n"


def test_missing_file_pack_and_demo(capsys, tmp_path):
    status, out, err = _run(capsys, "pack", tmp_path / "nope", tmp_path / "out")
    assert status == 2 and out == ""
    _one_line(err, "pack", "nope: no such file or directory")
    status, out, err = _run(capsys, "pack", tmp_path / "nope.lst", tmp_path / "out")
    assert status == 2
    _one_line(err, "pack", "nope.lst")
    (tmp_path / "mnist").mkdir()
    status, out, err = _run(capsys, "demo", "--mnist", tmp_path / "mnist", "--out", tmp_path / "o")
    assert status == 2 and out == ""
    _one_line(err, "demo", "train-images-idx3-ubyte[.gz] not found in")
    status, out, err = _run(capsys, "demo", "--mnist", tmp_path / "absent", "--out", tmp_path / "o")
    assert status == 2
    _one_line(err, "demo", "--mnist", "no such directory")


# --------------------------------------------------------------------------- wrong kind

@pytest.mark.parametrize("command", ["inspect", "index", "bench"])
def test_directory_where_a_file_is_expected(capsys, tmp_path, command):
    status, out, err = _run(capsys, command, tmp_path)
    assert status == 2 and out == ""
    assert err == f"feedline {command}: error: {tmp_path}: is a directory, expected a file\n"


def test_wrong_kind_of_directory_or_file(capsys, tmp_path):
    afile = tmp_path / "plain.txt"
    afile.write_text("x\n")
    empty = tmp_path / "empty"
    empty.mkdir()
    # pack: a folder without class subfolders
    status, out, err = _run(capsys, "pack", empty, tmp_path / "out")
    assert status == 2 and out == ""
    _one_line(err, "pack", "no class subfolders")
    # demo: a file where a folder is expected
    for option in ("--mnist", "--out"):
        status, out, err = _run(capsys, "demo", option, afile)
        assert status == 2 and out == ""
        _one_line(err, "demo", f"{option} {afile}: is not a directory")
    # index: an output "directory" that is a file
    rec = tmp_path / "a.rec"
    with recordio.RecordIOWriter(str(rec)) as w:
        w.write(b"x")
    status, out, err = _run(capsys, "index", "--output-dir", afile, rec)
    assert status == 2 and out == ""
    _one_line(err, "index", f"--output-dir {afile}: is not a directory")


# --------------------------------------------------------------------------- damaged input

def test_damaged_record_files(capsys, damaged):
    tf, rec = damaged["tfrecord"], damaged["rec"]
    for command, path in (("index", tf), ("index", rec), ("bench", tf), ("bench", rec)):
        status, out, err = _run(capsys, command, path)
        assert status == 1, (command, path)
        _one_line(err, command, str(path), "record 2 at byte")
    for path in (tf, rec):
        status, out, err = _run(capsys, "inspect", path)
        assert status == 1
        _one_line(err, "inspect", str(path), "record 2 at byte")
        assert "records: 2 before the error" in out  # what could be read is still shown


def test_damaged_image_and_idx(capsys, damaged, tmp_path):
    status, out, err = _run(capsys, "pack", damaged["images"], tmp_path / "out", "--quiet")
    assert status == 1 and out == ""
    _one_line(err, "pack", "x.jpg", "cannot decode image")
    status, out, err = _run(capsys, "demo", "--mnist", damaged["mnist"], "--out", tmp_path / "o")
    assert status == 1 and out == ""
    _one_line(err, "demo", "train-images-idx3-ubyte")


# --------------------------------------------------------------------------- bad options

@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["inspect", "--limit", "-1", "x"], "argument --limit: must be a non-negative int, got -1"),
        (["index", "--no-such-option", "x"], "unrecognized arguments: --no-such-option"),
        (["bench", "--batch-size", "0", "x"], "argument --batch-size: must be a positive int"),
        (["pack", "src", "out", "--format", "zip"], "argument --format: invalid choice: 'zip'"),
        (["demo", "--passes", "many"], "argument --passes: invalid int value: 'many'"),
        (["demo", "--batch-size", "0"], "--batch-size must be a positive int, got 0"),
    ],
)
def test_bad_option(capsys, tmp_path, argv, fragment):
    if argv[0] == "demo":
        argv = [*argv, "--out", str(tmp_path / "o")]
    status, out, err = _run(capsys, *argv)
    assert status == 2 and out == ""
    _one_line(err, argv[0], fragment)
    assert "usage:" not in err


def test_bad_option_value_checked_by_the_library(capsys, tmp_path):
    tree = tmp_path / "images" / "cat"
    tree.mkdir(parents=True)
    (tree / "x.png").write_bytes(b"")
    status, out, err = _run(capsys, "pack", tmp_path / "images", tmp_path / "o", "--pass-through",
                            "--resize", "8")
    assert status == 2
    _one_line(err, "pack", "`pass_through` keeps the original bytes")


# --------------------------------------------------------------------------- missing extra

def test_missing_extra_names_the_pip_command(capsys, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "sklearn", None)
    monkeypatch.setitem(sys.modules, "sklearn.datasets", None)
    status, out, err = _run(capsys, "demo", "--out", tmp_path / "o", "--no-plot")
    assert status == 2
    assert err == ("feedline demo: error: sklearn is needed for this feature: "
                   "pip install 'feedline[demo]'\n")


# --------------------------------------------------------------------------- --debug

def test_debug_shows_the_exception(capsys, tmp_path, damaged):
    with pytest.raises(UsageError, match="no such file"):
        main(["--debug", "inspect", str(tmp_path / "nope")])
    with pytest.raises(CorruptRecordError, match="record 2 at byte"):
        main(["bench", "--debug", str(damaged["tfrecord"])])


# --------------------------------------------------------------------------- index --force

def _write_rec(path, n):
    with recordio.RecordIOWriter(str(path)) as w:
        for i in range(n):
            w.write(b"p" * (i + 1))


def test_index_keeps_an_idx_with_other_keys_unless_forced(capsys, tmp_path):
    rec = tmp_path / "train.rec"
    _write_rec(rec, 3)
    idx = tmp_path / "train.idx"
    offsets = [int(line.split("\t")[1]) for line in _index_lines(capsys, rec, idx)]
    mxnet_ids = "".join(f"{key}\t{off}\n" for key, off in zip((17, 4, 9), offsets))
    idx.write_text(mxnet_ids)
    status, out, err = _run(capsys, "index", rec)
    assert status == 2 and out == ""
    _one_line(err, "index", f"{idx} exists with other keys (MXNet image ids 17, 4, 9)",
              "--force replaces it")
    assert idx.read_text() == mxnet_ids  # kept
    status, out, err = _run(capsys, "index", "--json", rec)
    assert status == 2 and json.loads(out)[0]["status"] == 2
    # an unreadable .idx is kept too
    idx.write_text("garbage\n")
    status, out, err = _run(capsys, "index", rec)
    assert status == 2
    _one_line(err, "index", "cannot be read as an index", "--force replaces it")
    status, out, err = _run(capsys, "index", "--force", rec)
    assert status == 0 and err == ""
    assert idx.read_text() == "".join(f"{i}\t{off}\n" for i, off in enumerate(offsets))


def _index_lines(capsys, rec, idx):
    assert _run(capsys, "index", rec)[0] == 0
    return idx.read_text().splitlines()


def test_index_replaces_an_idx_with_its_own_keys(capsys, tmp_path):
    rec = tmp_path / "train.rec"
    _write_rec(rec, 3)
    idx = tmp_path / "train.idx"
    idx.write_text("0\t0\n1\t12\n")  # stale: fewer records, the default keys
    status, out, err = _run(capsys, "index", rec)
    assert status == 0 and err == ""
    assert [line.split("\t")[0] for line in idx.read_text().splitlines()] == ["0", "1", "2"]
    assert recordio.read_index(str(idx)) == [(0, 0), (1, 12), (2, 24)]


# --------------------------------------------------------------------------- inspect --json

def test_inspect_json_shows_prefix_and_length_of_large_bytes(capsys, tmp_path):
    from feedline import example

    path = tmp_path / "big.tfrecord"
    payload = bytes(range(256)) * 40
    tfrecord.write(str(path), [example.encode_example({"image": [payload], "name": [b"cat"]})])
    status, out, err = _run(capsys, "inspect", "--json", path)
    assert status == 0 and err == ""
    assert len(out) < 2000  # not the 10 KB payload
    features = json.loads(out)[0]["records"][0]["features"]
    assert features["image"]["values"] == [{"length": 10240, "prefix": "AAECAwQFBgcICQoLDA0ODw=="}]
    assert features["name"]["values"] == ["Y2F0"]
    status, out, err = _run(capsys, "inspect", path)
    assert "... (10240 bytes)" in out and len(out) < 2000


# --------------------------------------------------------------------------- a real process

def _cli(*argv, **kwargs):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "src"))
    return subprocess.Popen([sys.executable, "-m", "feedline", *map(str, argv)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kwargs)


def test_python_m_feedline_prints_one_line_without_traceback(tmp_path):
    proc = _cli("index", tmp_path / "nope.rec")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 2 and out == b""
    assert err == f"feedline index: error: {tmp_path / 'nope.rec'}: no such file\n".encode()


def test_output_piped_into_head_ends_quietly(tmp_path):
    lines = tmp_path / "lines.txt"
    lines.write_text("".join(f"line {i} " + "x" * 100 + "\n" for i in range(5000)))
    proc = _cli("inspect", "--limit", "5000", lines)
    first = proc.stdout.readline()  # like `| head -1`: read a line, then go away
    proc.stdout.close()
    err = proc.stderr.read()
    proc.wait(timeout=120)
    assert first.startswith(str(lines).encode())
    assert err == b""  # no BrokenPipeError, no "Exception ignored"
    assert proc.returncode == 141
