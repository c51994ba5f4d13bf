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

import logging
import math
import os
import random
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from feedline._internal.atomic import replace_file
from feedline.exceptions import DataError

__all__ = [
    "ListItem", "read_list", "write_list", "list_folder", "list_images", "make_lists", "MadeLists",
    "IMAGE_EXTENSIONS",
]

logger = logging.getLogger(__name__)

#: File name endings (compared in lower case) that :func:`list_folder` takes as images,
#: im2rec's default ``--exts``.
IMAGE_EXTENSIONS = (".jpeg", ".jpg", ".png")


class ListItem(NamedTuple):
    """One line of a ``.lst`` file: ``index``, ``labels`` (a tuple of floats, at least
    one) and ``path`` (relative to the image root, ``/``-separated).

    >>> item = ListItem(3, (1.0, 0.5), "dog/x.jpg")
    >>> item.index, item.labels, item.path
    (3, (1.0, 0.5), 'dog/x.jpg')
    """

    index: int  # type: ignore[assignment]  # the public field name shadows tuple.index
    labels: tuple[float, ...]
    path: str


def read_list(path: str | os.PathLike) -> list[ListItem]:
    """Parse a ``.lst`` file. Blank lines are skipped; a malformed line raises
    :class:`~feedline.exceptions.DataError` naming the file and line.

    Fields may be separated by tabs (MXNet's format); surrounding whitespace of each
    field is removed, as ``im2rec`` does.

    Args:
        path: the ``.lst`` file (UTF-8).

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "a.lst")
    >>> with open(path, "w") as f: f.writelines(["0\\t1.000000\\tcat/1.jpg", chr(10), chr(10), "1\\t0\\t2\\tdog/2.jpg", chr(10)])
    >>> read_list(path)
    [ListItem(index=0, labels=(1.0,), path='cat/1.jpg'), ListItem(index=1, labels=(0.0, 2.0), path='dog/2.jpg')]
    >>> with open(path, "w") as f: _ = f.write("oops" + chr(10))
    >>> read_list(path)
    Traceback (most recent call last):
    ...
    feedline.exceptions.DataError: ...
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
    """Write ``items`` as a ``.lst`` file, atomically (a temporary file renamed into
    place), labels formatted ``%f`` as im2rec writes them.

    Args:
        path: the ``.lst`` file to write (replaced if it exists).
        items: ``ListItem`` or ``(index, labels, path)`` tuples: ``index`` an int (else
            ``TypeError``), ``labels`` a finite number or a non-empty sequence of finite
            numbers, ``path`` without tabs or newlines (else ``ValueError``).

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "a.lst")
    >>> write_list(path, [(0, 1, "cat/1.jpg"), ListItem(1, (0.0, 2.5), "dog/2.jpg")])
    >>> [line.split("\\t") for line in open(path).read().splitlines()]
    [['0', '1.000000', 'cat/1.jpg'], ['1', '0.000000', '2.500000', 'dog/2.jpg']]
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

    Args:
        root: the folder with one subfolder per class; ``FileNotFoundError`` if it does
            not exist, ``ValueError`` if it has no class subfolder, or image files
            directly in it (they would have no class).
        exts: the file name endings taken as images, compared in lower case
            (default :data:`IMAGE_EXTENSIONS`).

    >>> import os, tempfile
    >>> root = tempfile.mkdtemp()
    >>> for p in ("cat/b.jpg", "cat/a.JPG", "dog/deep/c.png", "dog/readme.txt"):
    ...     os.makedirs(os.path.dirname(os.path.join(root, p)), exist_ok=True)
    ...     open(os.path.join(root, p), "w").close()
    >>> items, classes = list_folder(root)
    >>> classes, [(i.index, i.labels, i.path) for i in items]
    (['cat', 'dog'], [(0, (0.0,), 'cat/a.JPG'), (1, (0.0,), 'cat/b.jpg'), (2, (1.0,), 'dog/deep/c.png')])
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


