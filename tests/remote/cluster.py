"""A real, lean Ray cluster on 127.0.0.1 for the remote tests, and its clean shutdown.

Every server binds the loopback address (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` makes Ray
keep ``--node-ip-address 127.0.0.1`` instead of swapping in the machine's public IP), usage
statistics are off, the object store is small and the CPUs few. Token authentication is on,
so every request of the tests carries the token the way a real, protected cluster needs.

Shutdown ends exactly the processes this cluster started (everything in the session of its
``ray start`` calls, and their descendants), never other Ray processes on the machine, which
``ray stop`` would.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

RAY = Path(sys.executable).with_name("ray")
OBJECT_STORE_BYTES = 80_000_000


class PortTaken(RuntimeError):
    """``ray start`` failed because a port chosen for it was taken meanwhile."""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class LocalRayCluster:
    """One head node on this machine.

    Ray refuses a second node while it binds loopback only, so a multi-node job is tested on
    this one node with the placement strategy relaxed (several node groups may share a node).
    """

    temp_dir: Path = field(
        default_factory=lambda: Path(tempfile.mkdtemp(prefix="ncr-", dir="/tmp"))
    )
    token: str = field(default_factory=lambda: secrets.token_hex(16))
    gcs_port: int = field(default_factory=_free_port)
    dashboard_port: int = field(default_factory=_free_port)
    sessions: list[int] = field(default_factory=list)
    startup_s: float = 0.0

    @property
    def url(self) -> str:
        """The dashboard (Jobs API) address."""
        return f"http://127.0.0.1:{self.dashboard_port}"

    def describe(self) -> dict[str, Any]:
        """What another process needs to use (and stop) this cluster."""
        return {**asdict(self), "temp_dir": str(self.temp_dir)}

    @classmethod
    def attach(cls, described: dict[str, Any]) -> LocalRayCluster:
        """The cluster another process started and described."""
        return cls(**{**described, "temp_dir": Path(described["temp_dir"])})

    def environment(self) -> dict[str, str]:
        """The environment of the cluster's processes (and so of its jobs)."""
        env = dict(os.environ)
        for key in ("RAY_ADDRESS", "NCOMPASS_TRACE_DIR", "NCOMPASS_PROFILE"):
            env.pop(key, None)
        env.update(
            {
                "PATH": f"{RAY.parent}{os.pathsep}{env.get('PATH', '')}",
                "RAY_USAGE_STATS_ENABLED": "0",
                "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
                "RAY_AUTH_MODE": "token",
                "RAY_AUTH_TOKEN": self.token,
            }
        )
        return env

    def start(self, resources: str, num_cpus: int = 2, attempts: int = 3) -> None:
        """Start the head node; raise with Ray's output if it does not come up.

        A port found free can be taken by another process (often one of Ray's own, which
        bind random ports while the head starts) before Ray binds it; such a start is
        cleaned up and tried again on fresh ports.
        """
        started = time.perf_counter()
        for attempt in range(1, attempts + 1):
            try:
                self._ray_start(
                    "--head",
                    f"--port={self.gcs_port}",
                    f"--dashboard-port={self.dashboard_port}",
                    "--dashboard-host=127.0.0.1",
                    "--include-dashboard=true",
                    f"--temp-dir={self.temp_dir}",
                    f"--ray-client-server-port={_free_port()}",
                    resources=resources,
                    num_cpus=num_cpus,
                )
                break
            except PortTaken:
                if attempt == attempts:
                    raise
                self._end_processes()
                self.gcs_port, self.dashboard_port = _free_port(), _free_port()
        self._wait_for_dashboard()
        self.startup_s = time.perf_counter() - started

    def alive_nodes(self) -> int:
        """How many nodes the dashboard reports alive."""
        request = urllib.request.Request(
            f"{self.url}/api/v0/nodes", headers={"Authorization": f"Bearer {self.token}"}
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            rows = json.loads(response.read())["data"]["result"]["result"]
        return sum(1 for row in rows if row["state"] == "ALIVE")

    def stop(self) -> None:
        """End every process this cluster started, then remove its files.

        Raises:
            RuntimeError: some of its processes are still alive afterwards.
        """
        self._end_processes()
        shutil.rmtree(self.temp_dir, ignore_errors=True)
        left = self.leftovers()
        if left:
            raise RuntimeError(f"Ray processes left running after the cluster stopped: {left}")

    def _end_processes(self) -> None:
        ours = self.processes()
        for pid in ours:
            _signal(pid, signal.SIGTERM)
        # The GCS and raylets take their time over SIGTERM; a test cluster keeps nothing.
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and any(_alive(pid) for pid in ours):
            time.sleep(0.2)
        for pid in self.processes() | ours:
            _signal(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(_alive(pid) for pid in ours):
            time.sleep(0.1)

    def leftovers(self) -> set[int]:
        """Processes of this cluster still alive (should be none after ``stop``)."""
        return {pid for pid in self.processes() if _alive(pid)}

    def _ray_start(self, *arguments: str, resources: str, num_cpus: int) -> None:
        command = [
            str(RAY),
            "start",
            *arguments,
            "--node-ip-address=127.0.0.1",
            f"--num-cpus={num_cpus}",
            "--num-gpus=0",
            f"--resources={resources}",
            f"--object-store-memory={OBJECT_STORE_BYTES}",
            "--disable-usage-stats",
            # Ports with fixed defaults would collide between our nodes (and with anyone
            # else's Ray on this machine).
            f"--dashboard-agent-listen-port={_free_port()}",
            f"--dashboard-agent-grpc-port={_free_port()}",
            f"--runtime-env-agent-port={_free_port()}",
            f"--metrics-export-port={_free_port()}",
        ]
        # A session of its own: everything Ray starts from here can be found (and ended) by
        # its session id, and nothing else can.
        process = subprocess.Popen(
            command,
            env=self.environment(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.sessions.append(process.pid)
        output, _ = process.communicate(timeout=180)
        if process.returncode != 0 and ("already in use" in output or "already occupied" in output):
            raise PortTaken(output[-4000:])
        if process.returncode != 0:
            raise RuntimeError(f"ray start failed ({process.returncode}):\n{output[-4000:]}")

    def _wait_for_dashboard(self) -> None:
        deadline = time.monotonic() + 90
        while True:
            try:
                if self.alive_nodes() >= 1:
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the Ray dashboard at {self.url} did not come up in 90 s")
            time.sleep(0.5)

    def processes(self) -> set[int]:
        """Our sessions' processes and all their descendants."""
        table = _process_table()
        ours = {pid for pid, (_, session) in table.items() if session in self.sessions}
        grew = True
        while grew:
            children = {pid for pid, (parent, _) in table.items() if parent in ours} - ours
            grew = bool(children)
            ours |= children
        return ours


def _process_table() -> dict[int, tuple[int, int]]:
    """pid -> (parent pid, session id), from /proc."""
    table: dict[int, tuple[int, int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # Fields after the command name (which may hold spaces) in parentheses.
        fields = stat[stat.rindex(")") + 2 :].split()
        table[int(entry.name)] = (int(fields[1]), int(fields[3]))
    return table


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return state[state.rindex(")") + 2] != "Z"


def _signal(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signum)


@contextlib.contextmanager
def shared_cluster(resources: str, run_folder: Path) -> Iterator[LocalRayCluster]:
    """One cluster for every pytest-xdist worker of a test run, stopped by the last one out.

    pytest-xdist may hand the tests of one module to both workers; without sharing, each would
    start a Ray cluster of its own. Workers of one run share ``PYTEST_XDIST_TESTRUNUID``: the
    first to arrive starts the cluster and records it, later ones attach, and whoever leaves
    last (dead workers are not counted) stops it. Outside xdist it is a plain cluster.

    Args:
        resources: The head node's custom resources (JSON).
        run_folder: A folder all workers of the run share (pytest's base temporary folder's
            parent under xdist), which pytest cleans up with its other old runs.
    """
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if run is None:
        cluster = LocalRayCluster()
        try:
            cluster.start(resources)
            yield cluster
        finally:
            cluster.stop()
        return
    folder = run_folder / f"ncompass-ray-{run}"
    folder.mkdir(exist_ok=True)
    state_path = folder / "cluster.json"
    with _locked(folder / "lock"):
        state = json.loads(state_path.read_text()) if state_path.exists() else None
        if state is None:
            cluster = LocalRayCluster()
            try:
                cluster.start(resources)
            except BaseException:
                cluster.stop()
                raise
            state = {"cluster": cluster.describe(), "users": []}
        else:
            cluster = LocalRayCluster.attach(state["cluster"])
        state["users"].append(os.getpid())
        state_path.write_text(json.dumps(state))
    try:
        yield cluster
    finally:
        with _locked(folder / "lock"):
            state = json.loads(state_path.read_text())
            users = [pid for pid in state["users"] if pid != os.getpid() and _alive(pid)]
            if users:
                state_path.write_text(json.dumps({**state, "users": users}))
            else:
                state_path.unlink()
                cluster.stop()


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
