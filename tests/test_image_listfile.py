"""im2rec's list mode: feedline.image.listfile.list_images / make_lists and `feedline pack --list`."""

from __future__ import annotations

import json
import os
import pathlib
import random
import subprocess

import pytest

from feedline.cli import main as cli_main
from feedline.image.listfile import list_images, make_lists, read_list

ROOT = pathlib.Path(__file__).resolve().parents[1]
from peer_envs import PEERS_DIR as PEERS  # noqa: E402
from peer_envs import peer_python  # noqa: E402

FILES = ["0.jpg", "10.png", "a/1.jpg", "a/2.JPG", "a/3.png", "a/x.txt", "a/11.jpg", "a/12.jpg",
         "b/4.jpeg", "b/13.jpg", "b/deep/5.jpg", "b/deep/6.png", "c/7.jpg", "c/8.jpg", "c/9.jpg",
         "c/notes.jpg.bak", "empty/.keep"]


@pytest.fixture
def tree(tmp_path) -> pathlib.Path:
    root = tmp_path / "tree"
    for rel in FILES:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(b"x")
    return root


def lines(path) -> list[str]:
    return pathlib.Path(path).read_text().splitlines()


def test_flat_listing_takes_only_root_images_with_label_0(tree):
    items, categories = list_images(tree)
    assert [(i.index, i.labels, i.path) for i in items] == [(0, (0.0,), "0.jpg"), (1, (0.0,), "10.png")]
    assert categories == []


def test_recursive_listing_labels_each_folder_with_images(tree):
    items, categories = list_images(tree, recursive=True)
    assert categories == [(".", 0), ("a", 1), ("b", 2), ("b/deep", 3), ("c", 4)]
    by_path = {i.path: i.labels[0] for i in items}
    assert by_path == {"0.jpg": 0, "10.png": 0, "a/1.jpg": 1, "a/11.jpg": 1, "a/12.jpg": 1,
                       "a/2.JPG": 1, "a/3.png": 1, "b/13.jpg": 2, "b/4.jpeg": 2,
                       "b/deep/5.jpg": 3, "b/deep/6.png": 3, "c/7.jpg": 4, "c/8.jpg": 4, "c/9.jpg": 4}
    assert [i.index for i in items] == list(range(14))
    assert [i.path for i in items][:4] == ["0.jpg", "10.png", "a/1.jpg", "a/11.jpg"]  # walk order
    only_png, _ = list_images(tree, recursive=True, exts=[".PNG"])
    assert [i.path for i in only_png] == ["10.png", "a/3.png", "b/deep/6.png"]


def test_make_lists_shuffles_with_im2rec_seed_and_writes_im2rec_lines(tree, tmp_path):
    made = make_lists(tree, tmp_path / "out", recursive=True)
    assert made.files == [str(tmp_path / "out.lst")] and made.counts == [14]
    expected, _ = list_images(tree, recursive=True)
    random.Random(100).shuffle(expected)
    assert read_list(made.files[0]) == expected
    first = expected[0]
    assert lines(made.files[0])[0] == f"{first.index}\t{first.labels[0]:.6f}\t{first.path}"
    unshuffled = make_lists(tree, tmp_path / "plain", recursive=True, shuffle=False)
    assert [i.index for i in read_list(unshuffled.files[0])] == list(range(14))


def test_ratios_and_chunks_split_like_im2rec(tree, tmp_path):
    made = make_lists(tree, tmp_path / "p", recursive=True, chunks=3, train_ratio=0.5,
                      test_ratio=0.25, shuffle=False)
    names = [os.path.basename(f) for f in made.files]
    assert names == ["p_0_test.lst", "p_0_val.lst", "p_0_train.lst", "p_1_test.lst", "p_1_val.lst",
                     "p_1_train.lst", "p_2_test.lst", "p_2_val.lst", "p_2_train.lst"]
    # 14 images -> chunks of ceil(14/3) = 5 (last 4); test int(5*.25)=1, train int(5*.5)=2
    assert made.counts == [1, 2, 2, 1, 2, 2, 1, 1, 2]
    indices = [[i.index for i in read_list(f)] for f in made.files]
    assert indices[:3] == [[0], [3, 4], [1, 2]] and indices[6:] == [[10], [13], [11, 12]]
    assert sorted(sum(indices, [])) == list(range(14))  # every image exactly once
    no_val = make_lists(tree, tmp_path / "q", recursive=True, train_ratio=0.75, test_ratio=0.25)
    assert [os.path.basename(f) for f in no_val.files] == ["q_test.lst", "q_train.lst"]


