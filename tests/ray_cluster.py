"""The one helper that runs Ray for the tests: always inside a loopback-only network namespace.

Ray listens on the machine's external interface even when told 127.0.0.1, so nothing of
Ray ever runs in the test process's own network namespace. :func:`run_in_namespace`
starts ``python <script> <args>`` under ``unshare --net`` (a fresh namespace whose only
interface is ``lo``, brought up first) and, when it returns, kills every process left
that names the run's private directory (Ray's head, raylets, workers) — so every Ray
process is stopped before the helper returns, even when the script failed.

Inside the namespace :class:`LocalCluster` starts a head node and a second node (both
on 127.0.0.1, one CPU each), can kill the second node, and stops everything.

:func:`skip_reason` says why Ray tests cannot run here (``ray`` not installed, or
``unshare --net`` not permitted), for ``pytest.skip``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"


def skip_reason() -> str | None:
    """Why the Ray tests cannot run here, or ``None``."""
    try:
        import ray  # noqa: F401
    except ImportError:
        return "ray is not installed: pip install 'feedline[ray]'"
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return "Ray tests need `unshare` and `ip` (util-linux, iproute2) for a loopback-only namespace"
    probe = subprocess.run(["unshare", "--net", "sh", "-c", "ip link set lo up"],
                           capture_output=True, timeout=30)
    if probe.returncode != 0:
        return ("Ray tests start Ray only in a loopback-only network namespace, and "
                f"`unshare --net` is not permitted here: {probe.stderr.decode().strip()}")
    return None


def _env(private: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), str(SRC), env.get("PYTHONPATH")]))
    env["FEEDLINE_RAY_PRIVATE"] = private
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    # notice a killed node within seconds rather than the default tens of seconds
    env.setdefault("RAY_health_check_period_ms", "500")
    env.setdefault("RAY_health_check_failure_threshold", "4")
    env.pop("RAY_ADDRESS", None)
    return env


def _kill_leftovers(private: str, *, only_ray: bool = False) -> list[int]:
    """SIGKILL every process (but this one) whose command line or environment names
    ``private`` — with ``only_ray``, only those whose command is one of Ray's."""
    killed = []
    needle = private.encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read()
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = f.read()
        except OSError:
            continue
        if only_ray and not (b"/site-packages/ray/" in cmd or cmd.startswith(b"ray::")
                             or b"\x00ray." in cmd):  # also `python -m ray.util...`
            continue
        if needle in cmd or needle in env or _holds_file_in(entry, private):
            try:
                os.kill(int(entry), signal.SIGKILL)
                killed.append(int(entry))
            except OSError:
                pass
    return killed


def _holds_file_in(pid: str, private: str) -> bool:
    """Whether process ``pid`` has a file open below ``private`` (Ray's agents rewrite
    their command line and environment, but keep their logs in the run's folder open)."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith(private + os.sep):
                return True
        except OSError:
            continue
    return False


def run_in_namespace(script: str, *args: str, timeout: float) -> dict:
    """Run ``python tests/<script> <args> <out.json>`` in a loopback-only network
    namespace; return what it wrote to ``out.json`` (plus ``"returncode"``, ``"stderr"``).
    Every process it started is gone when this returns."""
    private = tempfile.mkdtemp(prefix="flray")  # short: Ray's socket paths are limited
    out = os.path.join(private, "out.json")
    cmd = ["unshare", "--net", "sh", "-c", 'ip link set lo up && exec "$@"', "sh",
           sys.executable, str(HERE / script), *args, out]
    proc = subprocess.Popen(cmd, env=_env(private), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
    finally:
        for _ in range(3):
            if not _kill_leftovers(private):
                break
            time.sleep(0.2)
        shutil.rmtree(private, ignore_errors=True) if not os.path.exists(out) else None
    result: dict = {}
    if os.path.exists(out):
        with open(out) as f:
            result = json.load(f)
    shutil.rmtree(private, ignore_errors=True)
    result["returncode"] = proc.returncode
    result["stderr"] = output.decode(errors="replace")[-6000:]
    return result


def _descendants(root: int) -> list[int]:
    """The process ids below ``root`` in the process tree (children, their children...)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


