"""``feedline bench``: how fast feedline reads your record files, and where time goes.

Examples::

    feedline bench data/train-*.tfrecord
    feedline bench --batch-size 256 --shuffle 10000 --cycle-length 4 --parallel-reads 2 a.rec b.rec
    feedline bench --json data/*.tfrecord

The files are read through the pipeline a training job would use — ``read_records``
(files interleaved ``--cycle-length`` at a time, each read ahead by a thread with
``--parallel-reads``), an optional ``shuffle``, ``batch`` and ``prefetch`` — for
``--epochs`` passes or ``--limit`` records. It prints records/s and MB/s of payload, then
the per-stage statistics and the bottleneck line (see :mod:`feedline.runtime.stats`).
TFRecord (any compression), RecordIO, CSV, text and tar (WebDataset) files are supported;
the format is detected from the content. A local file of the wrong type — content that is
no format feedline reads, or content that contradicts the name (a text file named
``x.tfrecord``) — is refused before anything is read, with exit status 2 as in
``feedline inspect`` and ``feedline index`` (see :func:`feedline.cli.check_format`).

>>> import os, tempfile
>>> from feedline import tfrecord
>>> path = os.path.join(tempfile.mkdtemp(), "a.tfrecord")
>>> tfrecord.write(path, [b"x" * 100] * 50)
50
>>> result = bench_files([path], batch_size=8)
>>> result["records"], result["bytes"]
(50, 5000)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

from feedline._internal.validate import optional_positive_int, positive_int

__all__ = ["HELP", "add_arguments", "run", "bench_files"]

HELP = "measure how fast record files are read through a pipeline, stage by stage"


def _positive(text: str) -> int:
    try:
        return positive_int("value", int(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive int, got {text!r}") from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``feedline bench``'s arguments to ``parser``.

    Args:
        parser: the subcommand's parser, changed in place.

    >>> import argparse
    >>> parser = argparse.ArgumentParser(prog="feedline bench")
    >>> add_arguments(parser)
    >>> args = parser.parse_args(["--batch-size", "16", "--epochs", "2", "a.tfrecord"])
    >>> args.files, args.batch_size, args.epochs, args.shuffle, args.json
    (['a.tfrecord'], 16, 2, None, False)
    """
    parser.add_argument("files", nargs="+", metavar="FILE", help="record files or globs")
    parser.add_argument("--batch-size", type=_positive, default=64, metavar="N",
                        help="records per batch (default 64)")
    parser.add_argument("--shuffle", type=_positive, default=None, metavar="BUFFER",
                        help="add a shuffle stage with this buffer size")
    parser.add_argument("--cycle-length", type=_positive, default=1, metavar="K",
                        help="files read at once, interleaved (default 1)")
    parser.add_argument("--parallel-reads", type=_positive, default=None, metavar="N",
                        help="read each open file ahead in a thread, N records deep")
    parser.add_argument("--epochs", type=_positive, default=1, metavar="N",
                        help="passes over the files (default 1)")
    parser.add_argument("--limit", type=_positive, default=None, metavar="N",
                        help="stop after N records")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def bench_files(paths: Sequence[str], *, batch_size: int = 64, shuffle: int | None = None,
                cycle_length: int = 1, parallel_reads: int | None = None, epochs: int = 1,
                limit: int | None = None) -> dict[str, Any]:
    """Read ``paths`` through the pipeline described in the module docstring and return
    ``{"records", "bytes", "seconds", "records_per_s", "mb_per_s", "stats"}``.

    Args:
        paths: the record files or globs (read with
            :func:`~feedline.io.records.read_records`, the format detected).
        batch_size: records per batch (a positive int, else ``ValueError``/``TypeError``).
        shuffle: the buffer size of a shuffle stage; ``None`` or 0: no shuffle.
        cycle_length: files read at once, round robin.
        parallel_reads: records each open file is read ahead in a thread (``None``: no
            read-ahead thread).
        epochs: passes over the files (a positive int).
        limit: stop after this many records (a positive int; ``None``: no limit).

    >>> import os, tempfile
    >>> from feedline import tfrecord
    >>> path = os.path.join(tempfile.mkdtemp(), "a.tfrecord")
    >>> _ = tfrecord.write(path, [b"x" * 10] * 20)
    >>> result = bench_files([path], batch_size=4, epochs=2)
    >>> result["records"], result["bytes"], sorted(result)
    (40, 400, ['bytes', 'mb_per_s', 'records', 'records_per_s', 'seconds', 'stats'])
    """
    from feedline.io.records import read_records

    positive_int("batch_size", batch_size)
    positive_int("epochs", epochs)
    optional_positive_int("limit", limit)
    ds = read_records(paths, cycle_length=cycle_length, num_parallel_reads=parallel_reads)
    if shuffle:
        ds = ds.shuffle(shuffle)
    if epochs > 1:
        ds = ds.repeat(epochs)
    if limit:
        ds = ds.take(limit)
    ds = ds.batch(batch_size).prefetch(2)
    records = nbytes = 0
    t0 = time.perf_counter()
    with ds.iterator(stats=True) as it:
        for batch in it:
            records += len(batch)
            nbytes += sum(map(len, batch))
        report = it.stats()
    seconds = time.perf_counter() - t0
    return {
        "records": records,
        "bytes": nbytes,
        "seconds": seconds,
        "records_per_s": records / seconds if seconds else float("inf"),
        "mb_per_s": nbytes / seconds / 1e6 if seconds else float("inf"),
        "stats": report,
    }


