"""``feedline inspect``: what a record file holds, found from its content.

Examples::

    feedline inspect data/train.tfrecord
    feedline inspect --limit 5 a.rec b.tfrecord.gz labels-idx1-ubyte.gz
    feedline inspect --json data/*.csv

For each file: the format (detected from the bytes, not the name: TFRecord by its first
header's length CRC, also inside GZIP/ZLIB; MXNet RecordIO by its magic word; MNIST IDX
by its header; text and CSV by decoding as UTF-8; CIFAR-10 when the size is a multiple of
3073 bytes; otherwise ``unknown``), the record count, the record sizes (min/mean/max
bytes) and the first ``--limit`` records decoded (``tf.train.Example`` and
``SequenceExample`` into features, RecordIO ``IRHeader`` label plus payload size and
image format, CSV fields, IDX and CIFAR arrays). A damaged file is reported with the
error (path, record and byte offset) after the records read before it: the records go
to stdout, the error to stderr as one line ``feedline inspect: error: ...``, and the exit
status is 1. A missing file or a directory is refused before anything is read (exit
status 2). A file of the wrong type — content that is no format feedline reads, or
content that contradicts the name (a text file named ``x.tfrecord``) — is reported with
its detected format and no records, and the exit status is 2, as in ``feedline bench``
and ``feedline index`` (see :func:`feedline.cli.check_format`). ``--json`` prints one JSON object per file, as a list; a bytes value longer
than 64 bytes appears there as ``{"length": N, "prefix": BASE64 of its first 16 bytes}``
(shorter ones as base64 strings), a text line longer than 200 characters is cut there
with ``...``, so that no payload is printed whole.

>>> import os, tempfile
>>> from feedline import tfrecord
>>> path = os.path.join(tempfile.mkdtemp(), "anything.bin")
>>> tfrecord.write(path, [b"ab", b"cde"], compression="GZIP")
2
>>> info = inspect_file(path, limit=1)
>>> info["count"], info["record_bytes"], info["records"]
(2, {'min': 2, 'mean': 2.5, 'max': 3}, [{'index': 0, 'bytes': 2, 'type': 'raw', 'head_hex': '6162'}])
"""

from __future__ import annotations

import argparse
import base64
import json
import math
import os
import sys
from typing import Any

from feedline._internal.validate import non_negative_int_arg
from feedline.formats.detect import detect_format

__all__ = ["HELP", "add_arguments", "run", "detect_format", "inspect_file"]

HELP = "show the format, record count, sizes and first records of record files"

