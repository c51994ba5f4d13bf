"""tf.data's operations on feedline's engine vs tf.data: ``interleave`` and
``group_by_window`` throughput on the per-item path.

Both sides build the same pipelines over integer sources and iterate them from Python, as a
training loop does (feedline in the consumer's thread; tf.data without parallel calls, with
its default options, which may still prefetch in the background):

* interleave: 16 inputs of 4,000 items each, ``cycle_length=4, block_length=2``;
* group_by_window: 64,000 items, key ``x % 8``, windows of 32 reduced to batches of 32.

Best of three epochs; the outputs are checked (counts on the tf.data side, values against
tf.data's order rules in the tests).

    python benchmarks/bench_tfdata_ops.py [--inputs 16] [--per-input 4000] [--items 64000]
"""

from __future__ import annotations

import argparse
import pathlib
import time

from feedline import Dataset

import harness

HERE = pathlib.Path(__file__).resolve().parent


def best(ds: Dataset, expected: int, per_batch: bool = False) -> float:
    seconds = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        count = sum(len(b) for b in ds) if per_batch else sum(1 for _ in ds)
        seconds = min(seconds, time.perf_counter() - start)
        if count != expected:
            raise SystemExit(f"expected {expected} items, got {count}")
    return seconds


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", type=int, default=16)
    parser.add_argument("--per-input", type=int, default=4000)
    parser.add_argument("--items", type=int, default=64000)
    args = parser.parse_args(argv)
    per = args.per_input
    inter = Dataset.range(args.inputs).interleave(
        lambda i: Dataset.range(i * per, (i + 1) * per), cycle_length=4, block_length=2)
    grouped = Dataset.range(args.items).group_by_window(
        lambda x: x % 8, lambda key, w: w.batch(32), window_size=32)
    n_inter = args.inputs * per
    ours = {"interleave": best(inter, n_inter),
            "group_by_window": best(grouped, args.items, per_batch=True)}
    peer = harness.run_peer("tensorflow", HERE / "peers" / "tensorflow_tfdata_ops.py",
                            args.inputs, per, args.items)
    theirs = {"interleave": peer and peer["interleave_s"],
              "group_by_window": peer and peer["group_by_window_s"]}
    counts = {"interleave": n_inter, "group_by_window": args.items}
    rows = []
    for op, label in (("interleave", f"interleave ({args.inputs} inputs x {per}, cycle 4, "
                                     "block 2)"),
                      ("group_by_window", f"group_by_window ({args.items} items, 8 keys, "
                                          "windows of 32 -> batches)")):
        n, tf_s = counts[op], theirs[op]
        tf_rate = None if tf_s is None else harness.rate(n, tf_s)
        rows.append([label, harness.fmt_rate(harness.rate(n, ours[op])),
                     harness.fmt_rate(tf_rate), harness.ratio(harness.rate(n, ours[op]), tf_rate)])
    version = peer["version"] if peer else harness.NOT_INSTALLED
    text = (
        f"## tf.data operations: interleave and group_by_window (feedline vs tf.data, "
        f"TensorFlow {version})\n\n"
        "The same pipelines over integer sources, iterated from Python item by item (the "
        "per-item path): feedline in the consumer's thread; tf.data without "
        "`num_parallel_calls`, with its default options (its automatic optimizations may "
        "still run the pipeline ahead in a background thread). Items per second, best of "
        "three epochs. feedline's order is tf.data's (checked by "
        "`tests/test_tfdata_ops.py` against outputs TensorFlow wrote). Command: "
        "`python benchmarks/bench_tfdata_ops.py`.\n\n"
        + harness.markdown_table(["operation", "feedline items/s", "tf.data items/s",
                                  "feedline vs tf.data"], rows)
    )
    path = harness.write_section("tfdata_ops", text)
    print(text)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
