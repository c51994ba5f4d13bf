"""Ray scenarios of tests/test_ray_map.py, run inside a loopback-only namespace.

``python ray_scenarios.py <workdir> <out.json>`` (started by
:func:`ray_cluster.run_in_namespace` only): starts a head and a second node, runs every
scenario against them and writes the results as JSON. ``python ray_scenarios.py
--trainer <mode> <args...>`` is a trainer process started by a scenario (a new process
resuming a state, a pipeline whose cluster is stopped under it).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
import sys
import time

import numpy as np

from feedline import Dataset, ExecutionOptions, RayOptions
from feedline.formats.recordio import IndexedRecordIO

N_IMAGES = 48
BATCH = 4


class Records:
    """The JPEG records of one ``.rec``/``.idx`` pair by index (opens lazily, so it
    pickles to the cluster as two paths)."""

    def __init__(self, idx: str, rec: str) -> None:
        self.idx, self.rec = idx, rec
        self._reader: IndexedRecordIO | None = None
        self._len = len(IndexedRecordIO(idx, rec, "r").keys)

    def __getstate__(self) -> dict:
        return {"idx": self.idx, "rec": self.rec, "_len": self._len, "_reader": None}

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, i: int) -> bytes:
        if self._reader is None:
            self._reader = IndexedRecordIO(self.idx, self.rec, "r")
        return self._reader.read_idx(i)


def make_corpus(workdir: str) -> tuple[str, str]:
    import simplejpeg

    idx, rec = os.path.join(workdir, "imgs.idx"), os.path.join(workdir, "imgs.rec")
    rng = np.random.default_rng(0)
    with IndexedRecordIO(idx, rec, "w") as w:
        for i in range(N_IMAGES):
            img = rng.integers(0, 255, (48, 64, 3), dtype=np.uint8)
            w.write_idx(i, simplejpeg.encode_jpeg(img, quality=90))
    return idx, rec


def image_iter_digests(workdir: str, backend: str) -> list[str]:
    """Digests of one epoch of an augmenting ImageRecordIter (decode on ``backend``) over
    IRHeader-packed copies of the corpus's images."""
    import hashlib

    from feedline.formats.recordio import IRHeader, pack
    from feedline.image import ImageRecordIter

    idx, rec = os.path.join(workdir, "labelled.idx"), os.path.join(workdir, "labelled.rec")
    if not os.path.exists(rec):
        source = Records(*CORPUS)
        with IndexedRecordIO(idx, rec, "w") as w:
            for i in range(N_IMAGES):
                w.write_idx(i, pack(IRHeader(0, float(i % 3), i, 0), source[i]))
    with ImageRecordIter(path_imgrec=rec, path_imgidx=idx, data_shape=(3, 32, 32), batch_size=8,
                         rand_crop=True, rand_mirror=True, shuffle=True, seed=1,
                         preprocess_threads=2, backend=backend, dtype="uint8") as it:
        return [hashlib.sha256(np.ascontiguousarray(b.data[0]).tobytes()
                               + np.asarray(b.label[0]).tobytes()).hexdigest() for b in it]


def decode_augment(record: bytes) -> np.ndarray:
    """Decode, then a random 32x32 crop (numpy's global generator) and a random flip
    (Python's ``random``): placement-independent only if every item is seeded alike."""
    import simplejpeg

    img = simplejpeg.decode_jpeg(record)
    y = np.random.randint(0, img.shape[0] - 32)
    x = np.random.randint(0, img.shape[1] - 32)
    crop = img[y:y + 32, x:x + 32]
    if random.random() < 0.5:
        crop = crop[:, ::-1]
    return np.ascontiguousarray(crop)


def slow_decode(record: bytes) -> np.ndarray:
    """decode_augment, slowly, noting which node ran it; ten times slower on the second
    node, so that the node is busy (with tasks to lose) whenever it is killed."""
    import ray

    node = ray.get_runtime_context().get_node_id()
    with open(os.path.join(os.environ["FEEDLINE_RAY_PRIVATE"], "nodes"), "a") as f:
        f.write(f"{node} {time.time()}\n")
    time.sleep(0.03 if node == HEAD_NODE else 0.3)
    return decode_augment(record)


def node_of(item: int) -> str:
    """The id of the node that maps ``item`` (after 2 ms of work)."""
    import ray

    time.sleep(0.002)
    return ray.get_runtime_context().get_node_id()


