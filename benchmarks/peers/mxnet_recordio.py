"""Peer side of bench_recordio.py: read RecordIO files with ``mxnet.recordio.MXRecordIO``.

Runs under the MXNet peer's Python (``harness.run_peer("mxnet", ...)``)::

    python benchmarks/peers/mxnet_recordio.py REPEAT FILE [FILE ...]

and prints one JSON object on its last line: for each file, the best of REPEAT timed reads
(after one warm-up read) in seconds, the record count and the payload bytes.
"""

import json
import sys
import time

import mxnet as mx


def read_all(path):
    reader = mx.recordio.MXRecordIO(path, "r")
    count = size = 0
    while True:
        item = reader.read()
        if item is None:
            break
        count += 1
        size += len(item)
    reader.close()
    return count, size


def main():
    repeat = int(sys.argv[1])
    result = {"mxnet": mx.__version__, "files": {}}
    for path in sys.argv[2:]:
        count, size = read_all(path)  # warm-up: page cache and library
        best = float("inf")
        for _ in range(repeat):
            start = time.perf_counter()
            read_all(path)
            best = min(best, time.perf_counter() - start)
        result["files"][path] = {"seconds": best, "records": count, "payload_bytes": size}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
