"""Issue 27, item 2: the Runner design's RunnerBuilder program with ``device_count=2``
runs as written (the PaddlePaddle Python API design's mnist example of RunnerBuilder;
the network body in torch, ``xrange`` as ``range``, this text format), in one
process call (``with runner:`` starts the two processes) and under ``torchrun --nnodes 2
--nproc-per-node 2`` (two launchers on 127.0.0.1). Its data provider reads one file, so
the ranks split its records. Every run has a hang guard that kills its process group."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

HANG_GUARD_S = 240

PROGRAM = '''
import json
import sys

import torch

from feedline import data_type
from feedline.train import AdamOptimizer, L2Regularization, ModelAverage, RunnerBuilder, network
from feedline.train.builder import summarize


def process(settings, filename):  # mnist_provider.process, for "label;pixels" lines
    with open(filename) as f:
        for line in f:
            label, pixels = line.split(";")
            yield {"pixel": [float(p) for p in pixels.split()], "label": int(label)}


@network(
    inputs={
        'pixel': data_type.dense_vector(784),
        'label': data_type.integer_value(10),
    },
    learning_rate=1e-4,
    learning_method=AdamOptimizer(),
    batch_size=1000,
    model_average=ModelAverage(average_window=0.5),
    regularization=L2Regularization(rate=0.5))
def mnist_network(pixel, label):
    return torch.nn.Sequential(torch.nn.Linear(784, 200), torch.nn.Tanh(),
                               torch.nn.Linear(200, 200), torch.nn.Tanh(),
                               torch.nn.Linear(200, 10))


def main():
    mnist = mnist_network()
    runner = RunnerBuilder(
        network=mnist, device_count=2).with_std_local_trainer(
            method=process,
            file_list=[sys.argv[1]]).with_std_tester(
                method=process,
                file_list=[sys.argv[2]]).build()
    with runner:
        for _ in range(2):
            runner.run_one_pass()
        result = summarize(runner)  # not in the design: what the test checks
    import torch.distributed as dist
    if not dist.is_initialized() or dist.get_rank() == 0:
        with open(sys.argv[3], "w") as f:
            json.dump({"runner": type(runner).__name__, "pass_id": result.pass_id,
                       "samples_seen": result.samples_seen, "test": result.test.samples,
                       "world": dist.get_world_size() if dist.is_initialized() else None}, f)


if __name__ == '__main__':
    main()
'''

N_TRAIN, N_TEST = 20, 8


def _write_mnist_like(path, n, seed):
    rng = np.random.default_rng(seed)
    with open(path, "w") as f:
        for _ in range(n):
            f.write(f"{int(rng.integers(10))};{' '.join(map(str, rng.random(784).round(3)))}\n")


def _program(tmp_path):
    script = tmp_path / "mnist_program.py"
    script.write_text(PROGRAM)
    _write_mnist_like(tmp_path / "train", N_TRAIN, 0)
    _write_mnist_like(tmp_path / "t10k", N_TEST, 1)
    return [str(script), str(tmp_path / "train"), str(tmp_path / "t10k")]


def _env():
    env = {k: v for k, v in os.environ.items() if k not in (
        "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    env.update(OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="lo")
    return env


def run_guarded(commands, cwd):
    """Run the commands at once, each in a session of its own; kill every session (the
    workers a launcher started included) when HANG_GUARD_S seconds have passed."""
    procs = [subprocess.Popen(cmd, cwd=cwd, env=_env(), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, start_new_session=True)
             for cmd in commands]
    try:
        outputs = [p.communicate(timeout=HANG_GUARD_S)[0] for p in procs]
    except subprocess.TimeoutExpired:
        pytest.fail(f"the program did not end within {HANG_GUARD_S} s")
    finally:
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    for p, out in zip(procs, outputs):
        assert p.returncode == 0, out[-4000:]


@pytest.mark.slow
def test_the_design_program_starts_its_two_processes_itself(tmp_path):
    script, train, t10k = _program(tmp_path)
    run_guarded([[sys.executable, script, train, t10k, "out.json"]], tmp_path)
    out = json.loads((tmp_path / "out.json").read_text())
    assert out["runner"] == "DistributedRunner" and out["world"] is None
    assert out["pass_id"] == 2
    # rank 0 trained on its half of the one file's records in each of the 2 passes
    assert out["samples_seen"] == 2 * N_TRAIN // 2
    assert out["test"] == N_TEST  # the test file once over both ranks


@pytest.mark.slow
def test_the_design_program_runs_under_torchrun_on_two_nodes(tmp_path):
    from feedline.train.distributed import free_port

    script, train, t10k = _program(tmp_path)
    port = free_port()
    run_guarded([[sys.executable, "-m", "torch.distributed.run", "--nnodes", "2",
                  "--node-rank", str(node), "--nproc-per-node", "2", "--master-addr",
                  "127.0.0.1", "--master-port", str(port), script, train, t10k, "out.json"]
                 for node in range(2)], tmp_path)
    out = json.loads((tmp_path / "out.json").read_text())
    assert out["runner"] == "Runner" and out["world"] == 4 and out["pass_id"] == 2
    assert out["samples_seen"] == 2 * N_TRAIN // 4
    assert out["test"] == N_TEST


def test_distributed_runner_errors():
    from feedline import Dataset, data_type
    from feedline.train import SGD, RunnerBuilder, network
    from feedline.train.builder import DistributedRunner
    from feedline.train.distributed import RankPool

    net = network(inputs={"x": data_type.dense_vector(2)}, cost=None,
                  learning_method=SGD())(torch.nn.Linear(2, 1))
    builder = RunnerBuilder(net, device_count=2).with_std_local_trainer(Dataset.range(4))
    runner = builder.build()
    assert isinstance(runner, DistributedRunner) and not runner.initialized
    with pytest.raises(RuntimeError, match="the runner is not initialized: use `with runner:`"):
        runner.run_one_pass()
    with pytest.raises(ValueError, match="device_count=2 builds the runner in new processes: "
                                         "`module` and `updater` cannot be passed"):
        builder.build(module=torch.nn.Linear(2, 1))
    # a rank that fails is reported with its traceback, and the processes end
    with pytest.raises(RuntimeError, match=r"a data-parallel process failed: rank 0: "
                                           r"ZeroDivisionError: division by zero"):
        RankPool(_fails, nprocs=1, backend="gloo")


def _fails():
    return 1 / 0