def fail_at_seven(record: bytes) -> np.ndarray:
    """Raises for the record at output position 7 (logging each call to count retries)."""
    out = decode_augment(record)
    if record == Records(*CORPUS)[CURSED]:
        with open(os.path.join(os.environ["FEEDLINE_RAY_PRIVATE"], "calls7"), "a") as f:
            f.write("x")
        raise ArithmeticError("record 7 is cursed")
    return out


def very_slow(record: bytes) -> np.ndarray:
    time.sleep(1.0)
    return decode_augment(record)


CORPUS: tuple[str, str] = ("", "")
HEAD_NODE = ""  # the head's node id, set by main()
CURSED = Dataset.range(N_IMAGES).global_shuffle(seed=1).to_list()[7]  # record at position 7


def pipeline(backend: str, fn=decode_augment, **kw) -> Dataset:
    src = Dataset.from_random_access(Records(*CORPUS)).global_shuffle(seed=1)
    if backend == "local":
        return src.map(fn).batch(BATCH)
    return src.map(fn, num_workers=2, backend=backend, seed=5, **kw).batch(BATCH)


def decode_digest(record: bytes) -> str:
    import simplejpeg

    return hashlib.sha256(simplejpeg.decode_jpeg(record).tobytes()).hexdigest()[:16]


def ranked(rank: int, world: int) -> Dataset:
    """Rank ``rank`` of ``world``: a shard iterated by a stage before the Ray map, so its
    state is the global position and resumes on another world size."""
    src = Dataset.from_random_access(Records(*CORPUS)).global_shuffle(seed=1)
    return src.shard(rank, world).prefetch(2).map(decode_digest, num_workers=2, backend="ray")


def digest(batch: list) -> str:
    return hashlib.sha256(np.stack(batch).tobytes()).hexdigest()[:16]


def digests(it, limit: int | None = None) -> list[str]:
    out = []
    for batch in it:
        out.append(digest(batch))
        if limit is not None and len(out) >= limit:
            break
    return out


def trainer(argv: list[str]) -> None:
    """Modes: ``resume <state.json>`` prints the remaining digests; ``stopped <timeout>``
    prints each digest as it comes, then the error that ended the iteration."""
    import ray

    ray.init(address=os.environ["RAY_ADDRESS"], log_to_driver=False)
    mode = argv[0]
    global CORPUS
    CORPUS = (argv[-2], argv[-1])
    if mode in ("resume", "resume1"):
        with open(argv[1]) as f:
            state = json.load(f)
        ds = pipeline("ray") if mode == "resume" else ranked(0, 1)
        out = digests(ds.iterator(state)) if mode == "resume" else list(ds.iterator(state))
        print(json.dumps(out), flush=True)
        return
    ds = pipeline("ray", very_slow, execution=ExecutionOptions(timeout=float(argv[1])))
    t0 = time.monotonic()
    try:
        for batch in ds:
            print("batch", digest(batch), flush=True)
            t0 = time.monotonic()
    except Exception as exc:  # noqa: BLE001 - reported to the scenario
        print("error", type(exc).__name__, round(time.monotonic() - t0, 1), str(exc)[:300],
              flush=True)


def main(workdir: str, out: str) -> None:
    from ray_cluster import run_scenarios

    global CORPUS
    CORPUS = make_corpus(workdir)
    run_scenarios(out, lambda cluster, results: _scenarios(workdir, cluster, results))


