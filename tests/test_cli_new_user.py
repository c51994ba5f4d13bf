"""What a new user meets first (issue 25's defects): wrong files get one answer in every
command, help for every option, readable sizes and bytes, stage tables in pipeline order,
and a progress bar with a total and running means."""

from __future__ import annotations

import io
import json
import os
import re

import numpy as np
import pytest

from feedline import Dataset, example, tfrecord
from feedline.cli import build_parser, main
from feedline.runtime.stats import format_bytes

COMMANDS = ("inspect", "bench", "index")


def _run(capsys, *argv):
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture
def wrong_files(tmp_path):
    text = tmp_path / "notes.tfrecord"
    text.write_text("hello\nworld\n")
    noise = tmp_path / "noise.tfrecord"
    noise.write_bytes(np.random.default_rng(0).integers(0, 256, 1000, dtype=np.uint8).tobytes())
    unknown = tmp_path / "blob.bin"
    unknown.write_bytes(bytes(range(256)) * 3 + b"\x01")
    return {"text": text, "noise": noise, "unknown": unknown}


@pytest.mark.parametrize("kind", ["text", "noise", "unknown"])
def test_a_wrong_file_gets_the_same_exit_status_and_message_in_every_command(
        capsys, wrong_files, kind):
    path = wrong_files[kind]
    messages = set()
    for command in COMMANDS:
        status, out, err = _run(capsys, command, path)
        assert status == 2, (command, kind, err)
        assert err.startswith(f"feedline {command}: error: {path}: ") and err.count("\n") == 1
        assert "damaged" not in err.split(": error: ")[1].split(",")[0]  # a wrong type, not damage
        messages.add(err.split(": error: ", 1)[1])
    assert len(messages) == 1, messages  # one message, whichever command met the file
    message = messages.pop()
    if kind == "text":
        assert "named like a TFRecord file, but its content is text" in message
    else:
        assert "unknown format: the content is none of TFRecord, RecordIO" in message


def test_inspect_reports_the_detected_format_of_a_wrong_file(capsys, wrong_files):
    status, out, _ = _run(capsys, "inspect", "--json", wrong_files["text"])
    [info] = json.loads(out)
    assert status == 2 and info["format"] == "text" and info["status"] == 2
    assert "records" not in info  # nothing read as a TFRecord file


def test_index_calls_another_format_the_wrong_type_not_damaged(capsys, tmp_path):
    table = tmp_path / "table.csv"
    table.write_text("a,b\n1,2\n")
    status, out, err = _run(capsys, "index", table)
    assert status == 2 and out == ""
    assert err == (f"feedline index: error: {table}: a CSV file; feedline index reads only "
                   "TFRecord and RecordIO files\n")
    empty = tmp_path / "empty.tfrecord"
    empty.write_bytes(b"")
    status, _, err = _run(capsys, "index", empty)
    assert status == 2 and "an empty file; there is nothing to index" in err


def test_right_files_still_pass_and_damage_is_still_status_1(capsys, tmp_path):
    good = tmp_path / "good.tfrecord.gz"
    tfrecord.write(good, [b"a", b"bc"], compression="GZIP")
    for command in COMMANDS:
        assert _run(capsys, command, good)[0] == 0, command
    damaged = tmp_path / "damaged.tfrecord"
    tfrecord.write(damaged, [b"abc"] * 3)
    data = bytearray(damaged.read_bytes())
    data[-6] ^= 0xFF  # the last record's payload: its CRC no longer matches
    damaged.write_bytes(bytes(data))
    for command in COMMANDS:
        assert _run(capsys, command, damaged)[0] == 1, command


def test_every_option_of_every_command_has_help():
    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices
    for name, sub in commands.items():
        for action in sub._actions:
            if action.option_strings and action.help != "==SUPPRESS==":
                assert action.help, (name, action.option_strings)
    text = commands["bench"].format_help()
    assert re.search(r"--batch-size N\s+records per batch", text)
    assert re.search(r"--epochs N\s+passes over the files", text)


def test_sizes_are_never_printed_as_zero_megabytes(capsys, tmp_path):
    assert [format_bytes(n) for n in (0, 7, 999, 1000, 70_000, 1_234_567)] == [
        "0 B", "7 B", "999 B", "1.00 kB", "70.0 kB", "1.23 MB"]
    path = tmp_path / "small.tfrecord"
    tfrecord.write(path, [b"x" * 10] * 7)
    status, out, _ = _run(capsys, "bench", path)
    assert status == 0 and out.startswith("7 records, 70 B in ") and "0.0 MB" not in out


