"""The job's entrypoint, run here as Ray runs it: ranks, their environment, failures, packs."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections import Counter
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from ncompass.remote import launch
from ncompass.remote.fetch import fetch_job
from ncompass.remote.manifest import NodeManifest, node_folder
from ncompass.remote.rank_traces import merge_ranks
from ncompass.remote.ranks import NodeSpec, rank_environment
from tests.conftest import REPO
from tests.remote.support import FolderDashboard

JOB = "launch-20260101-000000-beef"

REPORT_ENVIRONMENT = """\
import json, os, pathlib, sys
keys = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR",
        "MASTER_PORT", "OMP_NUM_THREADS", "NCOMPASS_PROFILE"]
print(json.dumps({key: os.environ.get(key) for key in keys}), flush=True)
# What a capture_trace call leaves: a file in the run's trace folder.
pathlib.Path(os.environ["NCOMPASS_TRACE_DIR"], "extra.json").write_text(os.environ["RANK"])
sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
"""

# Each rank starts a `spawn` child that calls the marked `stepper.step` three times.
SPAWNING_JOB = """\
import multiprocessing
import stepper

if __name__ == "__main__":
    child = multiprocessing.get_context("spawn").Process(target=stepper.steps, args=(3,))
    child.start()
    child.join()
    stepper.step(0)
"""

STEPPER = """\
def step(i):
    return sum(range(1000 * (i + 1)))


def steps(calls):
    for i in range(calls):
        step(i)
"""

STEPPER_SPEC = """\
version: 1
targets:
  - module: stepper
    functions:
      - qualname: step
        name: step
"""

FAIL_ONE_RANK = """\
import os, sys, time
if os.environ["RANK"] == "1":
    sys.exit(3)
