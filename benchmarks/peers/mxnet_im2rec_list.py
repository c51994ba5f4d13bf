"""Peer side of bench_mxnet_api.py: MXNet 1.9.1's ``tools/im2rec.py --list`` on a folder.

Runs under the MXNet peer's Python (``harness.run_peer("mxnet", ...)``)::

    python benchmarks/peers/mxnet_im2rec_list.py ROOT PREFIX REPEAT

Loads the ``im2rec.py`` that ships inside the mxnet package, then times its own
``make_list(parse_args())`` for ``--list --recursive`` (its default shuffle), best of REPEAT.
Prints one JSON object on its last line.
"""

import contextlib
import importlib.util
import io
import json
import os
import sys
import time

import mxnet as mx


def main():
    root, prefix, repeat = sys.argv[1], sys.argv[2], int(sys.argv[3])
    path = os.path.join(os.path.dirname(mx.__file__), "tools", "im2rec.py")
    spec = importlib.util.spec_from_file_location("im2rec", path)
    im2rec = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(im2rec)
    sys.argv = ["im2rec.py", "--list", "--recursive", prefix, root]
    args = im2rec.parse_args()
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):  # it prints the category lines
            im2rec.make_list(args)
        best = min(best, time.perf_counter() - start)
    print(json.dumps({"version": mx.__version__, "seconds": best}))


if __name__ == "__main__":
    main()