def _scenarios(workdir: str, cluster, results: dict) -> None:
    import ray

    from ray_cluster import stop_under

    # 1. shuffle -> map -> batch: the same bytes on every backend
    results["local"] = digests(pipeline("local"))
    results["process"] = digests(pipeline("process"))
    ray_ds = pipeline("ray")
    results["ray"] = digests(ray_ds)
    results["ray_epoch2"] = digests(ray_ds)
    results["process_epoch2"] = digests(_two_epochs_second("process"))

    # 1a. a stream input (items travel with the tasks) and an unordered map
    stream = Dataset.from_reader(lambda: iter(range(-20, 20)), deterministic=True)
    results["stream"] = stream.map(abs, num_workers=2, backend="ray").to_list()
    results["unordered"] = sorted(Dataset.range(30).map(
        abs, num_workers=2, backend="ray", ordered=False).to_list())

    # 1d. the tasks of every epoch spread over both nodes, pipeline after pipeline (under
    # Ray's default strategy, a raylet's stale view of the other node once sent every
    # later task of the run to one node)
    spread = []
    for _ in range(3):
        ds = Dataset.range(300).map(node_of, num_workers=2, backend="ray")
        spread.append([len(set(ds.to_list())) for _ in range(4)])
        ds.close()
    results["spread"] = spread

    # 1c. ImageRecordIter's decode stage on the cluster: the batches of processes
    results["image_iter"] = {b: image_iter_digests(workdir, b) for b in ("process", "ray")}

    # 1b. feedline's formats as Ray Data datasources read what feedline and the peers wrote
    results["datasources"] = datasources(workdir)

    # 2. state saved mid-epoch, resumed in a new process
    it = pipeline("ray").iterator()
    results["before_save"] = digests(it, limit=5)
    state_path = os.path.join(workdir, "state.json")
    with open(state_path, "w") as f:
        json.dump(it.get_state(), f)
    it.close()
    results["resumed"] = resume_in_new_process("resume", state_path)

    # 2b. two trainer ranks save mid-epoch; one new process resumes rank 0's state
    results["all_items"] = sorted(decode_digest(Records(*CORPUS)[i]) for i in range(N_IMAGES))
    seen: list = []
    for rank in range(2):
        it = ranked(rank, 2).iterator()
        seen += [next(it) for _ in range(9)]
        if rank == 0:
            with open(state_path, "w") as f:
                json.dump(it.get_state(), f)
        it.close()
    results["ranks_before"] = seen
    results["ranks_resumed"] = resume_in_new_process("resume1", state_path)

    # 2c. pack --ray: the same bytes as a local pack
    results["pack"] = pack_both(workdir)

    # 3. an exception in fn: at its position, not retried
    got: list = []
    try:
        for batch in pipeline("ray", fail_at_seven):
            got.append(digest(batch))
    except ArithmeticError as exc:
        results["error"] = {
            "type": type(exc).__name__, "message": str(exc), "batches_before": len(got),
            "notes": getattr(exc, "__notes__", []),
            "remote_tb": "fail_at_seven" in getattr(exc.__cause__, "tb", ""),
            "calls": len(open(os.path.join(os.environ["FEEDLINE_RAY_PRIVATE"], "calls7")).read()),
        }

    # 4. the second node killed mid-epoch: identical output, nothing lost or repeated
    global HEAD_NODE
    HEAD_NODE = ray.get_runtime_context().get_node_id()
    it = pipeline("ray", slow_decode,
                  execution=ExecutionOptions(ray=RayOptions(max_retries=5))).iterator()
    killed = digests(it, limit=2)
    while len(killed) < N_IMAGES // BATCH and not _second_node_busy():
        killed += digests(it, limit=1)  # kill only while the second node maps an item
    cluster.kill_node()
    killed += digests(it)
    it.close()
    results["node_killed"] = killed
    calls = _node_calls()
    results["node_killed_calls"] = {"nodes": len({n for n, _ in calls}), "calls": len(calls)}

    # 5. the cluster stopped under a running pipeline: a named error within timeout
    results["stopped"] = stop_under(
        cluster, [sys.executable, __file__, "--trainer", "stopped", "4", *CORPUS], "batch")


def _node_calls() -> list[tuple[str, float]]:
    with open(os.path.join(os.environ["FEEDLINE_RAY_PRIVATE"], "nodes")) as f:
        return [(node, float(t)) for node, t in (line.split() for line in f)]


def _second_node_busy(wait: float = 10.0) -> bool:
    """Whether, within ``wait`` seconds, the second node is seen mapping an item (one it
    began less than 0.2 s ago: it takes 0.3 s). The wait covers the start of the Ray
    worker that runs feedline's tasks there (a worker of their own ``runtime_env``); the
    trainer pulls nothing meanwhile, so the head cannot finish the epoch alone."""
    deadline = time.time() + wait
    while time.time() < deadline:
        if any(node != HEAD_NODE and time.time() - t < 0.2 for node, t in _node_calls()):
            return True
        time.sleep(0.01)
    return False


def resume_in_new_process(mode: str, state_path: str) -> list | str:
    """What a new trainer process resuming ``state_path`` yields (its stderr if it failed)."""
    done = subprocess.run([sys.executable, __file__, "--trainer", mode, state_path, *CORPUS],
                          capture_output=True, text=True, timeout=180)
    if done.returncode != 0:
        return done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def pack_both(workdir: str) -> dict:
    """``feedline pack`` of one image folder locally and with ``--ray``: per output file,
    whether the bytes are equal."""
    from PIL import Image

    photos = os.path.join(workdir, "photos")
    rng = np.random.default_rng(3)
    for label in ("cat", "dog"):
        os.makedirs(os.path.join(photos, label))
        for j in range(6):
            Image.fromarray(rng.integers(0, 255, (20 + j, 30, 3), dtype=np.uint8)).save(
                os.path.join(photos, label, f"{j}.png"))
    outs = {}
    for mode in ("local", "ray"):
        out = os.path.join(workdir, f"packed-{mode}", "train")
        cmd = [sys.executable, "-m", "feedline", "pack", photos, out, "--num-shards", "2",
               "--resize", "16", "--shuffle", "--quiet", "--num-workers", "2"]
        done = subprocess.run(cmd + (["--ray"] if mode == "ray" else []), capture_output=True,
                              text=True, timeout=180)
        if done.returncode != 0:
            return {mode: done.stderr[-2000:]}
        outs[mode] = os.path.dirname(out)
    names = sorted(os.listdir(outs["local"]))
    return {name: open(os.path.join(outs["local"], name), "rb").read()
            == open(os.path.join(outs["ray"], name), "rb").read()
            for name in names} | {"names": names == sorted(os.listdir(outs["ray"]))}


