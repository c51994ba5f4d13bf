"""What validating every fragment costs the Parquet / Arrow readers (issue 28): feedline
against itself, one run.

Every fragment feedline reads is checked with ``validate(full=True)`` before any value is
looked at, so that a damaged file is an error and never a crashed process. This measures,
on the data of ``bench_parquet.py`` (``--rows`` rows: int64 id, eight float32 features,
int32 label, a four-word text; Parquet with row groups of 65,536 rows, and the same table
as one Arrow IPC stream file as ``save_to_disk`` writes it, memory-mapped), the time of a
whole read (``read_fragments`` or ``read_batches`` to numpy, validation included) and the
time of ``validate(full=True)`` alone over the same fragments, the two taking turns in every
round, best of ``--repeat``. The unvalidated time is the difference. Results go to
``benchmarks/results/parquet_validate.md``.

    python benchmarks/bench_parquet_validate.py
    python benchmarks/bench_parquet_validate.py --rows 20000 --repeat 1   # smoke run
"""

from __future__ import annotations

import argparse
import gc
import os
import pathlib
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_parquet import DATA, drain  # noqa: E402

import harness  # noqa: E402


def _write_stream(parquet: pathlib.Path) -> pathlib.Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = DATA / (parquet.stem + ".arrows")
    if not path.exists():
        table = pq.read_table(parquet)
        tmp = path.with_suffix(".tmp")
        with pa.OSFile(str(tmp), "wb") as f, pa.ipc.new_stream(f, table.schema) as w:
            for batch in table.to_batches(max_chunksize=1000):  # save_to_disk's batches
                w.write_batch(batch)
        os.replace(tmp, path)
    return path


def _best(cases: dict, repeat: int) -> dict:
    best = dict.fromkeys(cases, float("inf"))
    for fn in cases.values():
        fn()  # warm-up
    for _ in range(repeat):
        for key, fn in cases.items():
            gc.collect()
            start = time.perf_counter()
            fn()
            best[key] = min(best[key], time.perf_counter() - start)
    return best


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)

    import pyarrow as pa

    from bench_parquet import make_data
    from feedline import parquet as fp

    parquet, _ = make_data(args.rows)
    stream = _write_stream(parquet)
    sources = {"Parquet (snappy, 65,536-row groups)": (str(parquet), {}),
               "Arrow IPC stream, 1,000-row batches joined to 65,536": (
                   str(stream), {"min_fragment_rows": 65_536})}
    rows = []
    for label, (path, options) in sources.items():
        files = fp.TableFiles([path], **options)
        tables = [files.read_fragment(k) for k in range(files.num_fragments)]

        def validate_all(tables: list = tables) -> None:
            for t in tables:
                t.validate(full=True)

        cases = {
            "validate": validate_all,
            "read_fragments": lambda p=path, o=options: drain(fp.read_fragments(p, **o)),
            f"read_batches({args.batch_size})": lambda p=path, o=options: drain(
                fp.read_batches(p, batch_size=args.batch_size, **o)),
        }
        best = _best(cases, args.repeat)
        for reader in ("read_fragments", f"read_batches({args.batch_size})"):
            whole, check = best[reader], best["validate"]
            rows.append([label, f"feedline `{reader}`",
                         harness.fmt_rate(harness.rate(args.rows, whole)),
                         harness.fmt_rate(harness.rate(args.rows, max(whole - check, 1e-9))),
                         f"{check / whole:.1%}",
                         harness.ratio(1 / whole, 1 / max(whole - check, 1e-9))])
    table = harness.markdown_table(
        ["source", "reader", "validated", "without validation", "validation's share",
         "validated speed / unvalidated"], rows)
    section = f"""## Parquet / Arrow: the cost of validating every fragment (issue 28)

What `validate(full=True)` on every fragment costs the readers (feedline against itself; it
is what keeps a damaged file from crashing the process). {args.rows:,} rows of the Parquet /
Arrow benchmark's table, all columns; "without validation" is the whole read's best time
less the best time of `validate(full=True)` alone over the same fragments, measured in
turns in one run (best of {args.repeat}); pyarrow {pa.__version__}.

{table}

Command: `python benchmarks/bench_parquet_validate.py`
"""
    print(section)
    harness.write_section("parquet_validate", section)


if __name__ == "__main__":
    main()
