"""One rank's process, ``python -m ncompass._rank_main run ...``: `ncompass run` that writes its
trace when Ray stops the job with SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from ncompass.remote.job_plan import JOB_STOP_WAIT_S, RAY_STOP_WAIT_ENV, JobPlan, RankLayout
from ncompass.remote.ranks import RANK_MODULE, STOP_TIMEOUT_S, NodeSpec, rank_command
from tests.conftest import REPO

WAIT_FOR_STOP = """\
import time
print("started", flush=True)
time.sleep(120)
"""


def test_a_rank_is_started_with_the_entry_point_beside_main() -> None:
    spec = NodeSpec("job-1", 0, 1, 1, "job", ("--profiler", "none", "job.py"), "127.0.0.1", 1)
    command = rank_command(spec, 0, Path("/scratch"))
    assert command[1:4] == ["-m", "ncompass._rank_main", "run"]
    assert RANK_MODULE == "ncompass._rank_main"


def _started_rank(tmp_path: Path) -> subprocess.Popen[str]:
    """One rank's process running a script that waits to be stopped."""
    (tmp_path / "job.py").write_text(WAIT_FOR_STOP)
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            RANK_MODULE,
            "run",
            "--output-dir",
            str(tmp_path / "traces"),
            "--trace-name",
            "job-rank0",
            "job.py",
        ],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_sigterm_stops_a_rank_with_its_trace_written(tmp_path: Path) -> None:
    rank = _started_rank(tmp_path)
    try:
        assert rank.stdout is not None
        assert rank.stdout.readline() == "started\n"
        rank.send_signal(signal.SIGTERM)
        out, err = rank.communicate(timeout=120)
    finally:
        if rank.poll() is None:
            rank.kill()
    assert rank.returncode != -signal.SIGTERM, err  # not killed: interrupted
    assert (tmp_path / "traces" / "job-rank0.json").is_file(), out + err


def test_a_rank_stopping_finishes_its_trace_through_further_signals(tmp_path: Path) -> None:
    """``ray job stop`` sends SIGTERM to the launcher and to every rank at once; the launcher
    then interrupts the ranks again with SIGINT. The repeats must not cut the trace short."""
    rank = _started_rank(tmp_path)
    try:
        assert rank.stdout is not None
        assert rank.stdout.readline() == "started\n"
        rank.send_signal(signal.SIGTERM)
        for repeat in (signal.SIGINT, signal.SIGTERM, signal.SIGINT):
            time.sleep(0.05)
            if rank.poll() is not None:
                break
            rank.send_signal(repeat)
        out, err = rank.communicate(timeout=120)
    finally:
        if rank.poll() is None:
            rank.kill()
    assert rank.returncode == 143, out + err  # stopped by the SIGTERM, then wrote everything
    assert (tmp_path / "traces" / "job-rank0.json").stat().st_size > 0, out + err
    sidecar = json.loads((tmp_path / "traces" / "job-rank0.ncompass.json").read_text())
    assert sidecar["exit_code"] == 143


def test_a_stopped_job_gets_time_to_write_and_pack_its_traces() -> None:
    """Ray SIGKILLs a stopping job after the job's ``RAY_JOB_STOP_WAIT_TIME_S`` (3 s unless set):
    the job asks for its ranks' stop timeout plus time to pack, unless the user chose."""
    plan = JobPlan("job-1", RankLayout(1, 1, "GPU"), "job", ("job.py",))
    wait = int(plan.environment()[RAY_STOP_WAIT_ENV])
    assert wait == JOB_STOP_WAIT_S >= STOP_TIMEOUT_S + 60
    chosen = JobPlan(
        "job-1", RankLayout(1, 1, "GPU"), "job", ("job.py",), env={RAY_STOP_WAIT_ENV: "7"}
    )
    assert chosen.environment()[RAY_STOP_WAIT_ENV] == "7"
