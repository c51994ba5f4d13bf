"""``feedline index``: build the sidecar index of record files.

Examples::

    feedline index data/train-*.tfrecord          # writes data/train-00000-of-00008.tfrecord.index ...
    feedline index data/train.rec                 # writes data/train.idx (MXNet's format)
    feedline index --output-dir /tmp/idx --skip-damaged a.tfrecord b.rec

TFRecord files (also GZIP/ZLIB ones; offsets then refer to the decompressed stream) get
``<file>.index`` in the binary format documented in :mod:`feedline.tfrecord`, which
:class:`feedline.tfrecord.TFRecordFile` uses for ``len()`` and random access and readers
use to resynchronise after damage. MXNet RecordIO files get a ``.idx`` (``key<TAB>offset``
lines, keys 0, 1, 2, ... in file order), as ``im2rec`` writes. The format is detected from
the content (see ``feedline inspect``). A damaged file fails (exit status 1) unless
``--skip-damaged`` leaves its damaged records out of the index. A file of another
format (CSV, text, ...), content that is no format at all, or content that contradicts
the name (a text file named ``x.tfrecord``) is the wrong type of file, not a damaged
one: it is reported and fails with exit status 2, as in ``feedline inspect`` and
``feedline bench`` (see :func:`feedline.cli.check_format`).

An existing ``.idx`` is replaced only when it holds the keys this command writes (0, 1,
2, ... in file order): one with other keys — MXNet image ids, as ``im2rec`` or
``MXIndexedRecordIO`` write them — or one that cannot be read is kept, and the file
fails with exit status 2, unless ``--force``. Errors print one line each,
``feedline index: error: ...``.

>>> import os, tempfile
>>> from feedline import tfrecord
>>> path = os.path.join(tempfile.mkdtemp(), "a.tfrecord")
>>> tfrecord.write(path, [b"x", b"yz"])
2
>>> result = index_file(path)
>>> result["format"], result["records"], result["index"] == path + ".index", result["error"]
('tfrecord', 2, True, None)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

__all__ = ["HELP", "add_arguments", "run", "index_file"]

HELP = "build the sidecar index of TFRecord (.index) and RecordIO (.idx) files"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``feedline index``'s arguments to ``parser``.

    Args:
        parser: the subcommand's parser, changed in place.

    >>> import argparse
    >>> parser = argparse.ArgumentParser(prog="feedline index")
    >>> add_arguments(parser)
    >>> args = parser.parse_args(["--force", "--output-dir", "idx", "a.rec", "b.tfrecord"])
    >>> args.files, args.output_dir, args.force, args.skip_damaged, args.json
    (['a.rec', 'b.tfrecord'], 'idx', True, False, False)
    """
    parser.add_argument("files", nargs="+", metavar="FILE", help="TFRecord or RecordIO files")
    parser.add_argument(
        "--output-dir",
        metavar="DIR",
        help="write the indexes into DIR instead of beside each file",
    )
    parser.add_argument(
        "--skip-damaged",
        action="store_true",
        help="leave damaged records out of the index instead of failing",
    )
    parser.add_argument(
        "--json", action="store_true", help="print JSON (a list, one object per file)"
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace an existing .idx even when its keys (MXNet image ids) differ",
    )


def _target(path: str, fmt: str, output_dir: str | None) -> str:
    if fmt == "tfrecord":
        name = path + ".index"
    else:
        from feedline.formats.recordio import default_idx_path

        name = default_idx_path(path)
    if output_dir is None:
        return name
    return os.path.join(output_dir, os.path.basename(name))


def _check_keys(target: str) -> None:
    """Raise ``UsageError`` when the existing ``.idx`` at ``target`` has keys other than
    0, 1, 2, ... in offset order (replacing it would lose them)."""
    from feedline.cli import UsageError
    from feedline.exceptions import DataError
    from feedline.formats.recordio.index import read_index

    try:
        entries = read_index(target)
    except (DataError, OSError, UnicodeDecodeError) as exc:
        raise UsageError(
            f"{target} exists and cannot be read as an index ({exc}); "
            "--force replaces it"
        ) from exc
    keys = [key for key, _ in sorted(entries, key=lambda e: e[1])]
    if keys != list(range(len(keys))):
        shown = ", ".join(map(str, keys[:5])) + (", ..." if len(keys) > 5 else "")
        raise UsageError(
            f"{target} exists with other keys (MXNet image ids {shown}) than the 0, 1, 2, ... "
            "this command writes; --force replaces it"
        )


