"""``feedline demo`` end to end, in its quick configuration."""

from __future__ import annotations

import csv
import json
import os

import pytest
import torch

from feedline.cli import main
from feedline.demo.network import digits_network
from feedline.train import load_params


@pytest.mark.slow
def test_demo_quick_run_trains_reports_and_resumes(tmp_path, capsys, leak_check):
    out = tmp_path / "demo"
    assert main(["demo", "--quick", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "data: scikit-learn digits, 1,797 images of 8x8 pixels" in printed
    assert "packed: 4 RecordIO shards (+ .idx) and 2 TFRecord shards" in printed
    assert [line.split(":")[0] for line in printed.splitlines() if line.startswith("pass ")] == \
        ["pass 0", "pass 1", "pass 2", "pass 3"]
    assert "test accuracy" in printed and "samples/s" in printed and "bottleneck: " in printed

    summary = json.loads((out / "summary.json").read_text())
    assert summary["passes"] == 4 and summary["dataset"] == "scikit-learn digits"
    assert summary["test_accuracy"] >= 0.95
    assert summary["train_samples"] + summary["test_samples"] == 1797
    assert summary["train_samples_per_second"] > 0
    stages = [s["name"] for s in summary["pipeline"]["stages"]]
    assert {"shuffle(1024)", "map(decode)", "batch(32)", "prefetch(4)"} <= set(stages)

    data = sorted(n for n in os.listdir(out / "data") if not n.startswith("."))  # manifests
    assert data == [f"test-0000{i}-of-00002.tfrecord" for i in range(2)] + [
        f"train-0000{i}-of-00004.{ext}" for i in range(4) for ext in ("idx", "rec")]
    assert (out / "curves.png").read_bytes()[:4] == b"\x89PNG"
    assert sorted(os.listdir(out / "checkpoints")) == ["checkpoint-p0003-s000000135.flc",
                                                      "checkpoint-p0004-s000000180.flc"]
    with open(out / "logs" / "passes.csv") as f:
        rows = list(csv.DictReader(f))
    assert [r["pass_id"] for r in rows] == ["0", "1", "2", "3"]
    assert float(rows[-1]["test_accuracy"]) == pytest.approx(summary["test_accuracy"])
    model = digits_network(64).create_model()
    load_params(out / "model.flp", model)
    assert model[0].weight.shape == torch.Size([200, 64])
    leak_check.assert_clean()

    # one more pass, from the last checkpoint
    assert main(["demo", "--out", str(out), "--passes", "5", "--resume", "--no-plot"]) == 0
    printed = capsys.readouterr().out
    assert "resuming from checkpoint-p0004-s000000180.flc" in printed
    assert [line.split(":")[0] for line in printed.splitlines() if line.startswith("pass ")] == ["pass 4"]
    assert "after 5 passes" in printed and "(1 pass run now, " in printed
    resumed = json.loads((out / "summary.json").read_text())
    # the summary covers the whole run, not only the pass this process ran
    assert resumed["passes"] == 5 and resumed["passes_this_run"] == 1
    assert resumed["resumed_from"] == "checkpoint-p0004-s000000180.flc"
    assert resumed["test_accuracy"] >= summary["test_accuracy"] - 0.02
    assert resumed["train_cost"] is not None and resumed["train_samples_per_second"] > 0
    # the stage table lists interleave's per-file readers before the interleave (pipeline order)
    stages = [s["name"] for s in resumed["pipeline"]["stages"]]
    assert [n.split("(")[0] for n in stages] == ["global_shuffle"] + ["recordio"] * 4 + [
        "interleave", "shuffle", "map", "batch", "prefetch", "feed"]
    assert [s["position"] for s in resumed["pipeline"]["stages"]] == list(range(len(stages)))
    leak_check.assert_clean()

    # resuming a finished run trains nothing and leaves summary.json alone
    before = (out / "summary.json").read_bytes()
    assert main(["demo", "--out", str(out), "--passes", "5", "--resume", "--no-plot"]) == 0
    printed = capsys.readouterr().out
    assert "has already finished its 5 passes" in printed and "summary.json is unchanged" in printed
    assert (out / "summary.json").read_bytes() == before
    # a run without --resume starts afresh: the old checkpoints and logs are replaced
    assert main(["demo", "--out", str(out), "--passes", "1", "--no-plot", "--num-workers", "0"]) == 0
    capsys.readouterr()
    assert sorted(os.listdir(out / "checkpoints")) == ["checkpoint-p0001-s000000045.flc"]
    with open(out / "logs" / "passes.csv") as f:
        assert [r["pass_id"] for r in csv.DictReader(f)] == ["0"]
    assert json.loads((out / "summary.json").read_text())["passes"] == 1
    leak_check.assert_clean()


def test_demo_rejects_bad_options(tmp_path, capsys):
    assert main(["demo", "--passes", "0", "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err == "feedline demo: error: --passes must be a positive int, got 0\n"
    assert main(["demo", "--num-workers", "-1", "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err == "feedline demo: error: --num-workers must be >= 0, got -1\n"


def test_demo_reads_mnist_idx_files(tmp_path, capsys):
    import numpy as np

    from feedline.idx import write_idx

    rng = np.random.default_rng(0)
    mnist = tmp_path / "mnist"
    mnist.mkdir()
    for prefix, n in (("train", 120), ("t10k", 40)):
        labels = rng.integers(0, 10, size=n).astype(np.uint8)
        images = rng.integers(0, 256, size=(n, 28, 28)).astype(np.uint8)
        write_idx(mnist / f"{prefix}-images-idx3-ubyte.gz", images)
        write_idx(mnist / f"{prefix}-labels-idx1-ubyte", labels)
    out = tmp_path / "out"
    assert main(["demo", "--mnist", str(mnist), "--out", str(out), "--passes", "1", "--num-workers", "0",
                 "--no-plot"]) == 0
    printed = capsys.readouterr().out
    assert "data: MNIST, 160 images of 28x28 pixels -> 120 for training, 40 for testing" in printed
    summary = json.loads((out / "summary.json").read_text())
    assert summary["dataset"] == "MNIST" and summary["test_samples"] == 40
    assert not (out / "curves.png").exists()
    with pytest.raises(FileNotFoundError, match="t10k-images-idx3-ubyte"):
        from feedline.demo.data import load_mnist

        (mnist / "t10k-images-idx3-ubyte.gz").unlink()
        load_mnist(mnist)
