"""Issue 27: two simulated nodes x 2 gloo ranks x 2 DataLoader workers read a remote
TFRecord set exactly once per epoch; the job is killed mid-epoch and resumed on one node
(world size 4 -> 2), and the epoch is still read exactly once.

The TFRecord files live on a moto S3 server on 127.0.0.1 (behind the recording proxy of
``s3_proxy.py``); each simulated node reads through its own ``cache_dir``, shared by its
two ranks. Every rank runs ``as_torch()`` under a ``StatefulDataLoader(num_workers=2)``
joined with :func:`feedline.pytorch.rank_join.join`. The first job reads epoch 0 whole,
then saves every rank's loader state after ``KILL_STEP`` steps of epoch 1 and is killed
with SIGKILL (ranks and DataLoader workers). The second job, 2 ranks on node 0, combines
the 4 saved states with :func:`feedline.pytorch.dataset.job_state`, finishes epoch 1 and
runs epoch 2. A hang guard kills the ranks.
"""

from __future__ import annotations

import glob
import json
import os
import signal
import time

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchdata.stateful_dataloader", reason="needs torchdata: pip install 'feedline[torch]'")
pytest.importorskip("s3fs", reason="needs s3fs: pip install 'feedline[remote]'")
pytest.importorskip("moto.server", reason="needs moto's server: pip install 'moto[server]'")

import torch.multiprocessing as mp  # noqa: E402

from feedline.pytorch.dataset import job_state  # noqa: E402
from feedline.train.distributed import free_port  # noqa: E402
from multinode_helpers import BATCH, FILE_SIZES, KILL_STEP, N_RECORDS, rank_main, write_set  # noqa: E402
from s3_proxy import s3_stack  # noqa: E402

HANG_GUARD_S = 120  # per job: both within pytest's 300 s timeout


def _descendants(pid: int) -> list[int]:
    """The processes ``pid`` started (DataLoader workers), from /proc."""
    found: list[int] = []
    for children in glob.glob(f"/proc/{pid}/task/*/children"):
        try:
            with open(children) as f:
                kids = [int(k) for k in f.read().split()]
        except OSError:
            continue
        for kid in kids:
            found += [kid, *_descendants(kid)]
    return found


def _start(world, url, options, job, out):
    return mp.start_processes(rank_main, args=(world, free_port(), url, options, job, out),
                              nprocs=world, join=False, start_method="spawn")


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting to be reaped does not)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            status = f.read()
    except OSError:
        return False
    return "\nState:\tZ" not in status


def _kill(ctx) -> list[int]:
    """SIGKILL the ranks of ``ctx`` and every process they started; their pids."""
    pids = []
    for proc in ctx.processes:
        if proc.is_alive():
            pids += [proc.pid, *_descendants(proc.pid)]
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for proc in ctx.processes:
        proc.join(10)
    return pids


def _errors(out) -> str:
    return "\n".join(open(p).read() for p in sorted(glob.glob(os.path.join(out, "error-*.json"))))


def _wait(ctx, out, done) -> None:
    """Until ``done()`` (or the ranks end); fail on a rank's error or the hang guard."""
    deadline = time.monotonic() + HANG_GUARD_S
    while not done():
        if ctx.join(timeout=0.5):
            break
        if _errors(out):
            break
        if time.monotonic() > deadline:
            _kill(ctx)
            pytest.fail(f"the ranks did not get there within {HANG_GUARD_S} s:\n{_errors(out)}")
    assert not _errors(out), _errors(out)


def _once(ids, what):
    missing = sorted(set(range(N_RECORDS)) - set(ids))
    twice = sorted({i for i in ids if ids.count(i) > 1})
    assert not missing and not twice and len(ids) == N_RECORDS, (
        f"{what}: missing {missing}, read more than once {twice}")