def index_file(
    path: str | os.PathLike,
    *,
    output_dir: str | None = None,
    skip_damaged: bool = False,
    force: bool = False,
) -> dict[str, Any]:
    """Index one file; returns ``{"path", "format", "index", "records", "error",
    "status"}``: ``status`` is 0, or the exit status the error asks for (1 for a damaged
    file; 2 for a file that is missing, not a file, of a format without an index or
    of the wrong type, or an existing ``.idx`` with other keys kept because ``force``
    is false).

    Args:
        path: the TFRecord or RecordIO file (its format is detected from its content).
        output_dir: write the index into this directory instead of beside the file.
        skip_damaged: leave damaged records out of the index instead of failing with
            status 1 at the first.
        force: replace an existing RecordIO ``.idx`` even when its keys are not 0, 1,
            2, ... in offset order.

    >>> import os, tempfile
    >>> from feedline import recordio
    >>> d = tempfile.mkdtemp(); path = os.path.join(d, "a.rec")
    >>> with recordio.RecordIOWriter(path) as w:
    ...     for i in range(3): _ = w.write(b"r%d" % i)
    >>> result = index_file(path)
    >>> result["format"], result["records"], os.path.basename(result["index"]), result["status"]
    ('recordio', 3, 'a.idx', 0)
    >>> index_file(os.path.join(d, "missing.rec"))["status"]
    2
    """
    from feedline.cli import UsageError, check_format, exit_status
    from feedline.cli.inspect import detect_format
    from feedline.exceptions import FeedlineError

    path = os.fspath(path)
    out: dict[str, Any] = {
        "path": path,
        "format": None,
        "index": None,
        "records": None,
        "error": None,
        "status": 0,
    }
    on_error = "skip" if skip_damaged else "raise"
    try:
        fmt, compression = detect_format(path)
        out["format"] = fmt
        check_format(path, fmt, command="index", accepted=("tfrecord", "recordio"))
        if fmt == "tfrecord":
            from feedline.formats import tfrecord

            target = _target(path, fmt, output_dir)
            out["records"] = tfrecord.build_index(
                path, target, compression=compression, on_error=on_error
            )
            out["index"] = target
        elif fmt == "recordio":
            from feedline.formats import recordio

            target = _target(path, fmt, output_dir)
            if not force and os.path.exists(target):
                _check_keys(target)
            out["records"] = recordio.build_index(path, target, on_error=on_error)
            out["index"] = target
        else:  # empty: nothing to index
            raise UsageError(f"{path}: an empty file; there is nothing to index")
    except (FeedlineError, OSError, ValueError, UsageError) as exc:
        if isinstance(exc, OSError) and exc.filename is not None and exc.strerror:
            message = f"{exc.filename}: {exc.strerror}"
        else:
            message = str(exc)
        out["error"] = message if path in message else f"{path}: {message}"
        out["status"] = exit_status(exc)
    return out


def run(args: argparse.Namespace) -> int:
    """Index ``args.files``; the exit status is the largest of the files' statuses
    (see :func:`index_file`).

    Args:
        args: the options parsed by a parser that :func:`add_arguments` set up.

    >>> import argparse, contextlib, io, json, os, tempfile
    >>> from feedline import tfrecord
    >>> path = os.path.join(tempfile.mkdtemp(), "a.tfrecord")
    >>> _ = tfrecord.write(path, [b"x", b"yz"])
    >>> parser = argparse.ArgumentParser(); add_arguments(parser)
    >>> out = io.StringIO()
    >>> with contextlib.redirect_stdout(out):
    ...     status = run(parser.parse_args(["--json", path]))
    >>> status, [(r["format"], r["records"], r["status"]) for r in json.loads(out.getvalue())]
    (0, [('tfrecord', 2, 0)])
    """
    from feedline.cli import UsageError, check_input_files

    check_input_files(args.files)
    if args.output_dir is not None:
        if os.path.exists(args.output_dir) and not os.path.isdir(args.output_dir):
            raise UsageError(f"--output-dir {args.output_dir}: is not a directory")
        os.makedirs(args.output_dir, exist_ok=True)
    results = [
        index_file(path, output_dir=args.output_dir, skip_damaged=args.skip_damaged,
                   force=args.force)
        for path in args.files
    ]
    if args.json:
        print(json.dumps(results, indent=2))
    for r in results:
        if r["error"]:
            print(f"feedline index: error: {r['error']}", file=sys.stderr)
        elif not args.json:
            print(f"{r['path']}: {r['format']}, {r['records']} records -> {r['index']}")
    return max(r["status"] for r in results)
