"""CSV, fixed-length records and text lines: feedline against tf.data and pyarrow.

``python benchmarks/bench_text_formats.py [--rows N] [--repeat R]`` writes
``benchmarks/results/text_formats.md``. The CSV file has 200,000 rows of five columns (int,
float, int, string, float); it is read with ``feedline.csv.read_csv`` (batches of 1024 and
row by row), ``tf.data.experimental.CsvDataset`` (``.batch(1024)`` and element by element)
and pyarrow's streaming ``pyarrow.csv.open_csv`` turned into numpy columns, with its
threads and on one thread. Fixed-length records (``feedline.fixed``) and text lines
(``feedline.text``) are compared with ``FixedLengthRecordDataset`` and ``TextLineDataset``.
Every number is the best of ``--repeat`` full passes after a warm-up, in one run.
"""

from __future__ import annotations

import argparse
import pathlib
import random
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from feedline import Dataset, fixed, text  # noqa: E402
from feedline.csv import read_csv  # noqa: E402
from feedline.formats.csv import CSVReader  # noqa: E402

import harness  # noqa: E402

PEER_SCRIPT = HERE / "peers" / "tensorflow_text_formats.py"
BATCH = 1024
DEFAULTS = [[0], [0.0], [0], [""], [0.0]]
RECORD_BYTES = 64


def make_files(folder: pathlib.Path, rows: int) -> tuple[pathlib.Path, pathlib.Path, pathlib.Path]:
    rng = random.Random(0)
    csv_path = folder / "rows.csv"
    with open(csv_path, "w") as f:
        for i in range(rows):
            f.write(f"{i},{rng.random() * 100:.4f},{rng.randint(-1000, 1000)},"
                    f"name{i % 97},{rng.random():.6f}\n")
    fixed_path = folder / "records.bin"
    fixed_path.write_bytes(rng.randbytes(RECORD_BYTES * rows))
    text_path = folder / "lines.txt"
    with open(text_path, "w") as f:
        for i in range(rows):
            f.write(f"line {i} " + "x" * (i % 50) + "\n")
    return csv_path, fixed_path, text_path


def csv_batches(path: pathlib.Path) -> int:
    return sum(len(cols[0]) for cols in read_csv(path, DEFAULTS, batch_size=BATCH))


def csv_rows(path: pathlib.Path) -> int:
    return sum(1 for _ in read_csv(path, DEFAULTS))


def csv_batches_without_pyarrow(path: pathlib.Path) -> int:
    """read_csv's batches with its pyarrow engine switched off (the engine a machine
    without pyarrow runs: numpy columns, the reference where they do not apply)."""
    CSVReader._arrow = False
    try:
        return csv_batches(path)
    finally:
        CSVReader._arrow = True


def arrow_rows(path: pathlib.Path, threads: bool) -> int | None:
    try:
        import pyarrow as pa
        from pyarrow import csv as pacsv
    except ImportError:
        return None
    types = {"a": pa.int32(), "b": pa.float32(), "c": pa.int32(), "d": pa.binary(),
             "e": pa.float32()}
    reader = pacsv.open_csv(
        path, read_options=pacsv.ReadOptions(use_threads=threads, column_names=list(types)),
        convert_options=pacsv.ConvertOptions(column_types=types))
    n = 0
    for batch in reader:
        cols = [c.to_numpy(zero_copy_only=False) for c in batch.columns]
        n += len(cols[0])
    return n


def fixed_batches(path: pathlib.Path) -> int:
    source = Dataset.from_source(lambda: fixed.read_fixed(path, RECORD_BYTES))
    return sum(len(b) for b in source.batch(BATCH))


def fixed_records(path: pathlib.Path) -> int:
    return sum(1 for _ in fixed.read_fixed(path, RECORD_BYTES))


def text_batches(path: pathlib.Path) -> int:
    r = text.TextLineReader(path)
    n = 0
    while lines := r.next_batch(BATCH):
        n += len(lines)
    return n


