"""``feedline.files``: a dataset of file paths (TensorFlow's filename queue).

Patterns may be globs, directories, plain paths or fsspec URLs (``s3://``, ``gs://``,
``memory://``, ``file://``); matches are sorted so the order is deterministic before any
shuffle. With ``shuffle=True`` the file order is a seeded permutation, new every epoch;
``num_epochs`` repeats the list (``None``: forever). A pattern that matches nothing is an
error naming it. Files are not opened here: readers open them lazily, one by one,
through :mod:`feedline.storage.fs`.

>>> import os, tempfile
>>> d = tempfile.mkdtemp()
>>> for name in ("b.rec", "a.rec"): open(os.path.join(d, name), "w").close()
>>> [os.path.basename(p) for p in files(os.path.join(d, "*.rec"))]
['a.rec', 'b.rec']
>>> len(files(os.path.join(d, "*.rec"), shuffle=True, seed=1, num_epochs=3).to_list())
6
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from feedline._internal.validate import optional_positive_int
from feedline.dataset.base import Dataset
from feedline.dataset.sources import SequenceDataset
from feedline.storage.fs import expand

__all__ = ["files"]


def files(
    patterns: str | os.PathLike | Iterable[str | os.PathLike],
    *,
    shuffle: bool = False,
    seed: int | None = None,
    num_epochs: int | None = 1,
    storage_options: dict | None = None,
) -> Dataset[str]:
    """A dataset of the paths matching ``patterns``; see the module docstring.

    Args:
        patterns: a glob, a directory (read recursively, hidden files skipped), a plain
            path or an fsspec URL, or a list of them; each pattern's matches are sorted,
            and a pattern that matches nothing raises ``FileNotFoundError`` naming it.
        shuffle: read the list in a seeded permutation, a new one every epoch;
            ``False`` (the default) keeps the sorted order.
        seed: the shuffle's seed (epoch ``e`` uses the permutation seeded with
            ``(seed, e)``); ``None`` draws a fresh seed. Ignored without ``shuffle``.
        num_epochs: how many times the list is repeated, a positive int (else
            ``ValueError``/``TypeError``); ``None`` repeats it forever.
        storage_options: options for fsspec when listing URLs.

    >>> import os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> for name in ("x2.txt", "x1.txt"): open(os.path.join(d, name), "w").close()
    >>> [os.path.basename(p) for p in files(os.path.join(d, "x*.txt"), num_epochs=2)]
    ['x1.txt', 'x2.txt', 'x1.txt', 'x2.txt']
    >>> files(os.path.join(d, "nothing*"))
    Traceback (most recent call last):
    ...
    FileNotFoundError: ...nothing*...
    """
    optional_positive_int("num_epochs", num_epochs)
    paths = expand(patterns, storage_options=storage_options)
    ds: Dataset[str] = SequenceDataset(paths, name="files")
    if shuffle:
        ds = ds.global_shuffle(seed=seed)
    if num_epochs != 1:
        ds = ds.repeat(num_epochs)
    return ds
