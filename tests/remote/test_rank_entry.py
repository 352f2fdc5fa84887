"""One rank's process, ``python -m ncompass._rank_main run ...``: `ncompass run` that writes its
trace when Ray stops the job with SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from ncompass.remote.ranks import RANK_MODULE, NodeSpec, rank_command
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


def test_sigterm_stops_a_rank_with_its_trace_written(tmp_path: Path) -> None:
    (tmp_path / "job.py").write_text(WAIT_FOR_STOP)
    rank = subprocess.Popen(
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