time.sleep(120)  # rank 0 would wait forever for rank 1
"""


def _launch(
    tmp_path: Path,
    script: str,
    *arguments: str,
    gpus: int,
    profiler: str = "none",
    run_options: tuple[str, ...] = (),
    **env: str,
) -> subprocess.CompletedProcess[str]:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    (work / "job.py").write_text(script)
    (work / "stepper.py").write_text(STEPPER)
    (work / "stepper.yaml").write_text(STEPPER_SPEC)
    environment = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "NCOMPASS_REMOTE_LOGS_DIR": str(tmp_path / "logs"),
        **env,
    }
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "ncompass.remote.launch",
            "--job-id",
            JOB,
            "--gpus",
            str(gpus),
            "--gpu-resource",
            "fake_gpu",
            "--trace-name",
            "job",
            "--",
            "--profiler",
            profiler,
            *run_options,
            "job.py",
            *arguments,
        ],
        cwd=work,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _manifest(tmp_path: Path) -> NodeManifest:
    path = tmp_path / "logs" / node_folder(JOB, 0) / "manifest.json"
    return NodeManifest.from_json(path.read_bytes())


def test_two_ranks_get_torchrun_variables_prefixed_output_and_their_own_folders(
    tmp_path: Path,
) -> None:
    done = _launch(tmp_path, REPORT_ENVIRONMENT, gpus=2)
    assert done.returncode == 0, done.stdout + done.stderr
    seen = {}
    for line in done.stdout.splitlines():
        for rank in ("0", "1"):
            if line.startswith(f"[rank {rank}] {{"):
                seen[rank] = json.loads(line.split("] ", 1)[1])
    assert set(seen) == {"0", "1"}
    for rank, env in seen.items():
        assert env["RANK"] == env["LOCAL_RANK"] == rank
        assert env["WORLD_SIZE"] == env["LOCAL_WORLD_SIZE"] == "2"
        assert env["GROUP_RANK"] == "0" and env["MASTER_ADDR"] == "127.0.0.1"
        assert env["OMP_NUM_THREADS"] == "1" and env["NCOMPASS_PROFILE"] == "1"
    assert seen["0"]["MASTER_PORT"] == seen["1"]["MASTER_PORT"]
    assert "ncompass: ranks ended: rank 0: 0, rank 1: 0" in done.stdout
    manifest = _manifest(tmp_path)
    assert sorted(item.path for item in manifest.files) == ["rank0/extra.json", "rank1/extra.json"]
    home = fetch_job(FolderDashboard(tmp_path / "logs"), JOB, tmp_path / "home")
    assert (tmp_path / "home" / "rank1" / "extra.json").read_text() == "1"
    assert home.rank_traces() == []  # --profiler none writes no trace of its own


def test_one_rank_runs_unprefixed_and_its_exit_code_is_the_jobs(tmp_path: Path) -> None:
    done = _launch(tmp_path, REPORT_ENVIRONMENT, "7", gpus=0)
    assert done.returncode == 7
    first = done.stdout.splitlines()[0]
    assert json.loads(first)["WORLD_SIZE"] == "1"
    assert [item.path for item in _manifest(tmp_path).files] == ["extra.json"]


def test_a_failed_rank_stops_the_others_whose_traces_are_still_written(tmp_path: Path) -> None:
    done = _launch(
        tmp_path, FAIL_ONE_RANK, gpus=2, profiler="torch", NCOMPASS_REMOTE_FAILURE_GRACE_S="1"
    )
    assert done.returncode == 3, done.stdout + done.stderr  # the cause, not the stopped rank
    assert "ncompass: rank 1 exited with code 3; the other ranks get 1 s to finish" in done.stdout
    assert "[rank 0] KeyboardInterrupt" in done.stdout
    manifest = _manifest(tmp_path)
    assert {record.rank: record.exit_code for record in manifest.ranks} == {0: 130, 1: 3}
    assert {record.trace for record in manifest.ranks} == {"job-rank0.json", "job-rank1.json"}
    assert {"job-rank0.json", "job-rank1.json"} <= {item.path for item in manifest.files}


def _steps(document: dict[str, Any]) -> Counter[Any]:
    return Counter(
        event["pid"]
        for event in document["traceEvents"]
        if event.get("cat") == "user_annotation" and event.get("name") == "step"
    )


def test_each_rank_follows_its_children_into_the_pack_and_the_merged_timeline(
    tmp_path: Path,
) -> None:
    done = _launch(
        tmp_path, SPAWNING_JOB, gpus=2, profiler="torch", run_options=("--config", "stepper.yaml")
    )
    assert done.returncode == 0, done.stdout + done.stderr
    home = fetch_job(FolderDashboard(tmp_path / "logs"), JOB, tmp_path / "home")
    traces = home.rank_traces()
    assert [rank for rank, _ in traces] == [0, 1]
    for rank, trace in traces:
        document = json.loads(trace.read_text())
        root, child = (process["pid"] for process in document["ncompass_processes"])
        assert _steps(document) == {root: 1, child: 3}
        # each process's own trace comes home too, beside the rank's capture_trace files
        kept = tmp_path / "home" / f"rank{rank}" / f"job-rank{rank}.processes"
        assert sorted(path.name for path in kept.iterdir()) == sorted(
            f"{pid}.json" for pid in (root, child)
        )
    merged = merge_ranks(home)
    assert merged is not None
    document = json.loads(merged.read_text())
    names = {
        event["pid"]: event["args"]["name"]
        for event in document["traceEvents"]
        if event.get("ph") == "M" and event.get("name") == "process_name"
    }
    assert {names[pid]: calls for pid, calls in _steps(document).items()} == {
        "rank 0": 1,
        "rank 0 · SpawnProcess-1": 3,
        "rank 1": 1,
        "rank 1 · SpawnProcess-1": 3,
    }


def test_no_follow_in_the_run_options_profiles_only_the_rank(tmp_path: Path) -> None:
    done = _launch(
        tmp_path,
        SPAWNING_JOB,
        gpus=0,
        profiler="torch",
        run_options=("--no-follow", "--config", "stepper.yaml"),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(item.path for item in _manifest(tmp_path).files) == [
        "job.json",
        "job.ncompass.json",
    ]
    document = json.loads(
        (tmp_path / "logs" / node_folder(JOB, 0) / "run" / "job.json").read_text()
    )
    assert sum(_steps(document).values()) == 1


def test_missing_dependencies_are_named_before_anything_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(launch.REQUIRED_MODULES, "no_such_module_xyz", "no-such-dist")
    output = io.StringIO()
    with redirect_stdout(output):
        code = launch.main(["--job-id", JOB, "--trace-name", "t", "--", "x.py"])
    assert code == launch.DEPENDENCY_EXIT_CODE
    assert "lacks no-such-dist, which `ncompass run` needs" in output.getvalue()
    assert "--requirements" in output.getvalue()


def test_global_ranks_on_a_second_node() -> None:
    spec = NodeSpec(JOB, 1, 2, 4, "t", (), "10.0.0.1", 29500)
    env = rank_environment(spec, 3, {"PATH": "/bin"})
    assert (env["RANK"], env["LOCAL_RANK"], env["WORLD_SIZE"], env["GROUP_RANK"]) == (
        "7",
        "3",
        "8",
        "1",
    )
    assert env["MASTER_ADDR"] == "10.0.0.1" and env["MASTER_PORT"] == "29500"
    assert spec.archive_path("rank7/t-rank7.json") == "t-rank7.json"
    assert spec.archive_path("rank7/t-rank7.ncompass.json") == "t-rank7.ncompass.json"
    assert spec.archive_path("rank7/matmul.json") == "rank7/matmul.json"
