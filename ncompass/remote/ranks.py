"""On the cluster: one node's ranks, each an ``ncompass run`` with a torchrun-style environment.

Every rank gets what ``torchrun`` would give it (``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``,
``LOCAL_WORLD_SIZE``, ``GROUP_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``, ...), so a script that
calls ``torch.distributed.init_process_group()`` works unchanged, and is profiled into its own
trace, ``NAME-rankN.json``. Output lines are prefixed with ``[rank N]``.

When one rank fails, the others get a few seconds to finish on their own (they may not depend
on it), then are interrupted with SIGINT so their profiler still writes their trace, and killed
only if they do not stop. That is torchrun's policy, with the trace saved.

Standard library only.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import IO

from ncompass import environment_variables
from ncompass._net import LOOPBACK
from ncompass.remote.manifest import NodeManifest, RankRecord, node_folder
from ncompass.remote.pack import (
    PackError,
    chunk_bytes_from_env,
    node_logs_dir,
    pack_outputs,
    write_manifest,
)
from ncompass.run_files import GZIP_TRACE_SUFFIX, SIDECAR_SUFFIX, TRACE_SUFFIX

# the rank's entry point (``python -m ncompass`` with its signal handling; see remote/rank.py)
RANK_MODULE = "ncompass._rank_main"
RUN_FOLDER = "run"
FAILURE_GRACE_ENV = environment_variables.NCOMPASS_REMOTE_FAILURE_GRACE_S
DEFAULT_FAILURE_GRACE_S = 5.0
STOP_TIMEOUT_S = 30.0
_POLL_S = 0.05


@dataclass(frozen=True)
class NodeSpec:
    """One node's share of a job.

    Attributes:
        job_id: The job's id.
        node_rank: This node's index (torchrun's ``GROUP_RANK``).
        nodes: Nodes in the job.
        ranks_per_node: Ranks on every node.
        trace_name: The job's trace name; ranks add ``-rankN``.
        run_args: ``ncompass run`` arguments, without ``--output-dir`` and ``--trace-name``.
        master_addr: Where rank 0 listens (``MASTER_ADDR``).
        master_port: Its port (``MASTER_PORT``).
    """

    job_id: str
    node_rank: int
    nodes: int
    ranks_per_node: int
    trace_name: str
    run_args: tuple[str, ...]
    master_addr: str
    master_port: int

    @property
    def world_size(self) -> int:
        """Ranks in all."""
        return self.nodes * self.ranks_per_node

    def global_rank(self, local_rank: int) -> int:
        """The global rank of this node's ``local_rank``."""
        return self.node_rank * self.ranks_per_node + local_rank

    def output_folder(self, rank: int) -> str:
        """Where rank ``rank`` writes, relative to the node's scratch folder."""
        return "" if self.world_size == 1 else f"rank{rank}"

    def rank_trace_name(self, rank: int) -> str:
        """The trace name of rank ``rank``."""
        return self.trace_name if self.world_size == 1 else f"{self.trace_name}-rank{rank}"

    def archive_path(self, relative: str) -> str:
        """Where a file the node wrote goes inside the job's folder.

        Each rank's own trace and its sidecar go to the top (``NAME-rank1.json``); anything
        else a rank wrote (``capture_trace`` files) stays in its ``rankN/`` folder.
        """
        if self.world_size == 1:
            return relative
        folder, _, rest = relative.partition("/")
        if folder.startswith("rank") and rest and "/" not in rest:
            stem = self.rank_trace_name(int(folder[4:]) if folder[4:].isdigit() else -1)
            if rest in (stem + TRACE_SUFFIX, stem + GZIP_TRACE_SUFFIX, stem + SIDECAR_SUFFIX):
                return rest
        return relative


@dataclass
class NodeResult:
    """How one node's ranks ended and what it packed."""

    node_rank: int
    ranks: list[RankRecord]
    first_failure: int | None = None
    manifest: NodeManifest | None = None
    pack_folder: Path | None = None
    errors: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        """The exit code of the rank that failed first (the cause, not the ranks stopped after
        it), else of the lowest failing rank, else 0."""
        records = sorted(self.ranks, key=lambda item: item.rank != self.first_failure)
        for record in records:
            if record.exit_code is None:
                return 1
            if record.exit_code != 0:
                return record.exit_code
        return 0


def failure_grace_s() -> float:
    """Seconds the other ranks get after one fails: ``$NCOMPASS_REMOTE_FAILURE_GRACE_S`` or 5."""
    try:
        return max(0.0, float(os.environ.get(FAILURE_GRACE_ENV, DEFAULT_FAILURE_GRACE_S)))
    except ValueError:
        return DEFAULT_FAILURE_GRACE_S