def text_lines(path: pathlib.Path) -> int:
    return sum(1 for _ in text.read_lines(path))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    folder = pathlib.Path(tempfile.mkdtemp(prefix="feedline-bench-text-"))
    csv_path, fixed_path, text_path = make_files(folder, args.rows)
    peer = harness.run_peer("tensorflow", PEER_SCRIPT, args.repeat, BATCH, csv_path, fixed_path,
                            RECORD_BYTES, text_path)
    version = (peer or {}).get("tensorflow") or harness.NOT_INSTALLED

    def measure(fn, path):
        count = fn(path)
        return count, harness.timed(lambda: fn(path), repeat=args.repeat)

    rows = []
    cases = [("CSV, 5 columns", "csv", csv_path, csv_batches, csv_rows),
             (f"fixed-length, {RECORD_BYTES} B", "fixed", fixed_path, fixed_batches,
              fixed_records),
             ("text lines", "text", text_path, text_batches, text_lines)]
    for label, key, path, batches, singles in cases:
        n, batched = measure(batches, path)
        n1, single = measure(singles, path)
        assert n == n1 == args.rows, (n, n1)
        theirs = (peer or {}).get(key)
        if theirs is not None:
            assert theirs["rows"] == n, (theirs, n)
        tf_b = None if theirs is None else harness.rate(n, theirs["batch"])
        tf_e = None if theirs is None else harness.rate(n, theirs["element"])
        ours_b, ours_e = harness.rate(n, batched), harness.rate(n, single)
        rows.append([label, harness.fmt_rate(ours_b), harness.fmt_rate(tf_b),
                     harness.ratio(ours_b, tf_b), harness.fmt_rate(ours_e),
                     harness.fmt_rate(tf_e), harness.ratio(ours_e, tf_e)])
        print(rows[-1], flush=True)
    arrow = []
    ours_b = harness.rate(args.rows, harness.timed(lambda: csv_batches(csv_path),
                                                    repeat=args.repeat))
    no_arrow = harness.rate(args.rows, harness.timed(lambda: csv_batches_without_pyarrow(
        csv_path), repeat=args.repeat))
    arrow.append(["feedline read_csv batches of 1024", harness.fmt_rate(ours_b), "1.00x"])
    arrow.append(["feedline read_csv batches, pyarrow engine off", harness.fmt_rate(no_arrow),
                  harness.ratio(ours_b, no_arrow)])
    for threads in (True, False):
        if arrow_rows(csv_path, threads) is None:
            arrow.append(["pyarrow " + ("threads" if threads else "one thread"),
                          harness.NOT_INSTALLED, ""])
            continue
        theirs = harness.rate(args.rows, harness.timed(lambda t=threads: arrow_rows(csv_path, t),
                                                        repeat=args.repeat))
        arrow.append([f"pyarrow open_csv, {'its threads' if threads else 'one thread'}",
                      harness.fmt_rate(theirs), harness.ratio(ours_b, theirs)])
    table = harness.markdown_table(
        ["file", "feedline batches of 1024 /s", "tf.data .batch(1024) /s", "feedline / tf.data",
         "feedline per record /s", "tf.data per element /s", "feedline / tf.data"], rows)
    arrow_table = harness.markdown_table(
        ["CSV reader (numpy columns)", "rows/s", "feedline read_csv batches / it"], arrow)
    harness.write_section("text_formats", f"""## CSV, fixed-length records and text lines

`python benchmarks/bench_text_formats.py` — {args.rows:,} rows each, best of {args.repeat}
passes; TensorFlow {version}. CSV: five columns (int, float, int, string, float) read as
numpy columns: `feedline.csv.read_csv(path, defaults, batch_size=1024)` against
`tf.data.experimental.CsvDataset(path, types).batch(1024)`, and row by row against
tf.data's per-element iteration. feedline parses 1 MiB blocks of lines with pyarrow's
threaded reader where a check of the block's bytes shows that pyarrow reads it exactly
as the reference does (`feedline.formats.csv_arrow`), else splits and converts quote-free
records column by column (numpy), and decodes any record that needs more the reference
way; `tests/test_csv_arrow.py` and `tests/test_csv_fast.py` check that all three give the
same output, bit for bit. The second table compares with pyarrow's streaming
`open_csv` (float32/int32/binary columns turned into numpy arrays), and shows feedline
with its pyarrow engine switched off (what runs where pyarrow is not installed).

{table}

{arrow_table}
""")


if __name__ == "__main__":
    main()
