"""``feedline demo``: pack a real dataset, stream it, train a network, report.

Runs offline on scikit-learn's handwritten digits (``--mnist DIR`` for real MNIST IDX
files): packs them into sharded RecordIO (training) and TFRecord (test) files, streams
them through a feedline pipeline (shuffled shards, shuffle buffer, decoding in 2 worker
processes, batching, prefetch), trains the PaddlePaddle seeds' network (fc 200, fc 200,
softmax 10, Adam, model average) with feedline's runner — a progress bar, a test after every pass,
checkpoints, CSV logs — and prints a summary: test accuracy, training samples/s, and
where the input pipeline spent its time. ``--out`` gets::

    data/          train-*-of-*.rec + .idx, test-*-of-*.tfrecord
    checkpoints/   the last checkpoints (resume with --resume)
    logs/          passes.csv
    model.flp      the trained parameters (feedline.train.load_params)
    curves.png     loss and accuracy per pass
    summary.json   the numbers printed at the end

A run without ``--resume`` starts afresh: it replaces the checkpoints and logs a
previous run left in ``--out``. ``--resume`` continues from the newest checkpoint, and
its summary, logs and curves cover the whole run, the passes before the resume included
(from ``logs/passes.csv``); the training speed is that of the passes this process ran. A
``--resume`` of a run that has already finished its passes trains nothing, says so and
leaves ``summary.json`` as it was (raise ``--passes`` to train more).

>>> import argparse
>>> parser = argparse.ArgumentParser(); add_arguments(parser)
>>> args = parser.parse_args(["--quick"])
>>> args.out, args.quick, args.passes
('demo-out', True, None)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from typing import Any

__all__ = ["HELP", "add_arguments", "run"]

HELP = "pack handwritten digits into record files, stream them, train a network, report"

_FULL_PASSES = 10
_QUICK_PASSES = 4


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the demo's options to ``parser``.

    Args:
        parser: the subcommand's parser, changed in place.

    >>> import argparse
    >>> parser = argparse.ArgumentParser(prog="feedline demo"); add_arguments(parser)
    >>> args = parser.parse_args(["--passes", "3", "--resume", "--out", "runs/a"])
    >>> args.passes, args.resume, args.out, args.num_workers
    (3, True, 'runs/a', 2)
    """
    parser.add_argument("--out", default="demo-out", help="output directory (default: ./demo-out)")
    parser.add_argument("--passes", type=int, default=None,
                        help=f"training passes (default {_FULL_PASSES}, {_QUICK_PASSES} with --quick)")
    parser.add_argument("--quick", action="store_true", help="a short run (fewer passes)")
    parser.add_argument("--mnist", metavar="DIR", default=None,
                        help="use the MNIST IDX files in DIR instead of scikit-learn's digits")
    parser.add_argument("--batch-size", type=int, default=32, help="training batch size (default 32)")
    parser.add_argument("--learning-rate", type=float, default=1e-3, help="Adam's learning rate")
    parser.add_argument("--num-workers", type=int, default=2,
                        help="decoding worker processes (0: decode in the training thread)")
    parser.add_argument("--workers", type=int, dest="old_workers", default=None,
                        help=argparse.SUPPRESS)  # the deprecated old name of --num-workers
    parser.add_argument("--seed", type=int, default=0, help="seed of the split, shuffles and model")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads for training (default 1: the network is small, and "
                             "more threads only contend with the decoding workers)")
    parser.add_argument("--resume", action="store_true",
                        help="continue from the newest checkpoint in OUT/checkpoints")
    parser.add_argument("--no-plot", action="store_true", help="do not write curves.png")


def _positive(name: str, value: int) -> None:
    from feedline.cli import UsageError

    if value is None or value <= 0:
        raise UsageError(f"{name} must be a positive int, got {value}")