def test_inspect_never_cuts_a_bytes_value_inside_an_escape(capsys, tmp_path):
    path = tmp_path / "bytes.tfrecord"
    payloads = [bytes([0xFF]) * 30, bytes(range(200, 256)), bytes([0xAB]) * 100]
    tfrecord.write(path, [example.encode_example({"b": [p]}) for p in payloads])
    status, out, _ = _run(capsys, "inspect", path)
    assert status == 0
    shown = re.findall(r"bytes\[1\] \[(.*)\]", out)
    assert len(shown) == 3
    for value in shown:
        body = value.split("...")[0]
        assert re.fullmatch(r"b'(\\x[0-9a-f]{2})*'", body), value  # whole escapes only
    assert shown[2].endswith("... (100 bytes)")


def test_stage_table_lists_interleave_inputs_before_the_interleave(tmp_path):
    paths = []
    for i in range(2):
        paths.append(str(tmp_path / f"part-{i}.tfrecord"))
        tfrecord.write(paths[-1], [b"r"] * 3)
    ds = (Dataset.from_iterable(paths)
          .interleave(lambda p: Dataset.from_source(lambda: tfrecord.read(p),
                                                    name=f"read({os.path.basename(p)})"),
                      cycle_length=2)
          .batch(2))
    it = ds.iterator(stats=True)
    assert sum(len(b) for b in it) == 6
    report = it.stats()
    names = [s.name.split("(")[0] for s in report.stages]
    assert names[1:] == ["read", "read", "interleave", "batch"]
    assert [s.position for s in report.stages] == [0, 1, 2, 3, 4]
    table = str(report).splitlines()
    assert table[2].split()[0] == "0" and table[6].split()[:2] == ["4", "batch(2)"]


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_bar_shows_running_means_and_a_first_pass_total():
    import torch

    from feedline import data_type
    from feedline.train import SGD, Runner, network
    from feedline.train.items import (
        Counter,
        CreateModel,
        DataProvider,
        LocalUpdater,
        Progress,
        TrainOps,
    )

    x = np.eye(4, dtype=np.float32)[[0, 1, 2, 3] * 4]
    y = np.array([0, 1, 0, 1] * 4)
    net = network(inputs={"x": data_type.dense_vector(4), "label": data_type.integer_value(2)},
                  learning_rate=0.5, learning_method=SGD(), batch_size=4)(torch.nn.Linear(4, 2))
    stream = Dataset.from_iterable(list(zip(x, y)))  # a stream: no length before a pass ends
    out = _Terminal()
    progress = Progress(stream=out, backend="plain", refresh=0, width=4, total=4)
    with Runner([CreateModel(net, seed=0), LocalUpdater(), Counter(), DataProvider(stream),
                 progress, TrainOps()]) as runner:
        runner.run(1)
    frames = [f for f in out.getvalue().split("\r") if f.startswith("pass 0 [")]
    assert [f.split("  ")[0] for f in frames] == [
        "pass 0 [#...] 1/4", "pass 0 [##..] 2/4", "pass 0 [###.] 3/4", "pass 0 [####] 4/4"]
    # the last frame shows the pass's running mean cost, which is the pass cost printed after it
    last_cost = float(re.search(r"cost (\d\.\d{4})", frames[-1]).group(1))
    assert last_cost == pytest.approx(progress.passes[0]["cost"], abs=1e-4)
    first_cost = float(re.search(r"cost (\d\.\d{4})", frames[0]).group(1))
    assert first_cost != last_cost  # a running mean moves; it is not one batch's value


def test_progress_bar_running_means_are_weighted():
    from feedline._internal.progress import ProgressBar

    bar = ProgressBar(total=3, stream=io.StringIO())
    bar.update(means={"cost": 2.0, "accuracy": 0.5}, weight=30)
    bar.update(means={"cost": 1.0, "accuracy": 1.0}, weight=10)
    assert bar.means() == {"cost": 1.75, "accuracy": 0.625}
    assert bar.postfix() == "cost 1.7500  accuracy 0.6250"
    with pytest.raises(ValueError, match="`total` must be a positive int, got 0"):
        from feedline.train.items import Progress

        Progress(total=0)


def test_pack_refuses_a_file_that_is_no_list_as_the_wrong_input(capsys, tmp_path, wrong_files):
    status, out, err = _run(capsys, "pack", tmp_path / "absent", tmp_path / "out")
    assert status == 2 and err == f"feedline pack: error: {tmp_path / 'absent'}: no such file or directory\n"
    table = tmp_path / "table.csv"
    table.write_text("a,b\n1,2\n")
    for source, content in ((table, "CSV"), (wrong_files["text"], "text")):
        status, out, err = _run(capsys, "pack", source, tmp_path / "out")
        assert status == 2 and out == ""
        assert f"{source}: not an im2rec .lst list" in err and f"its content is {content}" in err
    assert not list(tmp_path.glob("out*"))  # nothing written


def test_inspect_a_missing_url_is_a_missing_file(capsys):
    pytest.importorskip("fsspec")
    url = "memory://feedline-new-user/absent.tfrecord"
    status, out, err = _run(capsys, "inspect", url)
    assert status == 2 and out == ""  # no "?, ? bytes" summary line
    assert err == f"feedline inspect: error: {url}: no such file\n"
