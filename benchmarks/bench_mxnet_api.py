"""MXNet drop-in: the DataBatch training loop over ImageRecordIter (int8 and float32), and
im2rec's list mode, each against MXNet 1.9.1 in the same run.

* Loop: ``for batch in it: batch.data[0] ...; count += batch.data[0].shape[0] - batch.pad``,
  one epoch, over the ``.rec`` that ``bench_image.py`` packs (``--count`` ImageNet-sized
  JPEGs), decode + random crop 224 + random mirror, batches of 64, ``preprocess_threads`` =
  cores; ``dtype="int8"`` (MXNet's semantics: pixel minus mean, saturated) and ``float32``
  (normalised). The MXNet row is ``benchmarks/peers/mxnet_image.py`` (the same loop).
* List mode: ``feedline.image.listfile.make_lists`` (what ``feedline pack --list`` runs)
  against im2rec's own ``make_list`` (``--list --recursive``, shuffled), on a tree of
  ``--files`` empty ``.jpg`` files in 100 folders; best of 3, the files are byte-identical.

Results go to ``benchmarks/results/mxnet_api.md``.

    python benchmarks/bench_mxnet_api.py                     # 1000 images, 20000 list entries
    python benchmarks/bench_mxnet_api.py --count 256 --files 2000   # smoke run
"""

from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_image  # noqa: E402

import harness  # noqa: E402


def feedline_loop_rate(rec: str, dtype: str, threads: int, epochs: int) -> tuple[float, int]:
    from feedline.image import ImageRecordIter

    kwargs = {}
    if dtype == "float32":
        kwargs = dict(mean_r=bench_image.MEAN[0], mean_g=bench_image.MEAN[1],
                      mean_b=bench_image.MEAN[2], std_r=bench_image.STD[0],
                      std_g=bench_image.STD[1], std_b=bench_image.STD[2])
    it = ImageRecordIter(
        path_imgrec=rec, data_shape=(3, 224, 224), batch_size=bench_image.BATCH, rand_crop=True,
        rand_mirror=True, preprocess_threads=threads, prefetch_buffer=4, round_batch=False,
        dtype=dtype, **kwargs,
    )

    def epoch() -> int:
        it.reset()
        count = 0
        for batch in it:  # MXNet's loop, unchanged
            count += batch.data[0].shape[0] - batch.pad
        return count

    with it:
        images = epoch()  # warm-up
        best = float("inf")
        for _ in range(epochs):
            start = time.perf_counter()
            images = epoch()
            best = min(best, time.perf_counter() - start)
    return images / best, images


def list_tree(root: pathlib.Path, files: int) -> None:
    for k in range(files):
        folder = root / f"class{k % 100:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{k}.jpg").touch()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=1000, help="JPEGs for the loop (default 1000)")
    parser.add_argument("--files", type=int, default=20000, help="files for list mode (default 20000)")
    parser.add_argument("--epochs", type=int, default=2, help="timed epochs, best kept")
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    args = parser.parse_args(argv)
    folder = bench_image.image_folder(args.count)
    rec = bench_image.packed(folder, "recordio", 1)[0]
    idx = os.path.splitext(rec)[0] + ".idx"

    table = []
    version = None
    for dtype in ("int8", "float32"):
        ours, images = feedline_loop_rate(rec, dtype, args.threads, args.epochs)
        theirs, version = bench_image.peer("mxnet", "mxnet_image.py", rec, idx, bench_image.BATCH,
                                           args.threads, dtype, args.epochs)
        table.append([f"feedline ImageRecordIter, DataBatch loop ({dtype})", harness.fmt_rate(ours),
                      "1.00x"])
        table.append([f"mx.io.ImageRecordIter, same loop ({dtype})", harness.fmt_rate(theirs),
                      harness.ratio(ours, theirs)])

    from feedline.image.listfile import make_lists

    work = pathlib.Path(tempfile.mkdtemp(prefix="feedline-bench-list-"))
    try:
        list_tree(work / "tree", args.files)
        ours_s = harness.timed(lambda: make_lists(work / "tree", work / "f", recursive=True),
                               repeat=3, warmup=1)
        result = harness.run_peer("mxnet", HERE / "peers" / "mxnet_im2rec_list.py",
                                  work / "tree", work / "m", 3, timeout=600)
        theirs_s = None if result is None else float(result["seconds"])
        same = theirs_s is not None and (work / "f.lst").read_bytes() == (work / "m.lst").read_bytes()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    table.append([f"feedline pack --list --recursive ({args.files} files)",
                  harness.fmt_rate(args.files / ours_s, " files/s"), "1.00x"])
    table.append([f"im2rec.py --list --recursive ({args.files} files)",
                  harness.fmt_rate(None if theirs_s is None else args.files / theirs_s, " files/s"),
                  harness.ratio(args.files / ours_s, None if theirs_s is None else args.files / theirs_s)])
    md = [
        "## MXNet drop-in (DataBatch loop, int8, im2rec --list)",
        "",
        f"The MXNet training loop (`batch.data[0]`, `batch.pad`, `reset()`) over feedline's "
        f"`ImageRecordIter` and over `mx.io.ImageRecordIter` {version or '(not installed)'}, one "
        f"epoch over {images} JPEGs (decode + random crop 224 + mirror, batches of "
        f"{bench_image.BATCH}, {args.threads} decode workers), best of {args.epochs} epochs after "
        f"a warm-up; and im2rec's list mode on {args.files} files in 100 folders (best of 3; "
        f"the `.lst` files are byte-identical: {'yes' if same else 'not compared'}). The ratio "
        "column is feedline's rate divided by the row's.",
        "",
        harness.markdown_table(["pipeline", "rate", "feedline / row"], table),
        "",
        f"Command: `python benchmarks/bench_mxnet_api.py --count {args.count} --files {args.files} "
        f"--epochs {args.epochs}`",
    ]
    path = harness.write_section("mxnet_api", "\n".join(md))
    print("\n".join(md))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
