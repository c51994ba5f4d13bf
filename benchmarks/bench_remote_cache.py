"""Remote reading with and without the node-local cache, side by side with MosaicML
Streaming, from one moto S3 server on 127.0.0.1 (its own process), in one run.

The same samples (``--samples`` random byte strings of 1-7 KiB) are written as 8 TFRecord
shards for feedline and converted to MDS (``streaming.MDSWriter``, one ``bytes`` column,
8 shards) for Streaming; both sets are uploaded to the same bucket. Each reader iterates
over every sample once per epoch, in order, in this one process (Streaming in its own
interpreter), touching every byte (``len``):

* feedline, no cache: ``tfrecord.read(url, storage_options=...)`` for each shard of
  ``expand("s3://.../*.tfrecord")`` — each epoch streams from S3;
* feedline, cache: the same with ``cache_dir`` in the options (a fresh directory for
  epoch 1; epoch 2 reads the node-local copies, one HEAD per shard, no data GET);
* Streaming: ``StreamingDataset(remote="s3://.../mds", local=<fresh dir>,
  shuffle=False, batch_size=1)``, epoch 1 downloads into its own cache, epoch 2 reads
  it.

Every variant runs ``--repeat`` times with fresh cache directories, the best of each
epoch kept. Goals (issue 27): feedline's epoch 2 with the cache at least 1.5x
Streaming's epoch 2; its epoch 1 no slower than Streaming's epoch 1.

Streaming lives in its own virtual environment (``--streaming-python``, default
``$FEEDLINE_STREAMING_PYTHON`` or ``/work/peers-streaming/bin/python``), created with
``python3 -m venv`` and ``pip install mosaicml-streaming``. Streaming imports its
torchvision-based vision datasets at import time; where that environment reuses a
CPU-only torch with no matching torchvision wheel, the peer script stands in empty
``torchvision`` modules (StreamingDataset never uses them). Results go to
``benchmarks/results/remote_cache.md``.

    python benchmarks/bench_remote_cache.py                  # full size
    python benchmarks/bench_remote_cache.py --samples 2000   # smoke run
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from feedline import tfrecord  # noqa: E402
from feedline.storage.fs import expand  # noqa: E402

import harness  # noqa: E402

SHARDS = 8

_PEER = r'''
import importlib.abc, importlib.machinery, json, os, shutil, sys, time, types

def _stub_torchvision():
    try:
        import torchvision  # noqa: F401
        return False
    except Exception:
        pass
    for name in [n for n in sys.modules if n == "torchvision" or n.startswith("torchvision.")]:
        del sys.modules[name]

    class Any_:
        def __init__(self, *a, **k): pass

    class Stub(types.ModuleType):
        def __getattr__(self, name):
            if name.startswith("__"):
                raise AttributeError(name)
            return Any_

    class Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        def find_spec(self, name, path=None, target=None):
            if name == "torchvision" or name.startswith("torchvision."):
                return importlib.machinery.ModuleSpec(name, self, is_package=True)
            return None
        def create_module(self, spec):
            m = Stub(spec.name); m.__path__ = []; return m
        def exec_module(self, module): pass

    sys.meta_path.insert(0, Finder())
    return True

mode, remote, local, repeat = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
stubbed = _stub_torchvision()
import streaming
from streaming import MDSWriter, StreamingDataset
from streaming.base.util import clean_stale_shared_memory

if mode == "write":
    import numpy as np
    rng = np.random.default_rng(0)
    n, shard_bytes = int(sys.argv[5]), int(sys.argv[6])
    sizes = rng.integers(1024, 7 * 1024, n)
    with MDSWriter(out=local, columns={"data": "bytes"}, size_limit=shard_bytes) as w:
        for k in sizes:
            w.write({"data": rng.bytes(int(k))})
    print(json.dumps({"version": streaming.__version__}))
    sys.exit(0)

best = [float("inf"), float("inf")]
best_get = float("inf")
count = total = 0
for r in range(repeat):
    clean_stale_shared_memory()
    where = f"{local}-{r}"
    shutil.rmtree(where, ignore_errors=True)
    ds = StreamingDataset(remote=remote, local=where, shuffle=False, batch_size=1)
    for epoch in range(2):
        t = time.perf_counter()
        count = total = 0
        for sample in ds:
            total += len(sample["data"])
            count += 1
        best[epoch] = min(best[epoch], time.perf_counter() - t)
    t = time.perf_counter()
    got = 0
    for i in range(len(ds)):
        got += len(ds[i]["data"])
    assert got == total
    best_get = min(best_get, time.perf_counter() - t)
    del ds
    shutil.rmtree(where, ignore_errors=True)
print(json.dumps({"epoch1": best[0], "epoch2": best[1], "getitem": best_get, "count": count,
                  "bytes": total,
                  "version": streaming.__version__, "stubbed_torchvision": stubbed}))
'''


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def moto_server():
    """A moto S3 server in its own process on 127.0.0.1; yields its endpoint."""
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("moto server did not start") from None
                time.sleep(0.1)
        yield endpoint
    finally:
        proc.terminate()
        proc.wait(30)


def _samples(n: int) -> list[bytes]:
    rng = np.random.default_rng(0)
    return [rng.bytes(int(k)) for k in rng.integers(1024, 7 * 1024, n)]


def _epoch_feedline(pattern: str, so: dict) -> tuple[int, int]:
    count = total = 0
    for url in expand(pattern, storage_options=so):
        with tfrecord.read(url, storage_options=so) as it:
            for rec in it:
                total += len(rec)
                count += 1
    return count, total


def _measure_feedline(pattern: str, options: dict, cached: bool, repeat: int, work: str) -> dict:
    best = [float("inf"), float("inf")]
    count = 0
    for _ in range(repeat):
        cache_dir = os.path.join(work, f"feedline-cache-{uuid.uuid4().hex[:6]}")
        so = {**options, "cache_dir": cache_dir} if cached else dict(options)
        for epoch in range(2):
            t = time.perf_counter()
            count, _ = _epoch_feedline(pattern, so)
            best[epoch] = min(best[epoch], time.perf_counter() - t)
        shutil.rmtree(cache_dir, ignore_errors=True)
    return {"epoch1": best[0], "epoch2": best[1], "count": count}


def _streaming_python(path: str | None) -> str | None:
    python = path or os.environ.get("FEEDLINE_STREAMING_PYTHON") or "/work/peers-streaming/bin/python"
    return python if os.path.exists(python) else None


def _run_streaming(python: str, *args: object, env: dict) -> dict:
    child_env = {**os.environ, **env}
    child_env.pop("PYTHONPATH", None)
    child_env.pop("VIRTUAL_ENV", None)
    done = subprocess.run([python, "-c", _PEER, *map(str, args)], capture_output=True, text=True,
                          env=child_env, timeout=1200, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"streaming peer failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=8000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--streaming-python", default=None)
    args = parser.parse_args()

    import boto3
    import s3fs

    python = _streaming_python(args.streaming_python)
    samples = _samples(args.samples)
    data_bytes = sum(map(len, samples))
    shard_bytes = data_bytes // SHARDS + 1
    keys = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1"}
    os.environ.update(keys)
    with moto_server() as endpoint, tempfile.TemporaryDirectory() as work:
        bucket = "bench-remote-cache"
        boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=bucket)
        fs = s3fs.S3FileSystem(client_kwargs={"endpoint_url": endpoint}, skip_instance_cache=True)
        per = -(-len(samples) // SHARDS)
        for k in range(SHARDS):
            path = os.path.join(work, f"part-{k:02d}.tfrecord")
            tfrecord.write(path, samples[k * per:(k + 1) * per])
            fs.put_file(path, f"{bucket}/tfrecord/part-{k:02d}.tfrecord")
        options = {"client_kwargs": {"endpoint_url": endpoint, "region_name": "us-east-1"}}
        pattern = f"s3://{bucket}/tfrecord/*.tfrecord"

        peer = None
        if python is not None:
            env = {**keys, "S3_ENDPOINT_URL": endpoint}
            mds = os.path.join(work, "mds")
            version = _run_streaming(python, "write", "-", mds, 0, args.samples, shard_bytes, env=env)
            fs.put(mds, f"{bucket}/mds", recursive=True)
            peer = _run_streaming(python, "read", f"s3://{bucket}/mds", os.path.join(work, "streaming"),
                                  args.repeat, env=env)
            assert peer["count"] == len(samples) and peer["bytes"] == data_bytes, peer
            peer["version"] = version["version"]
        plain = _measure_feedline(pattern, options, False, args.repeat, work)
        cached = _measure_feedline(pattern, options, True, args.repeat, work)
        assert plain["count"] == cached["count"] == len(samples)

    def row(name: str, res: dict | None) -> list[str]:
        if res is None:
            return [name, harness.NOT_INSTALLED, "", "", ""]
        e1, e2 = harness.rate(len(samples), res["epoch1"]), harness.rate(len(samples), res["epoch2"])
        return [name, harness.fmt_rate(e1), harness.fmt_rate(e2),
                harness.ratio(e1, peer and harness.rate(len(samples), peer["epoch1"])),
                harness.ratio(e2, peer and harness.rate(len(samples), peer["epoch2"]))]

    name = f"MosaicML Streaming {peer['version']}" if peer else "MosaicML Streaming"
    table = harness.markdown_table(
        ["reader", "epoch 1 samples/s", "epoch 2 samples/s", "epoch 1 vs Streaming",
         "epoch 2 vs Streaming"],
        [row("feedline, no cache (TFRecord, streamed from S3)", plain),
         row("feedline, `cache_dir` (TFRecord, node-local copies)", cached),
         row(f"{name} (MDS, its local cache; `for sample in dataset`)", peer),
         [f"{name}, epoch 2 as `dataset[i]` for i in order (no iterator threads)", "",
          harness.fmt_rate(peer and harness.rate(len(samples), peer["getitem"])), "",
          harness.ratio(peer and harness.rate(len(samples), peer["getitem"]),
                        peer and harness.rate(len(samples), peer["epoch2"]))]])
    mb = data_bytes / 1e6
    note = ""
    if peer and peer.get("stubbed_torchvision"):
        note = (" Streaming's environment reuses a CPU-only torch without torchvision; its script"
                " stands in empty `torchvision` modules (StreamingDataset does not use them).")
    summary = ""
    if peer:
        e1 = peer["epoch1"] / cached["epoch1"]
        e2 = peer["epoch2"] / cached["epoch2"]
        e2_get = peer["getitem"] / cached["epoch2"]
        summary = (f"\nfeedline with the cache vs Streaming: epoch 2 {e2:.2f}x (goal: at least 1.5x; "
                   f"{e2_get:.2f}x even against its `dataset[i]` reads), epoch 1 {e1:.2f}x "
                   f"(goal: at least 1x).\n")
    text = f"""## Remote shards from S3: the node-local cache vs MosaicML Streaming (issue 27)

{len(samples):,} samples (random bytes, 1-7 KiB, {mb:.0f} MB) in {SHARDS} shards on a moto S3 server
on 127.0.0.1 (its own process): TFRecord for feedline, MDS (`MDSWriter`, one `bytes` column) for
Streaming. Every sample is read once per epoch, in order, in one process; epoch 1 starts from an
empty cache directory, epoch 2 reuses it; best of {args.repeat} runs with fresh directories.
Streaming's iterator (`for sample in dataset`, its download and ready threads) is its usual
epoch; its last row reads the same local cache by `dataset[i]`, without those threads, for
reference (the ratio there is to Streaming's iterated epoch 2).
Goals: epoch 2 with the cache at least 1.5x Streaming's epoch 2, epoch 1 no slower than
Streaming's.{note}

{table}
{summary}
Command: `python benchmarks/bench_remote_cache.py`
"""
    print(text)
    harness.write_section("remote_cache", text)


if __name__ == "__main__":
    main()