def list_images(
    root: str | os.PathLike, *, recursive: bool = False, exts: Sequence[str] = IMAGE_EXTENSIONS
) -> tuple[list[ListItem], list[tuple[str, int]]]:
    """The images under ``root`` as ``im2rec --list`` finds them.

    Indices run 0, 1, 2, ... in walk order; paths are relative to ``root``.

    Args:
        root: the image folder (``FileNotFoundError`` if it does not exist).
        recursive: walk the tree top-down (symlinks followed, folders and files in
            sorted order); every *folder that holds an image* gets its own label, 0, 1,
            2, ... in the order the walk first meets it (``root`` itself included) —
            im2rec's labelling, which differs from :func:`list_folder`'s one label per
            top-level class folder. ``False`` (the default) takes only the files
            directly in ``root``, in sorted name order, all with label 0.
        exts: a file is an image when the lower-cased ending after its last dot
            (``os.path.splitext``) is one of these (compared in lower case; default
            :data:`IMAGE_EXTENSIONS`).

    Returns ``(items, categories)``; ``categories`` lists ``(folder relative to root,
    label)`` in label order (``[]`` without ``recursive``), what im2rec prints.

    >>> import os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> for p in ("cat/a.jpg", "cat/b.PNG", "dog/x/c.jpeg", "dog/notes.txt"):
    ...     os.makedirs(os.path.join(d, os.path.dirname(p)), exist_ok=True)
    ...     open(os.path.join(d, p), "wb").close()
    >>> items, categories = list_images(d, recursive=True)
    >>> [(i.index, i.labels, i.path) for i in items], categories
    ([(0, (0.0,), 'cat/a.jpg'), (1, (0.0,), 'cat/b.PNG'), (2, (1.0,), 'dog/x/c.jpeg')], [('cat', 0), ('dog/x', 1)])
    """
    root = os.fspath(root)
    if not os.path.isdir(root):
        raise FileNotFoundError(f"image folder {root!r} does not exist")
    wanted = {e.lower() for e in exts}
    items: list[ListItem] = []
    folders: dict[str, int] = {}
    if recursive:
        for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
            dirnames.sort()
            reldir = os.path.relpath(dirpath, root)  # once per folder: relpath is slow
            for fname in sorted(filenames):
                full = os.path.join(dirpath, fname)
                if os.path.splitext(fname)[1].lower() in wanted and os.path.isfile(full):
                    label = folders.setdefault(dirpath, len(folders))
                    rel = fname if reldir == os.curdir else os.path.join(reldir, fname)
                    items.append(ListItem(len(items), (float(label),), rel))
    else:
        for fname in sorted(os.listdir(root)):
            full = os.path.join(root, fname)
            if os.path.splitext(fname)[1].lower() in wanted and os.path.isfile(full):
                items.append(ListItem(len(items), (0.0,), fname))
    categories = [(os.path.relpath(path, root), label) for path, label in folders.items()]
    return items, categories


class MadeLists(NamedTuple):
    """What :func:`make_lists` wrote: ``files`` (the ``.lst`` paths, in writing order),
    ``counts`` (lines in each), ``categories`` (``(folder, label)``, see
    :func:`list_images`).

    >>> import os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> for k in range(4):
    ...     os.makedirs(os.path.join(d, f"c{k % 2}"), exist_ok=True)
    ...     open(os.path.join(d, f"c{k % 2}", f"{k}.jpg"), "w").close()
    >>> made = make_lists(d, os.path.join(d, "all"), recursive=True, shuffle=False)
    >>> type(made).__name__, [os.path.basename(f) for f in made.files], made.counts, made.categories
    ('MadeLists', ['all.lst'], [4], [('c0', 0), ('c1', 1)])
    """

    files: list[str]
    counts: list[int]
    categories: list[tuple[str, int]]


