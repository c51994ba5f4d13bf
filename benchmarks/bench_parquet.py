"""Parquet / Arrow reading to numpy batches: feedline vs pyarrow alone vs Hugging Face
``datasets``, one run.

Makes one table (``--rows`` rows: an int64 id, eight float32 features, an int32 label and
a short text) and writes it with pyarrow as a Parquet file (snappy, row groups of 65,536
rows) and, through ``datasets``, as a saved dataset folder (``save_to_disk``: Arrow IPC
stream, memory-mapped when read), both under ``benchmarks/data/parquet/``. Every reader
turns the data into batches of ``--batch-size`` rows, each a dict of numpy arrays (text
as an object array of ``str``), or into row dicts for the row cases; page cache warm, best
of ``--repeat`` after one warm-up. Results go to ``benchmarks/results/parquet.md``.

    python benchmarks/bench_parquet.py                 # 200,000 rows
    python benchmarks/bench_parquet.py --rows 20000 --repeat 1   # smoke run
"""

from __future__ import annotations

import argparse
import gc
import itertools
import os
import pathlib
import shutil
import sys
import tempfile
import time

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import harness  # noqa: E402

DATA = HERE / "data" / "parquet"
NUMERIC = ["id", *[f"f{i}" for i in range(8)], "label"]
ROW_GROUP = 65_536


def make_data(rows: int) -> tuple[pathlib.Path, pathlib.Path]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    parquet = DATA / f"table-{rows}.parquet"
    saved = DATA / f"saved-{rows}"
    if parquet.exists() and (saved / "state.json").exists():
        return parquet, saved
    DATA.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    words = np.array(["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"])
    columns = {"id": pa.array(np.arange(rows, dtype=np.int64))}
    for i in range(8):
        columns[f"f{i}"] = pa.array(rng.standard_normal(rows, dtype=np.float32))
    columns["label"] = pa.array(rng.integers(0, 1000, rows, dtype=np.int32))
    picks = rng.integers(0, len(words), (rows, 4))
    columns["text"] = pa.array([" ".join(w) for w in words[picks]])
    table = pa.table(columns)
    tmp = parquet.with_suffix(".tmp")
    pq.write_table(table, tmp, row_group_size=ROW_GROUP, compression="snappy")
    os.replace(tmp, parquet)
    datasets = _datasets()
    if datasets is not None:
        if saved.exists():
            shutil.rmtree(saved)
        datasets.Dataset(table).save_to_disk(str(saved))
    return parquet, saved


def _datasets():
    try:
        os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
        os.environ.setdefault("HF_DATASETS_CACHE", tempfile.mkdtemp(prefix="feedline-hf-"))
        import datasets

        datasets.disable_progress_bars()
        return datasets
    except ImportError:
        return None


def drain(batches) -> int:
    """Rows in an iterable of column dicts (touching one array of each batch)."""
    total = 0
    for batch in batches:
        total += len(next(iter(batch.values())))
    return total


def drain_rows(rows, limit: int) -> int:
    return sum(1 for _ in itertools.islice(rows, limit))