def test_option_validation(tree, tmp_path):
    with pytest.raises(ValueError, match=r"`train_ratio` must be a number in \[0, 1\], got 1.5"):
        make_lists(tree, tmp_path / "x", train_ratio=1.5)
    with pytest.raises(ValueError, match=r"`train_ratio` \+ `test_ratio` must be at most 1, got 0.8 \+ 0.3"):
        make_lists(tree, tmp_path / "x", train_ratio=0.8, test_ratio=0.3)
    with pytest.raises(ValueError, match=r"`chunks` must be a positive int, got 0"):
        make_lists(tree, tmp_path / "x", chunks=0)
    with pytest.raises(FileNotFoundError, match=r"image folder .*nope.* does not exist"):
        list_images(tmp_path / "nope")


def test_cli_list_mode(tree, tmp_path, capsys):
    assert cli_main(["pack", str(tree), str(tmp_path / "cli"), "--list", "--recursive",
                     "--no-shuffle", "--exts", ".jpg", ".png", "--train-ratio", "0.5"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[:2] == [". 0", "a 1"]
    train = read_list(tmp_path / "cli_train.lst")
    assert [i.path for i in train] == ["0.jpg", "10.png", "a/1.jpg", "a/11.jpg", "a/12.jpg", "a/2.JPG"]
    assert not (tmp_path / "cli.rec").exists()
    assert cli_main(["pack", str(tree), str(tmp_path / "y"), "--recursive"]) == 2
    assert "--recursive need --list" in capsys.readouterr().err


OPTIONS = [[], ["--recursive"], ["--recursive", "--no-shuffle"],
           ["--recursive", "--train-ratio", "0.6", "--test-ratio", "0.2"],
           ["--recursive", "--chunks", "3", "--train-ratio", "0.5"],
           ["--recursive", "--chunks", "4", "--test-ratio", "0.25", "--train-ratio", "0.5"],
           ["--recursive", "--test-ratio", "0.3", "--train-ratio", "0.7"]]


IM2REC_ALL = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("im2rec", sys.argv[1])
im2rec = importlib.util.module_from_spec(spec)
spec.loader.exec_module(im2rec)  # imports mxnet once; its main block does not run
jobs, root = json.loads(sys.argv[2]), sys.argv[3]
for prefix, options in jobs:
    sys.argv = ["im2rec.py", "--list", *options, prefix, root]
    im2rec.make_list(im2rec.parse_args())
"""


@pytest.mark.slow
def test_same_bytes_as_mxnet_im2rec_list(tree, tmp_path):
    """The .lst files of `feedline pack --list` equal MXNet 1.9.1's `im2rec.py --list`
    (its own make_list/parse_args, run in the peer environment)."""
    python = peer_python("mxnet")
    found = list((PEERS / "mxnet" / "lib").glob("python3*/site-packages/mxnet/tools/im2rec.py"))
    assert found, "mxnet is installed but ships no tools/im2rec.py"
    jobs = []
    for n, options in enumerate(OPTIONS):
        (tmp_path / f"m{n}").mkdir()
        (tmp_path / f"f{n}").mkdir()
        jobs.append((str(tmp_path / f"m{n}" / "p"), options))
        assert cli_main(["pack", str(tree), str(tmp_path / f"f{n}" / "p"), "--list", *options]) == 0
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run([str(python), "-c", IM2REC_ALL, str(found[0]), json.dumps(jobs), str(tree)],
                          capture_output=True, text=True, timeout=300, env=env, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    for n, options in enumerate(OPTIONS):
        theirs, ours = tmp_path / f"m{n}", tmp_path / f"f{n}"
        names = sorted(p.name for p in theirs.iterdir())
        assert names and names == sorted(p.name for p in ours.iterdir()), options
        for name in names:
            assert (ours / name).read_bytes() == (theirs / name).read_bytes(), (options, name)
