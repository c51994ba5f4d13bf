"""Helpers of tests/test_multinode_exactly_once.py: the TFRecord set and the code each gloo
rank runs (importable, so that spawned processes can run it).

A rank of *node* ``n`` reads through that node's cache folder (``cache_dir``), shared by
the node's ranks and their DataLoader workers; the two simulated nodes have different ones.
"""

from __future__ import annotations

import datetime
import json
import os
import time
import traceback

import torch
import torch.distributed as dist

from feedline import tfrecord

#: records in each TFRecord file (different sizes: the parts of the ranks differ)
FILE_SIZES = [4 + (3 * f) % 5 for f in range(16)]
N_RECORDS = sum(FILE_SIZES)
BATCH = 2
#: steps of epoch 1 after which the first job saves its state and is killed
KILL_STEP = 4


def write_set(directory: str) -> list[str]:
    """The local TFRecord files (``part-NN.tfrecord``); record ``i`` is ``b"id=<i>"``
    followed by ``i % 7`` padding bytes."""
    paths, ids = [], iter(range(N_RECORDS))
    for f, size in enumerate(FILE_SIZES):
        path = os.path.join(directory, f"part-{f:02d}.tfrecord")
        with tfrecord.TFRecordWriter(path) as w:
            for _ in range(size):
                i = next(ids)
                w.write(b"id=%d;" % i + b"x" * (i % 7))
        paths.append(path)
    return paths


def record_id(record: bytes) -> int:
    return int(record.split(b";", 1)[0][3:])


def _write_json(path: str, obj: object) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f)
    os.replace(tmp, path)  # the parent never reads half a file


def _epoch(joined) -> list[int]:
    """One joined epoch; the ids of the real (not padded) samples this rank consumed."""
    ids: list[int] = []
    for batch in joined:
        if not joined.padding:
            ids += [int(i) for i in batch]
    return ids


def rank_main(rank: int, world: int, port: int, url: str, options: list[dict], job: str,
              out: str) -> None:
    """One rank of 2 per node. ``job="first"``: epoch 0 whole, then epoch 1 up to
    ``KILL_STEP`` steps, save the loader's state and wait to be killed. ``job="resume"``:
    combine the saved states of every rank of the first job (:func:`job_state`), finish
    its epoch 1, then run epoch 2."""
    import multiprocessing

    from torchdata.stateful_dataloader import StatefulDataLoader

    from feedline.io.records import read_records
    from feedline.pytorch.dataset import job_state
    from feedline.pytorch.rank_join import join

    multiprocessing.set_start_method("fork", force=True)  # as torchrun's ranks do
    node, local = divmod(rank, 2)
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(local), WORLD_SIZE=str(world),
                      LOCAL_WORLD_SIZE="2", NODE_RANK=str(node), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=90))
    try:
        pipeline = read_records(url, format="tfrecord", storage_options=options[node]).map(record_id)
        tds = pipeline.as_torch()
        result: dict = {"rank": rank, "pid": os.getpid()}
        if job == "resume":
            states = [json.load(open(os.path.join(out, f"state-{r}.json")))["state"]
                      for r in range(4)]
            tds.load_state_dict(job_state(states))
        loader = StatefulDataLoader(tds, batch_size=BATCH, num_workers=2)
        joined = join(loader, policy="pad")
        if job == "first":
            result["epoch0"] = _epoch(joined)
            _write_json(os.path.join(out, f"epoch0-{rank}.json"), result)
            ids: list[int] = []
            for step, batch in enumerate(joined, 1):
                if not joined.padding:
                    ids += [int(i) for i in batch]
                if step == KILL_STEP:
                    state = loader.state_dict()  # what this rank consumed, per worker
                    _write_json(os.path.join(out, f"state-{rank}.json"),
                                {"state": state, "consumed": ids})
                    time.sleep(600)  # killed here (SIGKILL) by the test
        else:
            result["epoch1"] = _epoch(joined)
            result["epoch2"] = _epoch(joined)
            _write_json(os.path.join(out, f"resumed-{rank}.json"), result)
    except Exception:
        _write_json(os.path.join(out, f"error-{job}-{rank}.json"), traceback.format_exc())
        raise
    finally:
        dist.destroy_process_group()