def timed_interleaved(cases: dict, repeat: int, *, fast_rounds: int = 3) -> dict:
    """Best seconds of each case (``None`` stays ``None``), the cases run in turn in every
    round so that a shared machine's changing load falls on all of them alike. Cases
    whose key's reader does not name `datasets` (fractions of a second each) run
    ``fast_rounds`` times per round."""
    best = {key: (None if fn is None else float("inf")) for key, fn in cases.items()}
    for fn in cases.values():  # warm-up
        if fn is not None:
            fn()
    for _ in range(repeat):
        for key, fn in cases.items():
            if fn is None:
                continue
            for _ in range(1 if "datasets" in key[1] else fast_rounds):
                gc.collect()
                start = time.perf_counter()
                fn()
                best[key] = min(best[key], time.perf_counter() - start)
    return best


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--row-rows", type=int, default=20_000,
                        help="rows read in the row-by-row cases")
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)

    import pyarrow as pa
    import pyarrow.parquet as pq

    from feedline import parquet as fp
    from feedline import split

    parquet, saved = make_data(args.rows)
    datasets = _datasets()
    bs, n = args.batch_size, args.rows

    def pyarrow_batches(columns):
        pf = pq.ParquetFile(parquet)
        return ({name: rb.column(i).to_numpy(zero_copy_only=False)
                 for i, name in enumerate(rb.schema.names)}
                for rb in pf.iter_batches(batch_size=bs, columns=columns))

    def pyarrow_ipc_batches(columns):
        source = pa.memory_map(str(saved / "data-00000-of-00001.arrow"))
        table = pa.ipc.open_stream(source).read_all()
        if columns is not None:
            table = table.select(columns)
        return ({name: rb.column(i).to_numpy(zero_copy_only=False)
                 for i, name in enumerate(rb.schema.names)}
                for rb in table.to_batches(max_chunksize=bs))

    def fragments_rebatch(columns):
        return fp.rebatch(split(fp.read_fragments(str(parquet), columns=columns), 0, 1), bs)

    hf = None
    if datasets is not None and (saved / "state.json").exists():
        hf = datasets.load_from_disk(str(saved))
    have_saved = (saved / "state.json").exists()

    rows = []
    for label, columns in (("numeric columns (10)", NUMERIC), ("all columns, with text", None)):
        assert drain(fp.read_batches(str(parquet), batch_size=bs, columns=columns)) == n
        cases = {
            ("Parquet", "pyarrow `ParquetFile.iter_batches` -> numpy"):
                lambda c=columns: drain(pyarrow_batches(c)),
            ("Parquet", "feedline `read_batches`"):
                lambda c=columns: drain(fp.read_batches(str(parquet), batch_size=bs, columns=c)),
            ("Parquet", "feedline `read_fragments` + `split` + `rebatch`"):
                lambda c=columns: drain(fragments_rebatch(c)),
            ("saved dataset", "pyarrow IPC stream -> numpy"):
                lambda c=columns: drain(pyarrow_ipc_batches(c)),
            ("saved dataset", "feedline `load_from_disk(batch_size=)`"):
                None if not have_saved else
                lambda c=columns: drain(fp.load_from_disk(saved, batch_size=bs, columns=c)),
            ("saved dataset", "feedline `load_from_disk(batch_size=, min_fragment_rows=65536)`"):
                None if not have_saved else
                lambda c=columns: drain(fp.load_from_disk(saved, batch_size=bs, columns=c,
                                                          min_fragment_rows=ROW_GROUP)),
            ("saved dataset", "datasets `.with_format(\"numpy\").iter(batch_size=)`"): None,
        }
        if hf is not None:
            view = hf.with_format("numpy")
            if columns is not None:
                view = view.select_columns(columns)
            cases[("saved dataset", "datasets `.with_format(\"numpy\").iter(batch_size=)`")] = \
                lambda v=view: drain(v.iter(batch_size=bs))
        times = timed_interleaved(cases, args.repeat)
        pa_rate = harness.rate(n, times[("Parquet", "pyarrow `ParquetFile.iter_batches` -> numpy")])
        hf_time = times[("saved dataset", "datasets `.with_format(\"numpy\").iter(batch_size=)`")]
        hf_rate = None if hf_time is None else harness.rate(n, hf_time)
        for (source, reader), seconds in times.items():
            r = None if seconds is None else harness.rate(n, seconds)
            rows.append([label, source, reader, harness.fmt_rate(r),
                         harness.ratio(r, pa_rate), harness.ratio(r, hf_rate)])
            print(rows[-1], flush=True)

    # row by row: feedline read_rows vs datasets' plain iteration, on the saved folder
    m = min(args.row_rows, n)
    row_cases = {
        ("saved dataset", "feedline `load_from_disk` rows"):
            None if not have_saved else lambda: drain_rows(iter(fp.load_from_disk(saved)), m),
        ("Parquet", "feedline `read_rows`"):
            lambda: drain_rows(iter(fp.read_rows(str(parquet))), m),
        ("saved dataset", "datasets `for row in ds`"):
            None if hf is None else lambda: drain_rows(iter(hf), m),
    }
    times = timed_interleaved(row_cases, args.repeat)
    hf_rows = times[("saved dataset", "datasets `for row in ds`")]
    hf_row_rate = None if hf_rows is None else harness.rate(m, hf_rows)
    for (source, reader), seconds in times.items():
        r = None if seconds is None else harness.rate(m, seconds)
        rows.append(["rows as dicts, all columns", source, reader, harness.fmt_rate(r), "",
                     harness.ratio(r, hf_row_rate)])
        print(rows[-1], flush=True)

    table = harness.markdown_table(
        ["data", "source", "reader", "rows/s", "/ pyarrow Parquet", "/ datasets"], rows)
    versions = f"pyarrow {pa.__version__}; datasets {getattr(datasets, '__version__', 'not installed')}"
    harness.write_section(
        "parquet",
        f"""## Parquet / Arrow to numpy batches (feedline vs pyarrow vs Hugging Face datasets)

{n:,} rows (int64 id, eight float32 features, int32 label, a text of four words), written
once as Parquet (snappy, row groups of {ROW_GROUP:,} rows) and once with
`datasets.Dataset.save_to_disk` (one Arrow IPC stream file, memory-mapped when read).
Each reader yields batches of {bs:,} rows as dicts of numpy arrays (text: object arrays of
`str`), in file order, in this process (no workers); the row cases read the first
{m:,} rows as dicts. Page cache warm; best of {args.repeat} rounds after a warm-up, the readers taking turns
in every round (the feedline and pyarrow readers three times a round, `datasets` once); {versions}.
"/ pyarrow Parquet" is the rate over pyarrow's own `iter_batches` on the same Parquet
file with the same columns (goal: 0.80x or more); "/ datasets" over `datasets`' iteration
of the saved folder (goal: above 1.00x).

{table}
""",
    )


if __name__ == "__main__":
    main()
