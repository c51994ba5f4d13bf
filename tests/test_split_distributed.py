"""Two torch.distributed (gloo) processes each read their split; together, everything once."""

from __future__ import annotations

import socket

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank: int, world: int, port: int, queue) -> None:
    from feedline import Dataset, split

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    try:
        ds = Dataset.range(1001).global_shuffle(seed=11)
        # rank and world size come from torch.distributed
        mine = split(ds, policy="drop_remainder").batch(50).to_list()
        gathered = [None] * world
        dist.all_gather_object(gathered, mine)
        if rank == 0:
            queue.put(gathered)
    finally:
        dist.destroy_process_group()


def test_each_rank_reads_its_split_and_the_union_is_everything_once():
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    mp.spawn(_worker, args=(2, free_port(), queue), nprocs=2, join=True)
    gathered = queue.get()
    batches_per_rank = [len(b) for b in gathered]
    assert batches_per_rank[0] == batches_per_rank[1]
    items = [x for rank_batches in gathered for b in rank_batches for x in b]
    assert len(items) == len(set(items)) == 1000  # 1001 items, the odd one dropped
    assert set(items) <= set(range(1001))
