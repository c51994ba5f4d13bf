"""Ray scenarios of tests/test_ray_pack.py, run inside a loopback-only namespace.

``python ray_pack_scenarios.py <workdir> <out.json>`` (started by
:func:`ray_cluster.run_in_namespace` only): starts a head and a second node, packs image
folders and lists with ``backend="ray"`` and with local processes, and writes what the
tests compare as JSON.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
import traceback

import numpy as np

from feedline.image.listfile import write_list
from feedline.image.pack import pack_images
from feedline.image.pack_options import EncodeOptions

HEAD_NODE = ""  # set by main(); pickled into the slow encoder by value


class Writers(logging.Handler):
    """Collects the (pid, node) of every task that reported writing a file."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.seen: list[tuple[str, int, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        _, pid, node = record.args  # type: ignore[misc]
        self.seen.append((str(record.msg).split()[0], pid, node))  # "encoded" or "wrote"


def make_photos(root: str, per_class: int = 8) -> str:
    from PIL import Image

    photos = os.path.join(root, "photos")
    rng = np.random.default_rng(3)
    for label in ("cat", "dog", "emu"):
        os.makedirs(os.path.join(photos, label))
        for j in range(per_class):
            img = rng.integers(0, 255, (20 + j, 30 + 2 * j, 3), dtype=np.uint8)
            Image.fromarray(img).save(os.path.join(photos, label, f"{j}.{'png' if j % 2 else 'jpg'}"))
    return photos


def files_of(folder: str) -> dict[str, bytes]:
    return {name: open(os.path.join(folder, name), "rb").read() for name in sorted(os.listdir(folder))}


def compare(workdir: str, name: str, source: str, **kw) -> dict:
    """Pack ``source`` with local processes and with Ray tasks: the file names, whether
    each file's bytes are equal, and the two results' counts and skipped entries."""
    out: dict = {}
    folders = {}
    for backend in ("process", "ray"):
        folder = os.path.join(workdir, f"{name}-{backend}")
        result = pack_images(source, os.path.join(folder, "train"), backend=backend, num_workers=2,
                             **kw)
        folders[backend] = files_of(folder)
        out[backend] = {"counts": result.counts, "skipped": result.skipped, "count": result.count}
    local, ray = folders["process"], folders["ray"]
    out["names"] = [sorted(local), sorted(ray)]
    out["equal"] = {n: local[n] == ray.get(n) for n in local}
    return out


class SlowOnSecond:
    """The pack's own encoder, slowed down on the second node (so that the node is busy
    when it is killed), noting the node of every call."""

    def __init__(self, encode, log: str, head: str) -> None:
        self.encode, self.log, self.head = encode, log, head

    def __call__(self, item):
        import ray

        node = ray.get_runtime_context().get_node_id()
        with open(self.log, "a") as f:
            f.write(f"{node} {time.time()}\n")
        time.sleep(0.1 if node == self.head else 0.3)
        return self.encode(item)


def slow_pack(photos: str, folder: str, head: str, bar) -> int:
    """Pack ``photos`` into 2 shards in ``folder`` with Ray tasks (the pack's own task
    code, its encoder slowed down off ``head``): the records written."""
    from feedline.formats.sharded import ShardedWriter
    from feedline.image import _pack_ray, pack
    from feedline.image.listfile import list_folder

    items, _ = list_folder(photos)
    config = pack._Config(root=photos, pass_through=False, resize=16, center_crop=False,
                          encoding=".jpg", quality=95, color="rgb", skip_errors=False)
    log = os.path.join(os.environ["FEEDLINE_RAY_PRIVATE"], "calls")
    encode = SlowOnSecond(pack._RecordTask(config, "recordio", False), log, head)
    writer = ShardedWriter(os.path.join(folder, "train"), 2, format="recordio", suffix=".rec")
    return _pack_ray.pack_with_tasks(items, encode, writer, format="recordio", num_workers=2,
                                     on_error="raise", bar=bar)[0]


class Quiet:
    def update(self, done: int, final: bool = False) -> None:
        pass


class Loud:
    def update(self, done: int, final: bool = False) -> None:
        print("item", done, flush=True)


def pack_losing_a_node(workdir: str, photos: str, cluster) -> dict:
    """Pack ``photos`` with Ray tasks and kill the second node while it encodes; compare
    with a local pack."""
    import threading

    os.remove(os.path.join(photos, "broken.jpg"))  # scenario 2's, not in a class folder
    log = os.path.join(os.environ["FEEDLINE_RAY_PRIVATE"], "calls")
    folder = os.path.join(workdir, "killed-ray")
    outcome: dict = {}

    def run() -> None:
        try:
            outcome["written"] = slow_pack(photos, folder, HEAD_NODE, Quiet())
        except Exception:  # noqa: BLE001 - reported to the test
            outcome["error"] = traceback.format_exc()

    import ray

    # a Ray worker up on the second node first: the head (0.3 s a task) cannot pack the
    # 8 tasks alone while the second node starts one
    ray.get(ray.remote(lambda: 0).options(resources={"second": 1}).remote())
    thread = threading.Thread(target=run)
    thread.start()
    killed = False
    deadline = time.time() + 60
    while thread.is_alive() and time.time() < deadline and not killed:
        calls = _calls(log)
        if any(node != HEAD_NODE and time.time() - t < 0.2 for node, t in calls):
            cluster.kill_node()
            killed = True
        time.sleep(0.01)
    thread.join(120)
    local = os.path.join(workdir, "killed-local")
    pack_images(photos, os.path.join(local, "train"), num_shards=2,
                encode=EncodeOptions(resize=16), num_workers=2)
    os.remove(os.path.join(local, "train.lst"))  # pack_with_tasks was given no list to write
    calls = _calls(log)
    mine, theirs = files_of(local), files_of(folder)
    return {"killed": killed, "outcome": outcome, "items": len(list_images(photos)),
            "calls": len(calls), "nodes": len({node for node, _ in calls}),
            "names": [sorted(mine), sorted(theirs)],
            "equal": {n: mine[n] == theirs.get(n) for n in mine}}