@pytest.mark.slow
def test_two_nodes_read_a_remote_tfrecord_set_once_per_epoch_across_a_kill_and_a_new_world_size(tmp_path):
    out = str(tmp_path / "out")
    local = tmp_path / "local"
    os.makedirs(out)
    os.makedirs(local)
    with s3_stack() as stack:
        for path in write_set(str(local)):
            stack.put(f"set/{os.path.basename(path)}", path)
        url = stack.url("set/*.tfrecord")
        options = [stack.options(cache_dir=str(tmp_path / f"node{n}")) for n in range(2)]

        # job 1: 2 nodes x 2 ranks x 2 workers; epoch 0 whole, killed in epoch 1
        first = _start(4, url, options, "first", out)
        try:
            _wait(first, out, lambda: len(glob.glob(os.path.join(out, "state-*.json"))) == 4)
        finally:
            killed = _kill(first)
        assert len(killed) >= 4 * 3, "4 ranks and their 2 DataLoader workers each were killed"
        deadline = time.monotonic() + 10
        while any(_alive(pid) for pid in killed) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(_alive(pid) for pid in killed)
        epoch0 = [json.load(open(os.path.join(out, f"epoch0-{r}.json")))["epoch0"] for r in range(4)]
        saved = [json.load(open(os.path.join(out, f"state-{r}.json"))) for r in range(4)]
        assert all(len(ids) > 0 for ids in epoch0), "every rank reads a part"
        _once([i for ids in epoch0 for i in ids], "epoch 0, 4 ranks")
        # each simulated node fetched through its own cache: both caches hold data
        for n in range(2):
            assert any(not name.startswith(".") for name in os.listdir(tmp_path / f"node{n}"))
        # each byte of every object came from the server at most once per node
        for f, _ in enumerate(FILE_SIZES):
            key = f"set/part-{f:02d}.tfrecord"
            size = stack.fs.size(f"{stack.bucket}/{key}")
            fetched = sum(hi - lo for lo, hi in stack.proxy.fetched(key))
            assert 0 < fetched <= 2 * size, (key, fetched, size)

        job = job_state([s["state"] for s in saved])
        assert job["epoch"] == 1 and job["parts"] == 8  # 4 ranks x 2 workers
        before = [i for s in saved for i in s["consumed"]]
        assert len(before) == 4 * KILL_STEP * BATCH < N_RECORDS, "killed mid-epoch"

        # job 2: 2 ranks on node 0 resume epoch 1 from the 4 saved states, then epoch 2
        second = _start(2, url, options, "resume", out)
        try:
            _wait(second, out, lambda: False)
        finally:
            _kill(second)
        assert [p.exitcode for p in second.processes] == [0, 0]
        resumed = [json.load(open(os.path.join(out, f"resumed-{r}.json"))) for r in range(2)]

    after = [i for r in resumed for i in r["epoch1"]]
    assert after, "the resumed job read the rest of epoch 1"
    _once(before + after, "epoch 1: before the kill (4 ranks) + after the resume (2 ranks)")
    assert all(r["epoch2"] for r in resumed)
    _once([i for r in resumed for i in r["epoch2"]], "epoch 2, 2 ranks")