def run(args: argparse.Namespace) -> int:
    """Run the demo; return 0 (the exit status). Options are checked before anything
    is written (see :func:`feedline.cli.main` for how errors become exit statuses).

    Args:
        args: the options parsed by a parser that :func:`add_arguments` set up.

    >>> import argparse
    >>> parser = argparse.ArgumentParser(); add_arguments(parser)
    >>> run(parser.parse_args(["--passes", "0"]))
    Traceback (most recent call last):
    ...
    feedline.cli.UsageError: --passes must be a positive int, got 0
    """
    import torch

    from feedline.cli import UsageError
    from feedline.demo.data import load, pack
    from feedline.demo.network import digits_network
    from feedline.demo.pipeline import test_pipeline, train_pipeline
    from feedline.train import Runner, RunnerBuilder
    from feedline.train.builder import summarize
    from feedline.train.checkpoint import latest_checkpoint, save_params
    from feedline.train.items import DataProvider, LocalUpdater

    passes = args.passes if args.passes is not None else (_QUICK_PASSES if args.quick else _FULL_PASSES)
    _positive("--passes", passes)
    _positive("--batch-size", args.batch_size)
    _positive("--threads", args.threads)
    if args.old_workers is not None:
        print("feedline demo: --workers is deprecated, use --num-workers", file=sys.stderr)
        args.num_workers = args.old_workers
    if args.num_workers < 0:
        raise UsageError(f"--num-workers must be >= 0, got {args.num_workers}")
    if args.mnist is not None and not os.path.isdir(args.mnist):
        raise UsageError(f"--mnist {args.mnist}: "
                         f"{'is not a directory' if os.path.exists(args.mnist) else 'no such directory'}")
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        raise UsageError(f"--out {args.out}: is not a directory")
    torch.set_num_threads(args.threads)
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    if not args.resume:
        _start_afresh(out)
    say = _printer()
    started = time.perf_counter()

    images = load(mnist=args.mnist, seed=args.seed)
    shape = "x".join(map(str, images.shape))
    say(f"data: {images.source}, {len(images.train_x) + len(images.test_x):,} images of {shape} "
        f"pixels -> {len(images.train_x):,} for training, {len(images.test_x):,} for testing")
    t = time.perf_counter()
    packed = pack(images, os.path.join(out, "data"))
    say(f"packed: {len(packed.train)} RecordIO shards (+ .idx) and {len(packed.test)} TFRecord "
        f"shards, {packed.bytes / 1024:,.0f} KiB in {time.perf_counter() - t:.2f} s -> {out}/data")

    train_ds = train_pipeline(packed.train, scale=images.scale, batch_size=args.batch_size,
                              num_workers=args.num_workers, seed=args.seed)
    test_ds = test_pipeline(packed.test, scale=images.scale)
    say(f"pipeline: {train_ds!r}")
    net = digits_network(images.dim, images.classes, learning_rate=args.learning_rate)
    ckpt_dir = os.path.join(out, "checkpoints")
    resume = latest_checkpoint(ckpt_dir) if args.resume else None
    if args.resume and resume is None:
        say(f"no checkpoint in {ckpt_dir}: starting afresh")
    builder = (RunnerBuilder(net, seed=args.seed)
               .with_std_local_trainer(train_ds, stats=True)
               .with_std_tester(test_ds)
               .with_progress(stream=sys.stdout,  # a stream's first pass has no length
                              total=math.ceil(len(images.train_x) / args.batch_size))
               .with_metrics_logger(os.path.join(out, "logs"))
               .with_checkpoints(ckpt_dir, keep=2, resume=resume))
    runner = builder.build()
    assert isinstance(runner, Runner)  # one process: no device_count
    say(f"training: fc 200 -> fc 200 -> softmax {images.classes}, Adam (lr {args.learning_rate:g}) "
        "with a model average, "
        f"batch {args.batch_size}, {passes} passes, torch {torch.__version__} on "
        f"{torch.get_num_threads()} thread(s)" + (f", resuming from {os.path.basename(resume)}" if resume else ""))
    try:
        with runner:
            runner.run(passes)
            result = summarize(runner)
            provider = runner.find(DataProvider)
            assert provider is not None  # the builder adds one
            stats = provider.last_stats
            updater = runner.find(LocalUpdater)
            assert updater is not None  # the builder adds one
            updater.apply()
            try:
                save_params(os.path.join(out, "model.flp"), runner.context.module)
            finally:
                updater.restore()
    finally:
        train_ds.close()

    summary_path = os.path.join(out, "summary.json")
    if not result.passes and os.path.exists(summary_path):  # a finished run, resumed
        say(f"the run in {out} has already finished its {result.pass_id} passes "
            f"({os.path.basename(resume or '')}): nothing to train; summary.json is unchanged "
            "(raise --passes to train more)")
        return 0
    history = _history(os.path.join(out, "logs", "passes.csv"), result.pass_id)
    summary = _summary(result, history, stats, time.perf_counter() - started, images, out)
    summary["resumed_from"] = None if resume is None else os.path.basename(resume)
    if not args.no_plot and history:
        from feedline.demo.plot import write_curves

        summary["curves"] = write_curves(history, os.path.join(out, "curves.png"),
                                         title=f"feedline demo: {images.source}")
    with open(summary_path, "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=2)
    _print_summary(say, summary, stats)
    return 0


def _start_afresh(out: str) -> None:
    """Remove the checkpoints and logs an earlier run left in ``out`` (only the files the
    demo writes), so that a new run's logs and ``--resume`` are its own."""
    for sub, names in (("checkpoints", None), ("logs", ("passes.csv", "batches.csv"))):
        directory = os.path.join(out, sub)
        if not os.path.isdir(directory):
            continue
        for name in os.listdir(directory):
            if (name in names) if names else (name.startswith("checkpoint-") and name.endswith(".flc")):
                os.remove(os.path.join(directory, name))


def _history(log: str, passes: int) -> list[Any]:
    """``EndPass`` events of the whole run (passes ``0 .. passes - 1``) from the
    MetricsLogger's ``passes.csv``: a resumed run appends to it, and a pass logged twice
    (after the checkpoint it resumed from) counts once, with its last row."""
    import csv

    from feedline.train import EndPass, TestResult

    rows: dict[int, dict[str, str]] = {}
    if os.path.exists(log):
        with open(log, newline="", encoding="utf-8") as f:
            for row in csv.DictReader(f):
                rows[int(row["pass_id"])] = row

    def numbers(row: dict[str, str], prefix: str) -> dict[str, float]:
        return {k[len(prefix):]: float(v) for k, v in row.items()
                if k.startswith(prefix) and k != f"{prefix}cost" and v not in ("", None)}

    history = []
    for pass_id in sorted(p for p in rows if p < passes):
        row = rows[pass_id]
        test = None
        if row.get("test_cost"):
            test = TestResult(pass_id=pass_id, cost=float(row["test_cost"]),
                              metrics=numbers(row, "test_"))
        history.append(EndPass(pass_id=pass_id, cost=float(row["train_cost"]),
                               metrics=numbers(row, "train_"), test=test))
    return history


def _printer() -> Any:
    def say(line: str = "") -> None:
        print(line, flush=True)

    return say


def _summary(result: Any, history: list[Any], stats: Any, wall: float, images: Any,
             out: str) -> dict[str, Any]:
    """The numbers of ``summary.json``: ``passes`` counts the whole run (a resumed one
    included), ``passes_this_run`` those this process ran, whose timing gives the speed."""
    progress = result.progress
    train_seconds = sum(p["seconds"] for p in progress)
    train_samples = sum(p["samples"] for p in progress)
    tests = [p.test for p in history if p.test is not None]
    test = result.test if result.test is not None else (tests[-1] if tests else None)
    last = history[-1] if history else (result.passes[-1] if result.passes else None)
    return {
        "dataset": images.source,
        "train_samples": int(len(images.train_x)),
        "test_samples": int(len(images.test_x)),
        "passes": int(result.pass_id),
        "passes_this_run": len(result.passes),
        "test_accuracy": None if test is None else test.metrics.get("accuracy"),
        "test_cost": None if test is None else test.cost,
        "train_accuracy": None if last is None else last.metrics.get("accuracy"),
        "train_cost": None if last is None else last.cost,
        "train_samples_per_second": train_samples / train_seconds if train_seconds else None,
        "training_seconds": train_seconds,
        "wall_seconds": wall,
        "pipeline": None if stats is None else stats.to_dict(),
        "checkpoint": result.checkpoint,
        "model": os.path.join(out, "model.flp"),
        "out": out,
    }


def _print_summary(say: Any, s: dict[str, Any], stats: Any) -> None:
    say()
    say("summary")
    if s["test_accuracy"] is not None:
        say(f"  test accuracy      {s['test_accuracy']:.4f} on {s['test_samples']:,} images "
            f"(cost {s['test_cost']:.4f}), after {s['passes']} passes")
    if s["train_samples_per_second"]:
        ran = s["passes_this_run"]
        this_run = (f"{ran} pass{'es' if ran != 1 else ''} run now, "
                    if ran != s["passes"] else "")
        say(f"  training speed     {s['train_samples_per_second']:,.0f} samples/s "
            f"({this_run}{s['training_seconds']:.2f} s of training, {s['wall_seconds']:.1f} s in all)")
    if stats is not None:
        say("  input pipeline, last pass (time inside each stage; 'self' excludes its inputs):")
        for line in str(stats).splitlines():
            say("    " + line)
    say(f"  files              {s['out']}: data/, checkpoints/, logs/passes.csv, model.flp"
        + (", curves.png" if s.get("curves") else "") + ", summary.json")