def list_images(photos: str) -> list:
    from feedline.image.listfile import list_folder

    return list_folder(photos)[0]


def trainer(photos: str, folder: str) -> None:
    """A slow pack whose cluster is stopped under it: each progress step, then the error
    that ended it and what is left in ``folder``."""
    import ray

    ray.init(address=os.environ["RAY_ADDRESS"], log_to_driver=False)
    t0 = time.monotonic()
    try:
        slow_pack(photos, folder, "", Loud())
        print("done", flush=True)
    except Exception as exc:  # noqa: BLE001 - reported to the scenario
        print("error", type(exc).__name__, round(time.monotonic() - t0, 1), str(exc)[:300],
              flush=True)
    print("left", json.dumps(sorted(os.listdir(folder)) if os.path.isdir(folder) else []),
          flush=True)


def _calls(log: str) -> list[tuple[str, float]]:
    if not os.path.exists(log):
        return []
    with open(log) as f:
        return [(node, float(t)) for node, t in (line.split() for line in f if line.strip())]


def main(workdir: str, out: str) -> None:
    import ray_cluster

    ray_cluster.run_scenarios(out, lambda cluster, results: scenarios(workdir, cluster, results))


def scenarios(workdir: str, cluster, results: dict) -> None:
    import ray

    import ray_cluster

    results["driver_pid"] = os.getpid()
    writers = Writers()
    log = logging.getLogger("feedline.image._pack_ray")
    log.setLevel(logging.DEBUG)
    log.addHandler(writers)
    results["nodes"] = sorted(n["NodeID"] for n in ray.nodes() if n["Alive"])
    photos = make_photos(workdir)

    # 1. a folder tree, 3 RecordIO shards, shuffled and re-encoded
    results["folder"] = compare(workdir, "folder", photos, num_shards=3,
                                encode=EncodeOptions(resize=16),
                                shuffle=True, seed=4)
    results["folder_writers"] = writers.seen
    writers.seen = []

    # 1b. `feedline pack --ray` (a new process, RAY_ADDRESS) writes the same files
    cli = os.path.join(workdir, "cli", "train")
    done = subprocess.run(
        [sys.executable, "-m", "feedline", "pack", photos, cli, "--num-shards", "3",
         "--resize", "16", "--shuffle", "--seed", "4", "--num-workers", "2", "--quiet",
         "--ray"], capture_output=True, text=True, timeout=120)
    local = files_of(os.path.join(workdir, "folder-process"))
    got = files_of(os.path.dirname(cli)) if done.returncode == 0 else {}
    results["cli"] = {"returncode": done.returncode, "stderr": done.stderr[-2000:],
                      "names": [sorted(local), sorted(got)],
                      "equal": {n: local[n] == got.get(n) for n in local}}

    # 2. a .lst with a missing and a broken image, skipped; 2 TFRecord shards
    lst = os.path.join(photos, "in.lst")
    with open(os.path.join(photos, "broken.jpg"), "wb") as f:
        f.write(b"\xff\xd8 not really a jpeg")
    entries = [(i, float(i % 3), f"{'cat dog emu'.split()[i % 3]}/{i // 3}.{'png' if (i // 3) % 2 else 'jpg'}")
               for i in range(24)]
    entries[5] = (5, 2.0, "emu/missing.jpg")
    entries[17] = (17, 2.0, "broken.jpg")
    write_list(lst, entries)
    results["list"] = compare(workdir, "list", lst, num_shards=2, format="tfrecord",
                              on_error="skip", encode=EncodeOptions(encoding=".png"))

    # 3. a failing image under on_error="raise": no manifest, no shard, no temporary
    failed = os.path.join(workdir, "failed")
    try:
        pack_images(lst, os.path.join(failed, "train"), num_shards=2, backend="ray",
                    num_workers=2)
        results["raise"] = {"type": None}
    except Exception as exc:  # noqa: BLE001 - reported to the test
        results["raise"] = {"type": type(exc).__name__, "message": str(exc),
                            "notes": getattr(exc, "__notes__", []),
                            "remote_tb": getattr(exc.__cause__, "tb", "")}
    results["raise"]["left"] = sorted(os.listdir(failed)) if os.path.isdir(failed) else []

    # 4. the second node killed while it encodes: the lost task is rerun, same bytes
    global HEAD_NODE
    HEAD_NODE = ray.get_runtime_context().get_node_id()
    results["node_killed"] = pack_losing_a_node(workdir, photos, cluster)

    # 5. the cluster stopped under a pack: a named error, nothing committed or left
    folder = os.path.join(workdir, "stopped")
    stopped = ray_cluster.stop_under(
        cluster, [sys.executable, __file__, "--trainer", photos, folder], "item")
    left = [line for line in stopped["tail"].splitlines() if line.startswith("left")]
    stopped["left"] = json.loads(left[-1][len("left"):]) if left else None
    results["stopped"] = stopped


if __name__ == "__main__":
    if sys.argv[1] == "--trainer":
        trainer(sys.argv[2], sys.argv[3])
    else:
        t0 = time.monotonic()
        main(sys.argv[1], sys.argv[2])
        print(f"scenarios took {time.monotonic() - t0:.1f} s")