def test_job_state_refuses_what_cannot_be_exact():
    from feedline import Dataset
    from feedline.exceptions import StateError
    from feedline.pytorch.dataset import TorchIterableDataset

    ds = Dataset.range(12).filter(lambda x: True)
    old = [TorchIterableDataset(ds, rank=r, world_size=2) for r in range(2)]
    its = [iter(t) for t in old]
    for it in its:
        next(it)
    states = [t.state_dict() for t in old]
    with pytest.raises(StateError, match=r"parts \[1\] of 2 are missing"):
        job_state(states[:1])
    with pytest.raises(StateError, match="different epochs"):
        job_state([states[0], {**states[1], "epoch": 1}])
    with pytest.raises(StateError, match="two states of part 0"):
        job_state([states[0], {**states[1], "part": 0}, states[1]])
    with pytest.raises(StateError, match="two states of part 1"):
        job_state([states, states[1]])
    with pytest.raises(StateError, match="no TorchIterableDataset state"):
        job_state([{"unrelated": 1}])
    job = job_state({"rank0": states[0], "rank1": states[1]})  # nested, any container
    assert [u["part"] for u in job["units"]] == [0, 1]
    assert job_state([job, job]) == job  # a job state loaded, not yet iterated, on 2 ranks
    # a pipeline split by rank before as_torch(): its parts are tied to the saved world size
    presplit = TorchIterableDataset(ds.shard(0, 2, policy="none"), rank=0, world_size=2)
    presplit.load_state_dict(job)
    with pytest.raises(StateError, match="already split by rank"):
        iter(presplit)
    # world size 2 -> 3: one saved part each for parts 0 and 1, nothing left for part 2
    new = [TorchIterableDataset(ds, rank=r, world_size=3) for r in range(3)]
    for t in new:
        t.load_state_dict(job)
    assert new[2].state_dict() == job  # before iter(): the whole job
    rest = [[int(x) for x in t] for t in new]
    assert rest == [[2, 4, 6, 8, 10], [3, 5, 7, 9, 11], []]
    empty = new[2].state_dict()  # a part with no saved part to resume: nothing, not its own
    assert empty["units"] == [] and empty["epoch"] == 0
    alone = TorchIterableDataset(ds, rank=2, world_size=3)
    alone.load_state_dict(empty)
    assert list(alone) == []
    # a state taken while a saved part is resumed holds it, and combines again
    again = TorchIterableDataset(ds, rank=0, world_size=1)
    again.load_state_dict(job)
    it = iter(again)
    assert [int(next(it)) for _ in range(6)] == [2, 4, 6, 8, 10, 3]
    mid = again.state_dict()
    assert [u["part"] for u in mid["units"]] == [0, 1]
    last = TorchIterableDataset(ds, rank=1, world_size=2)
    last.load_state_dict(job_state([mid]))
    assert [int(x) for x in last] == [5, 7, 9, 11]  # part 1 of 2 resumes saved part 1 (part 0 has ended)


def test_a_resumed_job_checkpoints_and_resumes_again(tmp_path):
    """4 ranks -> 2 ranks (checkpointed again mid-epoch) -> either the same 2 ranks through
    ``StatefulDataLoader.load_state_dict`` or 1 rank through ``job_state``: exactly once,
    with a buffer shuffle (each saved part keeps its own order)."""
    from torchdata.stateful_dataloader import StatefulDataLoader

    from feedline.io.records import read_records
    from feedline.pytorch.dataset import TorchIterableDataset
    from multinode_helpers import record_id

    write_set(str(tmp_path))

    def loader(rank, world, state=None, job=None):
        pipeline = read_records(str(tmp_path / "*.tfrecord")).map(record_id).shuffle(8, seed=3)
        tds = TorchIterableDataset(pipeline, rank=rank, world_size=world)
        if job is not None:
            tds.load_state_dict(job)
        out = StatefulDataLoader(tds, batch_size=BATCH, num_workers=2)
        if state is not None:
            out.load_state_dict(state)
        return out

    def take(dl, steps):
        it = iter(dl)
        return [int(i) for _ in range(steps) for i in next(it)], dl.state_dict()

    seen, states = [], []
    for r in range(4):
        ids, state = take(loader(r, 4), 2)
        seen += ids
        states.append(state)
    first = job_state(states)
    seen2, states2 = [], []
    for r in range(2):
        ids, state = take(loader(r, 2, job=first), 3)
        seen2 += ids
        states2.append(state)
    same = [int(i) for r in range(2) for b in loader(r, 2, state=states2[r]) for i in b]
    _once(seen + seen2 + same, "4 ranks, 2 ranks, the same 2 ranks restored")
    again = job_state(states2)
    assert again["parts"] == 8  # still the parts of the first job
    one = [int(i) for b in loader(0, 1, job=again) for i in b]
    _once(seen + seen2 + one, "4 ranks, 2 ranks, 1 rank")