def _ratio(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ValueError(f"`{name}` must be a number in [0, 1], got {value!r}")
    return float(value)


def make_lists(
    root: str | os.PathLike,
    prefix: str | os.PathLike,
    *,
    recursive: bool = False,
    exts: Sequence[str] = IMAGE_EXTENSIONS,
    train_ratio: float = 1.0,
    test_ratio: float = 0.0,
    chunks: int = 1,
    shuffle: bool = True,
) -> MadeLists:
    """``im2rec --list``: write ``.lst`` files of the images under ``root``, byte for byte
    what MXNet 1.9.1's ``tools/im2rec.py --list`` writes for the same folder and options.

    Within a chunk of ``size = ceil(n / chunks)`` (the nominal size, as im2rec),
    ``n_test = int(size * test_ratio)`` and ``n_train = int(size * train_ratio)``: with
    ``train_ratio == 1`` the whole chunk goes to ``PREFIX.lst``; otherwise the first
    ``n_test`` lines go to ``PREFIX_test.lst`` (written only when ``test_ratio`` is not
    0), the next ``n_train`` to ``PREFIX_train.lst`` (always written), and the rest to
    ``PREFIX_val.lst`` (written when ``train_ratio + test_ratio < 1``). Each file is
    written atomically; lines are ``index<TAB>label<TAB>path`` with the label as ``%f``.

    Args:
        root: the image folder, listed by :func:`list_images`.
        prefix: the path prefix of the files written (``PREFIX`` above).
        recursive: walk the tree, one label per folder; see :func:`list_images`.
        exts: the image file endings; see :func:`list_images`.
        train_ratio: the share of each chunk written to ``PREFIX_train.lst``, a number
            in [0, 1] (else ``ValueError``); 1 (the default) writes ``PREFIX.lst``.
        test_ratio: the share of each chunk written to ``PREFIX_test.lst``, a number in
            [0, 1]; ``train_ratio + test_ratio`` above 1 raises ``ValueError``.
        chunks: cut the list into this many consecutive chunks of ``ceil(n / chunks)``
            images (the last ones shorter or empty), a positive int; chunk ``i`` is
            written to ``PREFIX_i...`` when ``chunks > 1``, else to ``PREFIX...``.
        shuffle: put the images in the order of Python's ``random.Random(100).shuffle``
            — im2rec's fixed seed — before cutting (``True``, the default, as in im2rec);
            ``False`` keeps the listing order.

    >>> import os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> for k in range(4):
    ...     open(os.path.join(d, f"{k}.jpg"), "wb").close()
    >>> made = make_lists(d, os.path.join(d, "out"), train_ratio=0.5, shuffle=False)
    >>> [os.path.basename(f) for f in made.files], made.counts
    (['out_val.lst', 'out_train.lst'], [2, 2])
    >>> open(os.path.join(d, "out_val.lst")).read()
    '2\\t0.000000\\t2.jpg\\n3\\t0.000000\\t3.jpg\\n'
    """
    from feedline._internal.validate import positive_int

    train_ratio = _ratio("train_ratio", train_ratio)
    test_ratio = _ratio("test_ratio", test_ratio)
    if train_ratio + test_ratio > 1.0:
        raise ValueError(f"`train_ratio` + `test_ratio` must be at most 1, got {train_ratio} + "
                         f"{test_ratio}")
    chunks = positive_int("chunks", chunks)
    prefix = os.fspath(prefix)
    items, categories = list_images(root, recursive=recursive, exts=exts)
    if shuffle:
        random.Random(100).shuffle(items)
    size = (len(items) + chunks - 1) // chunks
    n_train, n_test = int(size * train_ratio), int(size * test_ratio)
    files: list[str] = []
    counts: list[int] = []

    def emit(path: str, part: list[ListItem]) -> None:
        write_list(path, part)
        files.append(path)
        counts.append(len(part))

    for i in range(chunks):
        chunk = items[i * size:(i + 1) * size]
        base = prefix + (f"_{i}" if chunks > 1 else "")
        if train_ratio == 1.0:
            emit(base + ".lst", chunk)
            continue
        if test_ratio:
            emit(base + "_test.lst", chunk[:n_test])
        if train_ratio + test_ratio < 1.0:
            emit(base + "_val.lst", chunk[n_test + n_train:])
        emit(base + "_train.lst", chunk[n_test:n_test + n_train])
    logger.info("listed %d images of %s into %d file(s)", len(items), os.fspath(root), len(files))
    return MadeLists(files, counts, categories)
