"""RecordIO read throughput: feedline.recordio vs mxnet.recordio.MXRecordIO, one run.

Writes two RecordIO files with feedline (byte-identical to what MXNet writes) into
``benchmarks/data/recordio/``: many small records (100 bytes) and fewer large ones
(100 KB). Both readers read every payload as ``bytes`` (page cache warm, best of
``--repeat`` after one warm-up); a plain ``open().read()`` of the file in 1 MiB blocks is
the ceiling. Results go to ``benchmarks/results/recordio.md``.

    python benchmarks/bench_recordio.py            # full size (about 20 + 50 MB)
    python benchmarks/bench_recordio.py --scale 0.05   # smoke run
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from feedline import recordio  # noqa: E402

import harness  # noqa: E402

DATA = HERE / "data" / "recordio"
PEER_SCRIPT = HERE / "peers" / "mxnet_recordio.py"

CASES = (
    # name, payload size in bytes, record count at scale 1
    ("small", 100, 200_000),
    ("large", 100_000, 500),
)


def make_file(name: str, size: int, count: int) -> pathlib.Path:
    path = DATA / f"{name}-{size}x{count}.rec"
    if path.exists():
        return path
    DATA.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    block = rng.integers(0, 256, size * min(count, 1000), dtype=np.uint8).tobytes()
    tmp = path.with_suffix(".tmp")
    with recordio.RecordIOWriter(tmp) as w:
        for i in range(count):
            start = (i % 1000) * size
            w.write(block[start : start + size])
    os.replace(tmp, path)
    return path


def read_feedline(path: pathlib.Path) -> int:
    total = 0
    for payload in recordio.read(path):
        total += len(payload)
    return total


def read_plain(path: pathlib.Path) -> int:
    total = 0
    with open(path, "rb", buffering=0) as f:
        while True:
            block = f.read(1 << 20)
            if not block:
                return total
            total += len(block)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="multiply record counts")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)

    files = {}
    for name, size, count in CASES:
        files[name] = (size, make_file(name, size, max(1, int(count * args.scale))))

    peer = harness.run_peer(
        "mxnet", PEER_SCRIPT, args.repeat, *[str(p) for _, p in files.values()]
    )
    rows = []
    for name, (size, path) in files.items():
        file_bytes = path.stat().st_size
        count = sum(1 for _ in recordio.read(path))
        ours = harness.timed(lambda p=path: read_feedline(p), repeat=args.repeat)
        ceiling = harness.timed(lambda p=path: read_plain(p), repeat=args.repeat)
        theirs = None
        if peer is not None:
            measured = peer["files"][str(path)]
            assert measured["records"] == count, (measured, count)
            theirs = measured["seconds"]
        mb = file_bytes / 1e6
        rows.append(
            [
                f"{name}: {count:,} x {size:,} B",
                harness.fmt_rate(harness.rate(count, ours)),
                harness.fmt_rate(harness.rate(mb, ours), " MB/s"),
                harness.fmt_rate(None if theirs is None else harness.rate(count, theirs)),
                harness.fmt_rate(None if theirs is None else harness.rate(mb, theirs), " MB/s"),
                harness.ratio(harness.rate(1, ours), None if theirs is None else harness.rate(1, theirs)),
                f"{ours and ceiling / ours:.0%}",
            ]
        )
        print(rows[-1], flush=True)

    version = (peer or {}).get("mxnet") or harness.NOT_INSTALLED
    table = harness.markdown_table(
        [
            "file",
            "feedline records/s",
            "feedline MB/s",
            "MXRecordIO records/s",
            "MXRecordIO MB/s",
            "feedline / MXNet",
            "of plain read()",
        ],
        rows,
    )
    harness.write_section(
        "recordio",
        f"""## RecordIO reading (feedline.recordio vs mxnet.recordio.MXRecordIO)

Every payload of a RecordIO file read as `bytes`, sequentially, page cache warm; best of
{args.repeat} after a warm-up. `feedline.recordio.read(path)` against `MXRecordIO(path, "r").read()`
in a loop (MXNet {version}); "of plain read()" is feedline's time as a share of reading the
same file with `open().read()` in 1 MiB blocks (the ceiling, 100% = as fast as the ceiling).

{table}
""",
    )


if __name__ == "__main__":
    main()