def datasources(workdir: str) -> dict:
    """For each datasource: whether the rows Ray Data read equal feedline's own read."""
    import feedline.ray as fr
    from feedline.formats import parquet, recordio, tfrecord, webdataset
    from feedline.formats.example import decode_example

    data = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
    checks: dict = {}
    for name in ("mxnet/raw.rec", "mxnet/images.rec"):
        path = os.path.join(data, name)
        rows = fr.read_recordio(path).take_all()
        checks[name] = [r["record"] for r in rows] == list(recordio.read(path))
    import ray

    ray.data.DataContext.get_current().execution_options.preserve_order = True
    parts = [os.path.join(data, f"mxnet/part-{c}.rec") for c in "abc"]
    rows = fr.read_recordio(parts, parallelism=5).take_all()
    checks["input_split_parts"] = [r["record"] for r in rows] == [
        rec for path in parts for rec in recordio.read(path)]
    images = fr.read_recordio(os.path.join(data, "mxnet/images.rec"), images=True).take_all()
    checks["images"] = [r["image"] for r in images] == [
        recordio.unpack(r)[1] for r in recordio.read(os.path.join(data, "mxnet/images.rec"))]
    for name in ("tensorflow/raw.tfrecord", "tensorflow/raw.gz.tfrecord"):
        path = os.path.join(data, name)
        rows = fr.read_tfrecord(path).take_all()
        checks[name] = [r["record"] for r in rows] == list(tfrecord.read(path))
    path = os.path.join(data, "tensorflow/examples.tfrecord")
    parsed = fr.read_tfrecord(path, parse_examples=True).take_all()
    want = [decode_example(r) for r in tfrecord.read(path)]
    checks["examples"] = len(parsed) == len(want) and all(
        _same(row.get(k), v) for row, ex in zip(parsed, want) for k, v in ex.items())
    tar = os.path.join(workdir, "shard-000000.tar")
    with webdataset.TarWriter(tar) as w:
        for i in range(5):
            w.write({"__key__": f"s{i}", "txt": f"text {i}".encode(), "cls": str(i).encode()})
    rows = sorted(fr.read_webdataset(tar).take_all(), key=lambda r: r["__key__"])
    checks["webdataset"] = [(r["__key__"], r["txt"]) for r in rows] == [
        (f"s{i}", f"text {i}".encode()) for i in range(5)]
    pq = os.path.join(workdir, "t.parquet")
    parquet.write_parquet([{"a": i, "b": f"x{i}"} for i in range(7)], pq)
    rows = fr.read_parquet(pq).take_all()
    checks["parquet"] = [(r["a"], r["b"]) for r in rows] == [(i, f"x{i}") for i in range(7)]
    ds = fr.from_ray(fr.read_recordio(os.path.join(data, "mxnet/raw.rec")))
    it = ds.iterator()
    first = [next(it)["record"] for _ in range(3)]
    state = it.get_state()
    it.close()
    rest = [r["record"] for r in ds.iterator(state)]
    checks["from_ray"] = first + rest == list(recordio.read(os.path.join(data, "mxnet/raw.rec")))
    return checks


def _same(got, want) -> bool:
    if want is None:
        return got is None
    want = want.tolist() if hasattr(want, "tolist") else list(want)
    got = list(got) if got is not None else None
    return got is not None and len(got) == len(want) and all(
        (g == w) or (g != g and w != w) for g, w in zip(got, want))


def _two_epochs_second(backend: str) -> Dataset:
    ds = pipeline(backend)
    for _ in ds:
        pass
    return ds


if __name__ == "__main__":
    if sys.argv[1] == "--trainer":
        trainer(sys.argv[2:])
    else:
        main(sys.argv[1], sys.argv[2])
