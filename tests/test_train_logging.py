"""The Runner's logs and progress display: TensorBoard event files and CSV written by
MetricsLogger read back, and the progress bar (tqdm or plain) only on a terminal."""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from feedline import Dataset, data_type
from feedline._internal.progress import ProgressBar, is_terminal
from feedline.train import SGD, Runner, RunnerItem, network
from feedline.train.items import (
    Counter,
    CreateModel,
    DataProvider,
    LocalUpdater,
    MetricsLogger,
    Progress,
    TrainOps,
)

INPUTS = {"x": data_type.dense_vector(3), "label": data_type.integer_value(2)}


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _runner(*extra, n=20, batch_size=5):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, 3)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64)
    torch.manual_seed(0)
    net = network(inputs=INPUTS, learning_rate=0.1, learning_method=SGD())(torch.nn.Linear(3, 2))
    return Runner([CreateModel(net), LocalUpdater(), Counter(),
                   DataProvider(Dataset.from_arrays(x, y), batch_size=batch_size), TrainOps(),
                   *extra])


class Costs(RunnerItem):
    """Records (global step, cost, accuracy) of every batch, as the trainer computed them."""

    def __init__(self):
        self.rows = []

    def on_batch_end(self, next_callback):
        stop = next_callback()
        ctx = self.context
        self.rows.append((ctx.global_step + 1, ctx.cost, ctx.metrics["accuracy"]))
        return stop


def test_tensorboard_event_file_and_csv_hold_the_trained_values(tmp_path):
    costs = Costs()
    logger = MetricsLogger(tmp_path, every_n_batches=1, tensorboard=True)
    with _runner(logger, costs) as runner:
        runner.run(2)
    acc = EventAccumulator(str(tmp_path))
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    assert {"train/cost", "train/accuracy", "pass/train_cost", "pass/train_accuracy"} <= tags
    cost_events = acc.Scalars("train/cost")
    assert [e.step for e in cost_events] == list(range(1, 9))
    assert [e.value for e in cost_events] == pytest.approx([c for _, c, _ in costs.rows], rel=1e-6)
    assert [e.value for e in acc.Scalars("train/accuracy")] == pytest.approx(
        [a for _, _, a in costs.rows], rel=1e-6)
    with open(tmp_path / "batches.csv") as f:
        batches = list(csv.DictReader(f))
    assert [int(b["global_step"]) for b in batches] == list(range(1, 9))
    assert [float(b["cost"]) for b in batches] == pytest.approx([c for _, c, _ in costs.rows])
    with open(tmp_path / "passes.csv") as f:
        passes = list(csv.DictReader(f))
    pass_events = acc.Scalars("pass/train_cost")
    assert [e.step for e in pass_events] == [int(p["global_step"]) for p in passes] == [4, 8]
    assert [e.value for e in pass_events] == pytest.approx(
        [float(p["train_cost"]) for p in passes], rel=1e-6)
    # the pass cost is the sample-weighted mean of its batch costs (equal batches here)
    assert float(passes[0]["train_cost"]) == pytest.approx(
        np.mean([c for _, c, _ in costs.rows[:4]]))


def test_progress_draws_a_tqdm_bar_on_a_terminal():
    out = Terminal()
    progress = Progress(stream=out, refresh=0)
    with _runner(progress) as runner:
        runner.run(1)
    text = out.getvalue()
    assert "pass 0: 100%|" in text and "4/4" in text and "cost " in text  # tqdm's format
    # the bar is erased, then the summary line is written from the line's start
    assert text.endswith("\n") and text.split("\r")[-1].startswith("pass 0: 4 batches, 20 samples in ")


def test_progress_plain_fallback_and_nothing_off_a_terminal():
    out = Terminal()
    with _runner(Progress(stream=out, refresh=0, backend="plain", width=4)) as runner:
        runner.run(1)
    text = out.getvalue()
    assert "\rpass 0 [#...] 1/4  cost " in text and "\rpass 0 [####] 4/4  cost " in text
    assert "|" not in text.split("pass 0: 4 batches")[0]  # no tqdm bar
    piped = io.StringIO()
    with _runner(Progress(stream=piped)) as runner:
        runner.run(2)
    lines = piped.getvalue().split("\n")
    assert "\r" not in piped.getvalue() and "\x1b" not in piped.getvalue()
    assert [line.split(":")[0] for line in lines[:2]] == ["pass 0", "pass 1"] and lines[2] == ""
    with pytest.raises(ValueError, match="`backend` must be one of"):
        Progress(backend="rich")


def test_progress_bar_without_a_total_and_its_options():
    out = Terminal()
    with ProgressBar(desc="records", stream=out, backend="plain", refresh=0) as bar:
        bar.update(3)
        assert bar.count == 3
    assert "\rrecords 3  " in out.getvalue() and out.getvalue().endswith("\r\x1b[K")
    assert is_terminal(out) and not is_terminal(io.StringIO())
    with pytest.raises(ValueError, match="`total` must be a positive int, got -1"):
        ProgressBar(total=-1)
    with pytest.raises(ValueError, match="`refresh` must be a non-negative number, got -1"):
        ProgressBar(refresh=-1)
    with pytest.raises(ValueError, match="`width` must be a positive int, got 0"):
        ProgressBar(width=0)


def test_missing_tensorboard_names_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "tensorboard", None)
    with pytest.raises(ImportError, match=r"pip install 'feedline\[tensorboard\]'"):
        with _runner(MetricsLogger(tmp_path, tensorboard=True)) as runner:
            runner.run(1)
