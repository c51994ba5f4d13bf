"""``feedline pack`` refuses images outside the image root (``..``, absolute paths,
symbolic links) unless ``allow_outside_root`` / ``--allow-outside-root``."""

from __future__ import annotations

import os

import numpy as np
import pytest

simplejpeg = pytest.importorskip("simplejpeg")

from feedline import recordio  # noqa: E402
from feedline.cli import main  # noqa: E402
from feedline.image import EncodeOptions, SourceOptions  # noqa: E402
from feedline.image.listfile import ListItem, write_list  # noqa: E402
from feedline.image.pack import pack_images  # noqa: E402


@pytest.fixture
def layout(tmp_path):
    root = tmp_path / "root"
    (root / "cat").mkdir(parents=True)
    secret = tmp_path / "secret"
    secret.mkdir()
    jpeg = simplejpeg.encode_jpeg(np.zeros((8, 8, 3), np.uint8))
    (root / "cat" / "in.jpg").write_bytes(jpeg)
    (secret / "out.jpg").write_bytes(jpeg)
    os.symlink(secret / "out.jpg", root / "cat" / "link.jpg")
    os.symlink(root / "cat" / "in.jpg", root / "cat" / "inner-link.jpg")  # stays inside
    return tmp_path, root, secret


@pytest.mark.parametrize("which", ["dotdot", "absolute", "symlink"])
def test_paths_leaving_the_root_are_refused(layout, which):
    tmp_path, root, secret = layout
    rel = {
        "dotdot": "../secret/out.jpg",
        "absolute": str(secret / "out.jpg"),
        "symlink": "cat/link.jpg",
    }[which]
    lst = tmp_path / "a.lst"
    write_list(lst, [ListItem(0, (0.0,), "cat/in.jpg"), ListItem(1, (1.0,), rel)])
    out = tmp_path / "out" / "train"
    with pytest.raises(PermissionError, match=r"is outside the image root .*allow_outside_root=True \(--allow-outside-root\)"):
        pack_images(lst, out, root=root, encode=EncodeOptions(pass_through=True))
    assert not (tmp_path / "out").exists() or os.listdir(tmp_path / "out") == []
    result = pack_images(lst, out, root=root, encode=EncodeOptions(pass_through=True), on_error="skip")
    assert result.count == 1 and len(result.skipped) == 1
    result = pack_images(lst, out, root=root, encode=EncodeOptions(pass_through=True), source_options=SourceOptions(allow_outside_root=True))
    assert result.count == 2
    assert len(list(recordio.read(str(out) + ".rec"))) == 2


def test_cli_flag(layout, capsys):
    tmp_path, root, _ = layout
    lst = tmp_path / "b.lst"
    write_list(lst, [ListItem(0, (0.0,), "../secret/out.jpg"), ListItem(1, (0.0,), "cat/inner-link.jpg")])
    out = str(tmp_path / "cli" / "train")
    assert main(["pack", str(lst), out, "--root", str(root), "--pass-through", "--quiet"]) == 2
    assert "is outside the image root" in capsys.readouterr().err
    assert main(["pack", str(lst), out, "--root", str(root), "--pass-through", "--quiet",
                 "--allow-outside-root"]) == 0
    assert len(list(recordio.read(out + ".rec"))) == 2


def test_folder_source_with_a_symlink_out(layout):
    tmp_path, root, _ = layout
    with pytest.raises(PermissionError, match="'cat/link.jpg' is outside the image root"):
        pack_images(root, tmp_path / "f" / "train", encode=EncodeOptions(pass_through=True))
