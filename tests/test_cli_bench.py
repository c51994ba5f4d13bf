"""``feedline bench``: counts, JSON output, stats and the bottleneck line."""

from __future__ import annotations

import json

import pytest

from feedline import recordio, tfrecord
from feedline.cli import main


@pytest.fixture
def files(tmp_path):
    tf = tmp_path / "a.tfrecord"
    tfrecord.write(str(tf), [b"t" * 10] * 30)
    rec = tmp_path / "b.rec"
    with recordio.RecordIOWriter(str(rec)) as w:
        for _ in range(20):
            w.write(b"r" * 5)
    return str(tf), str(rec)


def test_bench_counts_records_and_bytes_of_every_file(files, capsys):
    assert main(["bench", "--json", "--batch-size", "7", "--cycle-length", "2",
                 "--parallel-reads", "2", *files]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["records"] == 50 and out["bytes"] == 30 * 10 + 20 * 5
    assert out["stats"]["bottleneck"]
    names = [s["name"] for s in out["stats"]["stages"]]
    assert any(n.startswith("interleave") for n in names) and "batch(7)" in names


def test_bench_text_output_with_shuffle_epochs_and_limit(files, capsys):
    assert main(["bench", "--shuffle", "8", "--epochs", "3", "--limit", "70", files[0]]) == 0
    out = capsys.readouterr().out
    assert out.startswith("70 records, 700 B in ")  # not "0.0 MB"
    assert "bottleneck" in out.lower()


def test_bench_rejects_bad_arguments(files, capsys):
    with pytest.raises(SystemExit):
        main(["bench", "--batch-size", "0", files[0]])
    assert "must be a positive int, got '0'" in capsys.readouterr().err
    assert main(["bench", files[0] + ".missing"]) == 2
    assert capsys.readouterr().err == f"feedline bench: error: {files[0]}.missing: no such file\n"
    assert main(["bench", files[0] + "*.missing"]) == 2
    assert "no file matches" in capsys.readouterr().err