_CIFAR10_RECORD = 3073
_VALUES_SHOWN = 8
_BYTES_SHOWN = 64  # longer bytes values appear as {"length", "prefix"}
_PREFIX_BYTES = 16
_TEXT_SHOWN = 200
_REPR_SHOWN = 42  # characters of a bytes value's repr in the text output


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``feedline inspect``'s arguments to ``parser``.

    Args:
        parser: the subcommand's parser, changed in place.

    >>> import argparse
    >>> parser = argparse.ArgumentParser(prog="feedline inspect")
    >>> add_arguments(parser)
    >>> args = parser.parse_args(["--json", "--limit", "5", "a.tfrecord"])
    >>> args.files, args.json, args.limit
    (['a.tfrecord'], True, 5)
    """
    parser.add_argument("files", nargs="+", metavar="FILE", help="files to inspect")
    parser.add_argument(
        "--json", action="store_true", help="print JSON (a list, one object per file)"
    )
    parser.add_argument(
        "--limit",
        type=non_negative_int_arg,
        default=3,
        metavar="N",
        help="records to show decoded (default 3)",
    )


# --------------------------------------------------------------------------- summaries


def _json_float(v: float) -> Any:
    return v if math.isfinite(v) else str(v)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _bytes_value(data: bytes) -> Any:
    """``data`` as base64, or ``{"length", "prefix"}`` when it is long.

    >>> _bytes_value(b"ab"), _bytes_value(bytes(100))
    ('YWI=', {'length': 100, 'prefix': 'AAAAAAAAAAAAAAAAAAAAAA=='})
    """
    if len(data) <= _BYTES_SHOWN:
        return _b64(data)
    return {"length": len(data), "prefix": _b64(data[:_PREFIX_BYTES])}


def _cut(text: str) -> str:
    return text if len(text) <= _TEXT_SHOWN else text[:_TEXT_SHOWN] + "..."


def _feature(value: Any) -> dict[str, Any]:
    if value is None:
        return {"kind": "empty"}
    if isinstance(value, list):
        return {
            "kind": "bytes",
            "count": len(value),
            "values": [_bytes_value(v) for v in value[:_VALUES_SHOWN]],
        }
    if value.dtype.kind == "i":
        return {"kind": "int64", "count": len(value), "values": value[:_VALUES_SHOWN].tolist()}
    return {
        "kind": "float",
        "count": len(value),
        "values": [_json_float(v) for v in value[:_VALUES_SHOWN].tolist()],
    }


def _describe_tf_record(index: int, record: bytes) -> dict[str, Any]:
    from feedline.exceptions import DataError
    from feedline.formats import example

    out: dict[str, Any] = {"index": index, "bytes": len(record)}
    try:
        context, lists = example.decode_sequence_example(record)
        if lists:
            out["type"] = "SequenceExample"
            out["context"] = {k: _feature(v) for k, v in context.items()}
            out["feature_lists"] = {
                k: {"steps": len(steps), "first": [_feature(s) for s in steps[:2]]}
                for k, steps in lists.items()
            }
            return out
        features = example.decode_example(record)
        if features:
            out["type"] = "Example"
            out["features"] = {k: _feature(v) for k, v in features.items()}
            return out
    except DataError:
        pass
    out["type"] = "raw"
    out["head_hex"] = record[:32].hex()
    return out


def _size_stats(sizes: list[int]) -> dict[str, Any] | None:
    if not sizes:
        return None
    return {"min": min(sizes), "mean": round(sum(sizes) / len(sizes), 3), "max": max(sizes)}


def _inspect_tfrecord(path: str, compression: str | None, limit: int, out: dict) -> None:
    from feedline.formats import tfrecord

    sizes: list[int] = []
    shown: list[dict] = []
    out["records"] = shown
    reader = tfrecord.TFRecordReader(path, compression=compression)
    try:
        while True:
            batch = reader.next_batch(4096)
            if not batch:
                break
            for record in batch:
                if len(shown) < limit:
                    shown.append(_describe_tf_record(len(sizes), record))
                sizes.append(len(record))
    finally:
        out["count"] = len(sizes)
        out["record_bytes"] = _size_stats(sizes)
        reader.close()


def _payload_format(data: bytes) -> str:
    if data[:3] == b"\xff\xd8\xff":
        return "jpeg"
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        return "png"
    return "bytes"


def _inspect_recordio(path: str, limit: int, out: dict) -> None:
    from feedline.exceptions import DataError
    from feedline.formats import recordio

    sizes: list[int] = []
    shown: list[dict] = []
    out["records"] = shown
    reader = recordio.read(path)
    try:
        for record in reader:
            if len(shown) < limit:
                item: dict[str, Any] = {"index": len(sizes), "bytes": len(record)}
                try:
                    header, payload = recordio.unpack(record)
                    label = header.label
                    item["header"] = {
                        "flag": int(header.flag),
                        "label": [_json_float(v) for v in label.tolist()]
                        if hasattr(label, "tolist") and header.flag > 0
                        else _json_float(float(label)),
                        "id": int(header.id),
                        "id2": int(header.id2),
                    }
                    item["payload_bytes"] = len(payload)
                    item["payload_format"] = _payload_format(payload)
                except DataError:
                    item["head_hex"] = record[:32].hex()
                shown.append(item)
            sizes.append(len(record))
    finally:
        out["count"] = len(sizes)
        out["record_bytes"] = _size_stats(sizes)
        reader.close()


def _array_summary(a: Any) -> dict[str, Any]:
    flat = a.ravel()
    if flat.size <= _VALUES_SHOWN:
        return {
            "shape": list(a.shape),
            "values": [_json_float(v) if isinstance(v, float) else v for v in flat.tolist()],
        }
    return {
        "shape": list(a.shape),
        "min": _json_float(float(flat.min())),
        "mean": _json_float(round(float(flat.mean()), 4)),
        "max": _json_float(float(flat.max())),
    }


def _inspect_idx(path: str, limit: int, out: dict) -> None:
    from feedline.formats.idx import read_idx

    array = read_idx(path)
    out["dtype"] = str(array.dtype)
    out["shape"] = list(array.shape)
    count = array.shape[0] if array.ndim else 1
    out["count"] = count
    item_bytes = array.itemsize * (math.prod(array.shape[1:]) if array.ndim else 1)
    out["record_bytes"] = _size_stats([item_bytes]) if count else None
    out["records"] = (
        [{"index": i, **_array_summary(array[i])} for i in range(min(limit, count))]
        if array.ndim
        else [{"index": 0, **_array_summary(array)}]
    )


def _inspect_cifar(path: str, size: int, limit: int, out: dict) -> None:
    from feedline.formats.fixed import read_cifar10

    count = size // _CIFAR10_RECORD
    out["count"] = count
    out["record_bytes"] = _size_stats([_CIFAR10_RECORD])
    shown = []
    reader = read_cifar10(path)
    try:
        for i, (label, image) in enumerate(reader):
            if i >= limit:
                break
            shown.append({"index": i, "label": int(label), "image": _array_summary(image)})
    finally:
        reader.close()
    out["records"] = shown


def _inspect_lines(path: str, compression: str | None, kind: str, limit: int, out: dict) -> None:
    from feedline.formats import csv as fcsv
    from feedline.formats import text

    sizes: list[int] = []
    shown: list[dict] = []
    out["records"] = shown
    records = (
        fcsv.iter_records(path, compression=compression)
        if kind == "csv"
        else text.read_lines(path, compression=compression)
    )
    try:
        for record in records:
            if len(shown) < limit:
                item: dict[str, Any] = {"index": len(sizes), "bytes": len(record)}
                if kind == "csv":
                    item["fields"] = [
                        _cut(f.decode("utf-8", "replace")) for f in fcsv.split_record(record)
                    ]
                elif kind == "recordio_idx":
                    key, _, offset = record.partition(b"\t")
                    item["key"] = key.decode("utf-8", "replace")
                    item["offset"] = int(offset) if offset.isdigit() else None
                else:
                    item["text"] = _cut(record.decode("utf-8", "replace"))
                shown.append(item)
            sizes.append(len(record))
    finally:
        out["count"] = len(sizes)
        out["record_bytes"] = _size_stats(sizes)
        close = getattr(records, "close", None)
        if close is not None:
            close()
    if kind == "csv" and shown:
        out["columns"] = len(shown[0]["fields"])


def inspect_file(path: str | os.PathLike, *, limit: int = 3) -> dict[str, Any]:
    """Summary of one file as a JSON-able ``dict``: ``path``, ``format``,
    ``compression``, ``size_bytes``, ``count``, ``record_bytes`` (min/mean/max),
    ``records`` (the first ``limit`` decoded), ``error`` (``None`` or the message of
    the damage that stopped the scan; ``count`` then counts the records before it) and
    ``status`` (0; 1 for damage; 2 for a file of the wrong type, see
    :func:`feedline.cli.check_format`: then nothing is read).

    Args:
        path: the file (its format is detected from its content).
        limit: how many of the first records to decode into ``records`` (every record
            is still counted).

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "lines.txt")
    >>> with open(path, "w") as f: f.writelines(w + chr(10) for w in ("alpha", "be"))
    >>> info = inspect_file(path, limit=1)
    >>> info["format"], info["count"], info["record_bytes"], len(info["records"]), info["error"]
    ('text', 2, {'min': 2, 'mean': 3.5, 'max': 5}, 1, None)
    """
    from feedline.cli import UsageError, check_format, exit_status
    from feedline.exceptions import FeedlineError

    path = os.fspath(path)
    out: dict[str, Any] = {"path": path, "format": None, "compression": None, "error": None,
                           "status": 0}
    try:
        out["size_bytes"] = os.path.getsize(path)
        fmt, compression = detect_format(path)
        out["format"], out["compression"] = fmt, compression
        check_format(path, fmt, command="inspect")
        if fmt == "tfrecord":
            _inspect_tfrecord(path, compression, limit, out)
        elif fmt == "recordio":
            _inspect_recordio(path, limit, out)
        elif fmt == "idx":
            _inspect_idx(path, limit, out)
        elif fmt == "cifar10":
            _inspect_cifar(path, out["size_bytes"], limit, out)
        elif fmt in ("csv", "text", "recordio_idx"):
            _inspect_lines(path, compression, fmt, limit, out)
        elif fmt == "empty":
            out.update(count=0, record_bytes=None, records=[])
    except (FeedlineError, OSError, ValueError, UsageError) as exc:
        out["error"] = (
            str(exc) if isinstance(exc, (FeedlineError, UsageError))
            else f"{type(exc).__name__}: {exc}"
        )
        # a missing file (also a URL) is the wrong input (2), as a missing local path is
        out["status"] = exit_status(exc) if isinstance(exc, (UsageError, FileNotFoundError)) else 1
        if isinstance(exc, FileNotFoundError):
            out["error"] = f"{path}: no such file"
    return out


# --------------------------------------------------------------------------- printing


def _bytes_repr(data: bytes, *, width: int = _REPR_SHOWN, more: bool = False) -> str:
    """``repr(data)``, cut to at most ``width`` characters plus ``...`` at a whole byte,
    never inside an escape such as ``\\xff`` (``more``: ``data`` is itself a prefix, so
    ``...`` follows anyway).

    >>> _bytes_repr(b"\\xff" * 20, width=12)
    "b'\\\\xff\\\\xff'..."
    >>> _bytes_repr(b"ab"), _bytes_repr(b"ab", more=True)
    ("b'ab'", "b'ab'...")
    """
    text = repr(data)
    if len(text) <= width:
        return text + "..." if more else text
    lo, hi = 0, len(data)  # the longest prefix whose repr fits
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if len(repr(data[:mid])) <= width:
            lo = mid
        else:
            hi = mid - 1
    return repr(data[:lo]) + "..."


def _short(value: Any) -> str:
    if isinstance(value, dict) and "kind" in value:
        if value["kind"] == "empty":
            return "(empty Feature)"
        vals = value["values"]
        if value["kind"] == "bytes":
            vals = [
                _bytes_repr(base64.b64decode(v))
                if isinstance(v, str)
                else f"{_bytes_repr(base64.b64decode(v['prefix']), more=True)} ({v['length']} bytes)"
                for v in vals
            ]
        more = ", ..." if value["count"] > len(vals) else ""
        return f"{value['kind']}[{value['count']}] [{', '.join(map(str, vals))}{more}]"
    return json.dumps(value)


def _print_record(item: dict[str, Any], write) -> None:
    line = (
        f"  [{item['index']}] {item.get('bytes', '')} bytes"
        if "bytes" in item
        else f"  [{item['index']}]"
    )
    kind = item.get("type")
    if kind:
        line += f" {kind}"
    write(line)
    for key in ("features", "context"):
        for name, feat in item.get(key, {}).items():
            write(f"      {name}: {_short(feat)}")
    for name, fl in item.get("feature_lists", {}).items():
        first = "; ".join(_short(s) for s in fl["first"])
        write(f"      {name}: {fl['steps']} steps, first: {first}")
    for key in (
        "header",
        "payload_bytes",
        "payload_format",
        "label",
        "image",
        "fields",
        "text",
        "key",
        "offset",
        "shape",
        "values",
        "min",
        "mean",
        "max",
        "head_hex",
    ):
        if key in item:
            write(f"      {key}: {json.dumps(item[key], ensure_ascii=False)}")


def _print_summary(info: dict[str, Any], write) -> None:
    if info["format"] is None:  # nothing could be read: the error line says why
        return
    fmt = info["format"]
    if info.get("compression"):
        fmt += f" ({info['compression']})"
    write(f"{info['path']}: {fmt}, {info.get('size_bytes', '?')} bytes")
    if "count" in info:
        stats = info.get("record_bytes")
        sizes = (
            f"; record bytes min/mean/max {stats['min']}/{stats['mean']}/{stats['max']}"
            if stats
            else ""
        )
        write(f"  records: {info['count']}{' before the error' if info['error'] else ''}{sizes}")
    for key in ("dtype", "shape", "columns"):
        if key in info:
            write(f"  {key}: {info[key]}")
    for item in info.get("records", []):
        _print_record(item, write)


def run(args: argparse.Namespace) -> int:
    """Inspect ``args.files``; the exit status is the largest of the files' ``status``
    (1: damaged or unreadable, 2: the wrong type of file), 2 when one is missing or a
    directory (then nothing is inspected).

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
    >>> report = json.loads(out.getvalue())[0]
    >>> status, report["format"], report["count"], report["size_bytes"]
    (0, 'tfrecord', 2, 35)
    """
    from feedline.cli import check_input_files

    check_input_files(args.files)
    infos = [inspect_file(path, limit=args.limit) for path in args.files]
    if args.json:
        print(json.dumps(infos, indent=2, ensure_ascii=False))
    else:
        for info in infos:
            _print_summary(info, print)
    failed = [i for i in infos if i["error"]]
    for info in failed:
        error = info["error"].splitlines()[0]
        error = error if info["path"] in error else f"{info['path']}: {error}"
        print(f"feedline inspect: error: {error}", file=sys.stderr)
    return max((i["status"] for i in infos), default=0)