def rank_environment(spec: NodeSpec, local_rank: int, base: Mapping[str, str]) -> dict[str, str]:
    """The environment of one rank: ``base`` plus torchrun's variables."""
    rank = spec.global_rank(local_rank)
    env = dict(base)
    env.update(
        {
            "RANK": str(rank),
            "LOCAL_RANK": str(local_rank),
            "WORLD_SIZE": str(spec.world_size),
            "LOCAL_WORLD_SIZE": str(spec.ranks_per_node),
            "GROUP_RANK": str(spec.node_rank),
            "NODE_RANK": str(spec.node_rank),
            "ROLE_RANK": str(rank),
            "ROLE_WORLD_SIZE": str(spec.world_size),
            "MASTER_ADDR": spec.master_addr,
            "MASTER_PORT": str(spec.master_port),
            "TORCHELASTIC_RUN_ID": spec.job_id,
        }
    )
    if spec.ranks_per_node > 1:
        # torchrun's default: several ranks with a full thread pool each oversubscribe the CPU.
        env.setdefault("OMP_NUM_THREADS", "1")
    return env


def rank_command(spec: NodeSpec, rank: int, scratch: Path) -> list[str]:
    """The command of one rank: ``ncompass run`` into its own folder and trace name."""
    return [
        sys.executable,
        "-m",
        RANK_MODULE,
        "run",
        "--output-dir",
        str(scratch / spec.output_folder(rank)),
        "--trace-name",
        spec.rank_trace_name(rank),
        *spec.run_args,
    ]


