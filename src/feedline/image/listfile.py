"""MXNet image list files (``.lst``): read, write, and make one from a folder of classes.

A ``.lst`` file, as MXNet's ``im2rec`` writes and reads it, has one line per image::

    index<TAB>label[<TAB>label ...]<TAB>relative/path.jpg

``index`` is an int (it becomes the record id), there is at least one label (floats;
``im2rec`` writes them as ``%f``, e.g. ``3.000000``), and the path is relative to an
image root folder. :func:`list_folder` makes the list of a folder tree with one
subfolder per class (labels 0, 1, ... in sorted order of the subfolder names), as
``im2rec --list --recursive`` does.

>>> import os, tempfile
>>> d = tempfile.mkdtemp()
>>> write_list(os.path.join(d, "a.lst"), [ListItem(0, (1.0,), "cat/1.jpg"), ListItem(1, (0.0, 2.5), "x.png")])
>>> open(os.path.join(d, "a.lst")).read().splitlines()
['0\\t1.000000\\tcat/1.jpg', '1\\t0.000000\\t2.500000\\tx.png']
>>> read_list(os.path.join(d, "a.lst"))[1]
ListItem(index=1, labels=(0.0, 2.5), path='x.png')
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from feedline._internal.atomic import replace_file
from feedline.exceptions import DataError

__all__ = ["ListItem", "read_list", "write_list", "list_folder", "IMAGE_EXTENSIONS"]

#: File name endings (compared in lower case) that :func:`list_folder` takes as images,
#: im2rec's default ``--exts``.
IMAGE_EXTENSIONS = (".jpeg", ".jpg", ".png")


class ListItem(NamedTuple):
    """One line of a ``.lst`` file: ``index``, ``labels`` (a tuple of floats, at least
    one) and ``path`` (relative to the image root, ``/``-separated)."""

    index: int
    labels: tuple[float, ...]
    path: str


def read_list(path: str | os.PathLike) -> list[ListItem]:
    """Parse a ``.lst`` file. Blank lines are skipped; a malformed line raises
    :class:`~feedline.exceptions.DataError` naming the file and line.

    Fields may be separated by tabs (MXNet's format); surrounding whitespace of each
    field is removed, as ``im2rec`` does.
    """
    path = os.fspath(path)
    items = []
    with open(path, encoding="utf-8", newline="") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            fields = [x.strip() for x in line.rstrip("\r\n").split("\t")]
            if len(fields) < 3:
                raise DataError(
                    f"expected index<TAB>label(s)<TAB>path, got {len(fields)} field(s): "
                    f"{line.rstrip()!r}",
                    path=path,
                    line=lineno,
                )
            try:
                index = int(fields[0])
            except ValueError:
                raise DataError(f"index {fields[0]!r} is not an int", path=path, line=lineno) from None
            try:
                labels = tuple(float(x) for x in fields[1:-1])
            except ValueError as exc:
                raise DataError(f"bad label: {exc}", path=path, line=lineno) from None
            if not fields[-1]:
                raise DataError("empty image path", path=path, line=lineno)
            items.append(ListItem(index, labels, fields[-1]))
    return items


def _format_label(value: float) -> str:
    if not math.isfinite(value):
        raise ValueError(f"labels must be finite numbers, got {value!r}")
    return f"{value:f}"


def write_list(path: str | os.PathLike, items: Iterable[ListItem | Sequence]) -> None:
    """Write ``items`` (``ListItem`` or ``(index, labels, path)``; ``labels`` a number or
    a sequence of numbers) as a ``.lst`` file, atomically (a temporary file renamed into
    place), labels formatted ``%f`` as im2rec writes them.
    """
    path = os.fspath(path)
    lines = []
    for item in items:
        index, labels, rel = item
        if isinstance(index, bool) or not isinstance(index, int):
            raise TypeError(f"list index must be an int, got {index!r}")
        if isinstance(labels, (int, float)):
            labels = (labels,)
        if not labels:
            raise ValueError(f"item {index} has no label")
        rel = str(rel)
        if "\t" in rel or "\n" in rel or "\r" in rel:
            raise ValueError(f"image path must not contain tabs or newlines, got {rel!r}")
        lines.append("\t".join([str(index), *(_format_label(float(x)) for x in labels), rel]) + "\n")
    replace_file(path, "".join(lines).encode("utf-8"))


def list_folder(
    root: str | os.PathLike, *, exts: Sequence[str] = IMAGE_EXTENSIONS
) -> tuple[list[ListItem], list[str]]:
    """List the images of a folder tree with one subfolder per class.

    Returns ``(items, classes)``: ``classes`` are the names of the subfolders of
    ``root`` in sorted order, and class ``classes[k]`` has label ``k``. Each class
    folder is walked recursively (folders and files in sorted order, symlinks
    followed); files whose name ends in one of ``exts`` (case-insensitive) are taken.
    Indices run 0, 1, 2, ... class by class. Paths are relative to ``root`` with ``/``.

    Raises ``ValueError`` if ``root`` has no class subfolder, or image files directly in
    it (they would have no class), and ``FileNotFoundError`` if it does not exist.
    """
    root = os.fspath(root)
    if not os.path.isdir(root):
        raise FileNotFoundError(f"image folder {root!r} does not exist")
    lowered = tuple(e.lower() for e in exts)
    entries = sorted(os.listdir(root))
    loose = [e for e in entries if e.lower().endswith(lowered) and os.path.isfile(os.path.join(root, e))]
    if loose:
        raise ValueError(
            f"{root}: {len(loose)} image(s) directly in the root folder (e.g. {loose[0]!r}); "
            "put each class's images in its own subfolder"
        )
    classes = [e for e in entries if os.path.isdir(os.path.join(root, e))]
    if not classes:
        raise ValueError(f"{root}: no class subfolders found")
    items: list[ListItem] = []
    for label, name in enumerate(classes):
        base = os.path.join(root, name)
        for dirpath, dirnames, filenames in os.walk(base, followlinks=True):
            dirnames.sort()
            for fname in sorted(filenames):
                if fname.lower().endswith(lowered):
                    rel = os.path.relpath(os.path.join(dirpath, fname), root)
                    items.append(ListItem(len(items), (float(label),), rel.replace(os.sep, "/")))
    return items, classes