class LocalCluster:
    """A head node and a second node on 127.0.0.1 (run inside the namespace only)."""

    def __init__(self, port: int = 6391) -> None:
        private = os.environ.get("FEEDLINE_RAY_PRIVATE")
        if not private:
            raise RuntimeError("LocalCluster runs only under run_in_namespace")
        self.private = private
        self.address = f"127.0.0.1:{port}"
        self.port = port
        self.node: subprocess.Popen | None = None
        self._ray = shutil.which("ray") or os.path.join(os.path.dirname(sys.executable), "ray")

    def start(self) -> None:
        subprocess.run(
            [self._ray, "start", "--head", f"--port={self.port}", "--node-ip-address=127.0.0.1",
             "--num-cpus=1", "--include-dashboard=false", "--disable-usage-stats",
             f"--temp-dir={self.private}/t"],
            check=True, capture_output=True, timeout=120)
        self.start_node()

    def start_node(self) -> None:
        self.node = subprocess.Popen(
            [self._ray, "start", f"--address={self.address}", "--node-ip-address=127.0.0.1",
             "--num-cpus=1", "--resources={\"second\": 1}", "--block", "--disable-usage-stats"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)

    def wait_nodes(self, count: int, timeout: float = 120) -> None:
        import ray

        deadline = time.monotonic() + timeout
        while sum(1 for n in ray.nodes() if n["Alive"]) < count:
            if time.monotonic() > deadline:
                raise RuntimeError(f"fewer than {count} Ray nodes came up")
            time.sleep(0.2)

    def kill_node(self) -> None:
        """SIGKILL the second node and every process it started: its raylet and the Ray
        workers that raylet forked (each in a process group of its own, so the node's
        group alone would leave them running and finishing their tasks)."""
        if self.node is not None:
            doomed = _descendants(self.node.pid)
            try:
                os.killpg(self.node.pid, signal.SIGKILL)
            except OSError:
                pass
            for pid in doomed:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            self.node.wait()
            self.node = None

    def stop(self) -> None:
        """Kill the second node, then every Ray process this run started (by pid: those
        whose environment names the run's folder and whose command is Ray's). Not
        ``ray stop``: it kills Ray processes by name machine-wide, other users' too (the
        namespace separates networks, not processes)."""
        self.kill_node()
        _kill_leftovers(self.private, only_ray=True)


def scenario_report(script: str, tmp_path_factory, *, timeout: float) -> dict:
    """What ``script`` (a scenarios file run by :func:`run_in_namespace`) reported, for a
    module-scoped fixture: skips when Ray cannot run here, fails on a crash."""
    import pytest

    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    workdir = tmp_path_factory.mktemp(Path(script).stem)
    result = run_in_namespace(script, str(workdir), timeout=timeout)
    assert "crash" not in result, result.get("crash") or result["stderr"]
    return result


def run_scenarios(out: str, scenarios) -> None:
    """Inside the namespace: start the 2-node cluster, connect (``RAY_ADDRESS`` set for
    child processes), call ``scenarios(cluster, results)``, note a crash in
    ``results["crash"]``, stop everything and write ``results`` to ``out`` as JSON."""
    import traceback

    import ray

    results: dict = {}
    cluster = LocalCluster()
    try:
        cluster.start()
        os.environ["RAY_ADDRESS"] = cluster.address
        ray.init(address=cluster.address, log_to_driver=False)
        cluster.wait_nodes(2)
        scenarios(cluster, results)
    except Exception:  # noqa: BLE001 - reported to the test
        results["crash"] = traceback.format_exc()
    finally:
        try:
            ray.shutdown()
        finally:
            cluster.stop()
        with open(out, "w") as f:
            json.dump(results, f)


def stop_under(cluster: LocalCluster, cmd: list[str], started: str) -> dict:
    """Start the consumer ``cmd``; once it printed a line starting with ``started``,
    disconnect and stop ``cluster`` under it. Its lines that start with ``started`` or
    ``error`` (``"lines"``) and the end of its output (``"tail"``)."""
    import ray

    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append(line.strip())
        if line.startswith(started):
            break
    ray.shutdown()
    cluster.stop()
    rest, _ = proc.communicate(timeout=120)
    lines += [line for line in rest.splitlines() if line.startswith((started, "error"))]
    return {"lines": lines, "tail": rest[-2000:]}


def cluster_unavailable_line(stopped: dict) -> str:
    """The first ``error`` line a consumer stopped by :func:`stop_under` printed, checked
    to be a ``ClusterUnavailableError`` (``error <type> <seconds> <message>``)."""
    errors = [line for line in stopped["lines"] if line.startswith("error")]
    assert errors, stopped
    assert errors[0].split()[1] == "ClusterUnavailableError", stopped
    return errors[0]