def free_port(host: str = LOOPBACK) -> int:
    """A TCP port free on ``host`` right now (what torchrun does for ``--master-port``)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        port: int = probe.getsockname()[1]
        return port


def run_and_pack(spec: NodeSpec, log: Callable[[str], None]) -> NodeResult:
    """Run this node's ranks, then pack everything they wrote for ``fetch``.

    The ranks write into ``<Ray log folder>/ncompass/<job>/node<N>/run/`` (so the paths they
    print are true on this node), and the pack goes next to it. Without a Ray log folder the
    ranks still run, in a temporary folder, and the result says the traces were not packed.
    """
    pack_folder: Path | None
    try:
        pack_folder = node_logs_dir() / node_folder(spec.job_id, spec.node_rank)
        scratch = pack_folder / RUN_FOLDER
        scratch.mkdir(parents=True, exist_ok=True)
    except (PackError, OSError) as error:
        log(f"ncompass: {error}; this node's traces cannot be fetched")
        pack_folder = None
        scratch = Path(tempfile.mkdtemp(prefix=f"ncompass-{spec.job_id}-node{spec.node_rank}-"))
    exit_codes, first_failure = run_ranks(spec, scratch, log)
    outputs = [
        (path, spec.archive_path(path.relative_to(scratch).as_posix()))
        for path in sorted(scratch.rglob("*"))
        if path.is_file()
    ]
    archived = {archive for _, archive in outputs}
    records = []
    for local_rank, code in enumerate(exit_codes):
        rank = spec.global_rank(local_rank)
        trace = f"{spec.output_folder(rank)}/{spec.rank_trace_name(rank)}.json".lstrip("/")
        trace = spec.archive_path(trace)
        records.append(RankRecord(rank, local_rank, code, trace if trace in archived else None))
    failed = None if first_failure is None else spec.global_rank(first_failure)
    result = NodeResult(spec.node_rank, records, failed)
    if pack_folder is None:
        result.errors.append(f"node {spec.node_rank}: traces not packed (no Ray log folder)")
        shutil.rmtree(scratch, ignore_errors=True)
        return result
    try:
        files = pack_outputs(outputs, pack_folder, chunk_bytes=chunk_bytes_from_env())
        manifest = NodeManifest(
            job_id=spec.job_id,
            node_rank=spec.node_rank,
            hostname=socket.gethostname(),
            trace_name=spec.trace_name,
            world_size=spec.world_size,
            ranks=tuple(records),
            files=files,
            created_unix_s=time.time(),
        )
        write_manifest(manifest, pack_folder)
    except (PackError, OSError) as error:
        result.errors.append(f"node {spec.node_rank}: traces not packed: {error}")
        return result
    result.manifest, result.pack_folder = manifest, pack_folder
    return result


def run_ranks(
    spec: NodeSpec, scratch: Path, log: Callable[[str], None]
) -> tuple[list[int | None], int | None]:
    """Start this node's ranks, forward their output, and wait for all of them.

    Returns:
        Each local rank's exit code (a shell's ``128 + N`` for signal N; None for a rank that
        could not start), and the local rank that failed first (None if none failed).
    """
    prefixed = spec.world_size > 1
    processes: list[subprocess.Popen[bytes] | None] = []
    pumps: list[threading.Thread] = []
    lock = threading.Lock()
    for local_rank in range(spec.ranks_per_node):
        rank = spec.global_rank(local_rank)
        (scratch / spec.output_folder(rank)).mkdir(parents=True, exist_ok=True)
        try:
            process = subprocess.Popen(
                rank_command(spec, rank, scratch),
                env=rank_environment(spec, local_rank, os.environ),
                stdout=subprocess.PIPE if prefixed else None,
                stderr=subprocess.STDOUT if prefixed else None,
            )
        except OSError as error:
            log(f"ncompass: rank {rank} could not start: {error}")
            processes.append(None)
            continue
        processes.append(process)
        if prefixed and process.stdout is not None:
            prefix = f"[rank {rank}] ".encode()
            pump = threading.Thread(
                target=_forward, args=(process.stdout, prefix, lock), daemon=True
            )
            pump.start()
            pumps.append(pump)
    outcome = _supervise(spec, processes, log)
    for pump in pumps:
        pump.join(timeout=5)
    return outcome


def _forward(stream: IO[bytes], prefix: bytes, lock: threading.Lock) -> None:
    target = sys.stdout.buffer
    for line in iter(stream.readline, b""):
        with lock:
            target.write(prefix + line if line.endswith(b"\n") else prefix + line + b"\n")
            target.flush()
    stream.close()


class _StopRequest:
    """Turns SIGTERM (``ray job stop``) into a request to stop the ranks gracefully."""

    def __init__(self) -> None:
        self.requested = False

    def __enter__(self) -> _StopRequest:
        self._previous: object = None
        try:
            self._previous = signal.signal(signal.SIGTERM, self._handle)
        except ValueError:  # not the main thread: Ray's cancel raises KeyboardInterrupt instead
            self._previous = None
        return self

    def __exit__(self, *exc: object) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)  # type: ignore[arg-type]

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.requested = True


def _supervise(
    spec: NodeSpec, processes: list[subprocess.Popen[bytes] | None], log: Callable[[str], None]
) -> tuple[list[int | None], int | None]:
    """Wait for every rank; after a failure (or a stop request) interrupt, then kill, the rest."""
    first_failure: int | None = None
    failed_at: float | None = None
    grace = failure_grace_s()
    interrupted_at: float | None = None
    killed = False
    with _StopRequest() as stop:
        while True:
            try:
                codes = [
                    None if process is None else _shell_code(process.poll())
                    for process in processes
                ]
                running = [
                    process
                    for process, code in zip(processes, codes, strict=True)
                    if process is not None and code is None
                ]
                if first_failure is None:
                    first_failure = _first_failure(processes, codes)
                    if first_failure is not None and running:
                        failed_at = time.monotonic()
                        rank = spec.global_rank(first_failure)
                        how = (
                            "did not start"
                            if processes[first_failure] is None
                            else f"exited with code {codes[first_failure]}"
                        )
                        log(
                            f"ncompass: rank {rank} {how}; the other ranks get "
                            f"{grace:g} s to finish, then are interrupted"
                        )
                if not running:
                    return codes, first_failure
                now = time.monotonic()
                grace_over = failed_at is not None and now - failed_at > grace
                if interrupted_at is None and (grace_over or stop.requested):
                    # SIGINT, not SIGTERM: `ncompass run` writes the trace on KeyboardInterrupt.
                    for process in running:
                        process.send_signal(signal.SIGINT)
                    interrupted_at = now
                stop_overdue = interrupted_at is not None and now - interrupted_at > STOP_TIMEOUT_S
                if stop_overdue and not killed:
                    for process in running:
                        process.kill()
                    killed = True
                time.sleep(_POLL_S)
            except KeyboardInterrupt:  # Ray cancelled this node's task
                stop.requested = True


def _first_failure(
    processes: list[subprocess.Popen[bytes] | None], codes: list[int | None]
) -> int | None:
    """The local rank of a failed (or never started) rank, if any."""
    for local_rank, (process, code) in enumerate(zip(processes, codes, strict=True)):
        if process is None or code not in (None, 0):
            return local_rank
    return None


def _shell_code(code: int | None) -> int | None:
    """Popen's ``-N`` for a process ended by signal N becomes a shell's ``128 + N``."""
    return 128 - code if code is not None and code < 0 else code


__all__ = [
    "FAILURE_GRACE_ENV",
    "LOOPBACK",
    "NodeResult",
    "NodeSpec",
    "failure_grace_s",
    "free_port",
    "rank_command",
    "rank_environment",
    "run_and_pack",
    "run_ranks",
]