_READABLE = ("tfrecord", "recordio", "csv", "text", "tar")


def _check_formats(paths: Sequence[str]) -> None:
    """Refuse a local file (globs expanded) of the wrong type (see the module docstring)."""
    import glob

    from feedline.cli import check_format
    from feedline.formats.detect import detect_format

    for pattern in paths:
        if "://" in pattern:
            continue
        names = sorted(glob.glob(pattern)) if any(c in pattern for c in "*?[") else [pattern]
        for name in names:
            check_format(name, detect_format(name)[0], command="bench", accepted=_READABLE)


def run(args: argparse.Namespace) -> int:
    """Run ``feedline bench``; the exit status is 0 (errors: see :func:`feedline.cli.main`).

    Args:
        args: the options parsed by a parser that :func:`add_arguments` set up.

    >>> import argparse, contextlib, io, json, os, tempfile
    >>> from feedline import tfrecord
    >>> path = os.path.join(tempfile.mkdtemp(), "a.tfrecord")
    >>> _ = tfrecord.write(path, [b"abc"] * 5)
    >>> parser = argparse.ArgumentParser(); add_arguments(parser)
    >>> out = io.StringIO()
    >>> with contextlib.redirect_stdout(out):
    ...     status = run(parser.parse_args(["--json", "--batch-size", "2", path]))
    >>> result = json.loads(out.getvalue())
    >>> status, result["records"], result["bytes"]
    (0, 5, 15)
    """
    from feedline.cli import check_input_files
    from feedline.runtime.stats import format_bytes

    check_input_files(args.files)
    _check_formats(args.files)
    result = bench_files(args.files, batch_size=args.batch_size, shuffle=args.shuffle,
                         cycle_length=args.cycle_length, parallel_reads=args.parallel_reads,
                         epochs=args.epochs, limit=args.limit)
    report = result.pop("stats")
    if args.json:
        result["stats"] = report.to_dict()
        json.dump(result, sys.stdout, default=str)
        sys.stdout.write("\n")
        return 0
    print(f"{result['records']:,} records, {format_bytes(result['bytes'])} in "
          f"{result['seconds']:.2f} s: {result['records_per_s']:,.0f} records/s, "
          f"{format_bytes(result['mb_per_s'] * 1e6)}/s")
    print(report)
    return 0
