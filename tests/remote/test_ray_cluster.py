"""Remote runs against a real Ray cluster on 127.0.0.1: submit, follow, fetch, merge, manage.

One cluster serves the whole module (Ray takes seconds to start): a head node with two fake GPUs
(``fake_gpu``), token authentication on, every server on loopback. It is stopped at the end,
also when a test fails, and the module checks that none of its processes is left.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "ray.job_submission",
    reason="Ray is not installed: pip install 'ncompass[remote]' to run the remote tests",
)

from ncompass.remote.address import Cluster
from ncompass.remote.dashboard import Dashboard, FileMissingError
from ncompass.remote.errors import RemoteError
from ncompass.remote.fetch import ChunkProgress, fetch_job
from tests.conftest import REPO
from tests.remote.cluster import LocalRayCluster, shared_cluster

pytestmark = pytest.mark.xdist_group("ray_cluster")

ATTN_MARKERS = {"attn.qkv_proj", "attn.out_proj", "attn.split_heads", "attn.core", "decode"}
SMALL_MODEL = ["--layers", "1", "--dim", "32", "--prompt", "8", "--new-tokens", "2"]

CAPTURE_JOB = """\
import os
import torch
from ncompass import capture_trace

@capture_trace(trace_name="matmul")
def matmul(a, b):
    return a @ b

matmul(torch.ones(32, 32), torch.ones(32, 32))
print(f"rank {os.environ['RANK']} of {os.environ['WORLD_SIZE']} on job "
      f"{os.environ['NCOMPASS_JOB_ID']} (remote={os.environ['NCOMPASS_REMOTE']})")
"""

FAILING_JOB = """\
import sys
print("loading the checkpoint", flush=True)
print("checkpoint.pt: no such file", file=sys.stderr, flush=True)
sys.exit(3)
"""

SLEEPING_JOB = """\
import time
print("warmed up", flush=True)
time.sleep(300)
"""

# Each rank starts a `spawn` child that calls the marked `stepper.step` (a module of the upload)
# CHILD_CALLS times, then calls it once itself; with `untouched`, it also starts a Python child
# that cannot import ncompass (a broken `ncompass` package first on its PYTHONPATH).
STEPPER = """\
def step(i):
    return sum(range(1000 * (i + 1)))


def steps(calls):
    for i in range(calls):
        step(i)
"""

SPAWNING_JOB = """\
import multiprocessing
import os
import subprocess
import sys

import stepper

if __name__ == "__main__":
    child = multiprocessing.get_context("spawn").Process(target=stepper.steps, args=(3,))
    child.start()
    child.join()
    stepper.step(0)
    if sys.argv[1:] == ["untouched"]:
        first = os.environ["PYTHONPATH"].split(os.pathsep)[0]
        broken = os.path.abspath("elsewhere")
        subprocess.run(
            [sys.executable, "-c", "print('untouched child ran')"],
            env={**os.environ, "PYTHONPATH": first + os.pathsep + broken},
            check=True,
        )
    print(f"rank {os.environ['RANK']}: child exit code {child.exitcode}", flush=True)
"""
CHILD_CALLS = 3

STEPPER_SPEC = """\
version: 1
targets:
  - module: stepper
    functions:
      - qualname: step
        name: stepper.step
"""


@dataclass
class Submission:
    """One ``ncompass submit`` run."""

    done: subprocess.CompletedProcess[str]
    job_id: str
    output_dir: Path

    @property
    def job_dir(self) -> Path:
        return self.output_dir / self.job_id


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRayCluster]:
    # Stopping checks that none of the cluster's processes is left (it raises otherwise).
    shared = tmp_path_factory.getbasetemp().parent
    with shared_cluster('{"fake_gpu": 2}', shared) as running:
        yield running


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small project to upload: the demo model, its spec, and a few job scripts."""
    root = tmp_path_factory.mktemp("project")
    shutil.copy(REPO / "examples" / "tiny_transformer.py", root / "tiny_transformer.py")
    shutil.copytree(
        REPO / "examples" / "tinyformer",
        root / "tinyformer",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    (root / "configs").mkdir()
    shutil.copy(REPO / "configs" / "attn.yaml", root / "configs" / "attn.yaml")
    (root / "capture_job.py").write_text(CAPTURE_JOB)
    (root / "failing_job.py").write_text(FAILING_JOB)
    (root / "sleeping_job.py").write_text(SLEEPING_JOB)
    (root / "stepper.py").write_text(STEPPER)
    (root / "spawning_job.py").write_text(SPAWNING_JOB)
    (root / "configs" / "stepper.yaml").write_text(STEPPER_SPEC)
    (root / "elsewhere" / "ncompass").mkdir(parents=True)
    (root / "elsewhere" / "ncompass" / "__init__.py").write_text(
        "raise ImportError('another environment')\n"
    )
    return root


def _environment(cluster: LocalRayCluster, home: Path, **extra: str) -> dict[str, str]:
    env = {
        key: value for key, value in os.environ.items() if not key.startswith(("RAY_", "NCOMPASS_"))
    }
    env.update(
        {
            "RAY_ADDRESS": cluster.url,
            "NCOMPASS_REMOTE_TOKEN": cluster.token,
            "NCOMPASS_REMOTE_CONFIG": str(home / "remote.yaml"),
        }
    )
    env.update(extra)
    return env


def _ncompass(
    cluster: LocalRayCluster, cwd: Path, *args: str, stdin: str | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ncompass", *args],
        cwd=cwd,
        env=_environment(cluster, cwd.parent, **env),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _submit(cluster: LocalRayCluster, project: Path, output_dir: Path, *args: str) -> Submission:
    done = _ncompass(
        cluster,
        project,
        "submit",
        "--gpu-resource",
        "fake_gpu",
        "--output-dir",
        str(output_dir),
        *args,
    )
    submitted = [line for line in done.stderr.splitlines() if "submitted job" in line]
    assert submitted, done.stdout + done.stderr
    job_id = submitted[0].split("submitted job ")[1].split()[0]
    return Submission(done, job_id, output_dir)


def _user_annotations(trace: Path) -> set[str]:
    events = json.loads(trace.read_text())["traceEvents"]
    return {event["name"] for event in events if event.get("cat") == "user_annotation"}


def _steps_by_pid(document: dict[str, Any]) -> Counter[Any]:
    return Counter(
        event["pid"]
        for event in document["traceEvents"]
        if event.get("cat") == "user_annotation" and event.get("name") == "stepper.step"
    )


def _process_names(document: dict[str, Any]) -> dict[Any, str]:
    return {
        event["pid"]: event["args"]["name"]
        for event in document["traceEvents"]
        if event.get("ph") == "M" and event.get("name") == "process_name"
    }


@pytest.fixture(scope="module")
def one_rank(
    cluster: LocalRayCluster, project: Path, tmp_path_factory: pytest.TempPathFactory
) -> Submission:
    return _submit(
        cluster,
        project,
        tmp_path_factory.mktemp("one_rank"),
        "--config",
        "configs/attn.yaml",
        # Small chunks: the trace travels in several, which the resume test needs.
        "--env",
        "NCOMPASS_REMOTE_CHUNK_BYTES=2048",
        "tiny_transformer.py",
        *SMALL_MODEL,
    )


@pytest.fixture(scope="module")
def two_ranks(
    cluster: LocalRayCluster, project: Path, tmp_path_factory: pytest.TempPathFactory
) -> Submission:
    return _submit(
        cluster,
        project,
        tmp_path_factory.mktemp("two_ranks"),
        "--gpus",
        "2",
        "--config",
        "configs/attn.yaml",
        "tiny_transformer.py",
        *SMALL_MODEL,
    )


def test_one_rank_streams_its_output_and_its_trace_comes_home(one_rank: Submission) -> None:
    done = one_rank.done
    assert done.returncode == 0, done.stdout + done.stderr
    assert "generated 2 tokens x 2" in done.stdout
    assert f"ncompass: job {one_rank.job_id} succeeded" in done.stderr
    trace = one_rank.job_dir / "tiny_transformer.json"
    assert _user_annotations(trace) >= ATTN_MARKERS
    sidecar = json.loads((one_rank.job_dir / "tiny_transformer.ncompass.json").read_text())
    assert sidecar["exit_code"] == 0 and sidecar["profiler"] == "torch"
    assert f"ncompass: summary of {trace}" in done.stderr
    assert "# Trace summary: tiny_transformer.json" in done.stdout
    assert "`attn.core`" in done.stdout


def test_two_ranks_leave_rank_traces_a_merged_timeline_and_a_breakdown(
    two_ranks: Submission,
) -> None:
    done = two_ranks.done
    assert done.returncode == 0, done.stdout + done.stderr
    assert "[rank 0] generated 2 tokens" in done.stdout
    assert "[rank 1] generated 2 tokens" in done.stdout
    for rank in (0, 1):
        assert _user_annotations(two_ranks.job_dir / f"tiny_transformer-rank{rank}.json") >= (
            ATTN_MARKERS
        )
    merged = two_ranks.job_dir / "tiny_transformer-merged.json"
    document = json.loads(merged.read_text())
    assert [item["rank"] for item in document["mergedRanks"]] == [0, 1]
    process_names = {
        event["args"]["name"]
        for event in document["traceEvents"]
        if event.get("ph") == "M" and event.get("name") == "process_name"
    }
    assert {"rank 0", "rank 1"} <= process_names
    assert "ncompass: per-rank breakdown of 2 ranks" in done.stderr
    # CPU only: the breakdown says so once instead of printing a row of zeros per rank
    assert "no GPU activity (CPU-only trace)" in done.stdout
    # CPU only here: the ranks' CPU time per marker, side by side, one column per rank
    assert "ncompass: no GPU events: CPU time per rank of the longest markers" in done.stderr
    core = next(line for line in done.stdout.splitlines() if line.startswith("attn.core "))
    assert len(core.split()) == 5  # attn.core, then a duration (value, unit) per rank
    assert f"merged timeline of all ranks: {merged}" in done.stderr
    # the job's folder holds the job's files and the merged timeline, nothing else
    assert sorted(path.name for path in two_ranks.job_dir.iterdir()) == [
        "tiny_transformer-merged.json",
        "tiny_transformer-rank0.json",
        "tiny_transformer-rank0.ncompass.json",
        "tiny_transformer-rank1.json",
        "tiny_transformer-rank1.ncompass.json",
    ]


def test_capture_trace_in_a_job_over_two_nodes_comes_back_per_rank(
    cluster: LocalRayCluster, project: Path, tmp_path: Path
) -> None:
    # Two node groups of one GPU each; PACK lets both share this machine's single Ray node.
    run = _submit(
        cluster,
        project,
        tmp_path,
        "--nodes",
        "2",
        "--gpus",
        "1",
        "--env",
        "NCOMPASS_REMOTE_PLACEMENT_STRATEGY=PACK",
        "capture_job.py",
    )
    assert run.done.returncode == 0, run.done.stdout + run.done.stderr
    for rank in (0, 1):
        assert f"rank {rank} of 2 on job {run.job_id} (remote=1)" in run.done.stdout
        assert "matmul" in (run.job_dir / f"rank{rank}" / "matmul.json").read_text()
        assert (run.job_dir / f"capture_job-rank{rank}.json").is_file()
    assert "ncompass: 2 nodes placed; rank 0 at 127.0.0.1:" in run.done.stdout
    assert (run.job_dir / "capture_job-merged.json").is_file()


def test_each_rank_follows_the_processes_it_starts(
    cluster: LocalRayCluster, project: Path, tmp_path: Path
) -> None:
    run = _submit(
        cluster,
        project,
        tmp_path / "submitted",
        "--gpus",
        "2",
        "--config",
        "configs/stepper.yaml",
        "spawning_job.py",
        "untouched",
    )
    done = run.done
    assert done.returncode == 0, done.stdout + done.stderr
    for rank in (0, 1):
        assert f"[rank {rank}] rank {rank}: child exit code 0" in done.stdout
        assert f"[rank {rank}] untouched child ran" in done.stdout
        # the child that cannot import ncompass is named in one line of the job's output
        cannot = [
            line
            for line in done.stdout.splitlines()
            if line.startswith(f"[rank {rank}] ncompass: warning: process ")
            and "cannot import ncompass" in line
        ]
        assert len(cannot) == 1 and "print('untouched child ran')" in cannot[0], done.stdout

    fetched = _ncompass(
        cluster, project, "jobs", "fetch", run.job_id, "-o", str(tmp_path / "fetched")
    )
    assert fetched.returncode == 0, fetched.stderr
    for job_dir, said in ((run.job_dir, done), (tmp_path / "fetched" / run.job_id, fetched)):
        for rank in (0, 1):
            document = json.loads((job_dir / f"spawning_job-rank{rank}.json").read_text())
            processes = document["ncompass_processes"]
            assert [process["rank"] for process in processes] == [rank, rank]
            root, child = processes[0]["pid"], processes[1]["pid"]
            # the child's markers are on its own process track, named with the rank
            assert _steps_by_pid(document) == {root: 1, child: CHILD_CALLS}
            names = _process_names(document)
            assert names[root] == f"rank {rank}"
            assert names[child] == f"rank {rank} · SpawnProcess-1"
            kept = job_dir / f"rank{rank}" / f"spawning_job-rank{rank}.processes"
            assert sorted(path.name for path in kept.iterdir()) == sorted(
                f"{pid}.json" for pid in (root, child)
            )
            sidecar = json.loads((job_dir / f"spawning_job-rank{rank}.ncompass.json").read_text())
            assert [process["pid"] for process in sidecar["processes"]] == [root, child]
        # the merged timeline keeps every rank's child on a track of its own
        merged = json.loads((job_dir / "spawning_job-merged.json").read_text())
        steps = _steps_by_pid(merged)
        names = _process_names(merged)
        assert sorted(steps.values()) == [1, 1, CHILD_CALLS, CHILD_CALLS]
        assert sorted(names[pid] for pid in steps) == [
            "rank 0",
            "rank 0 · SpawnProcess-1",
            "rank 1",
            "rank 1 · SpawnProcess-1",
        ]
        # the summary printed after the fetch counts the child's calls
        row = next(
            line for line in said.stdout.splitlines() if line.startswith("| `stepper.step` |")
        )
        assert row.split("|")[2].strip() == str(CHILD_CALLS + 1), said.stdout

    # summarize and breakdown of the fetched traces: every call counted, each rank known
    rank1 = run.job_dir / "spawning_job-rank1.json"
    summary = json.loads(_ncompass(cluster, project, "summarize", "--json", str(rank1)).stdout)
    (marker,) = summary["structured"]["markers"]
    assert (marker["name"], marker["calls"]) == ("stepper.step", CHILD_CALLS + 1)
    paths = [str(run.job_dir / f"spawning_job-rank{rank}.json") for rank in (1, 0)]
    broken_down = _ncompass(cluster, project, "breakdown", "--json", *paths)
    assert broken_down.returncode == 0, broken_down.stderr
    runs = json.loads(broken_down.stdout)["runs"]
    assert sorted(runs) == ["0", "1"]
    for rank, run_of_rank in runs.items():
        assert [p["rank"] for p in run_of_rank["processes"]] == [int(rank), int(rank)]
        assert run_of_rank["processes"][0]["path"].endswith(f"spawning_job-rank{rank}.json")


def test_no_follow_passed_to_submit_profiles_only_each_rank(
    cluster: LocalRayCluster, project: Path, tmp_path: Path
) -> None:
    run = _submit(
        cluster,
        project,
        tmp_path,
        "--gpus",
        "0",
        "--no-follow",
        "--config",
        "configs/stepper.yaml",
        "spawning_job.py",
    )
    assert run.done.returncode == 0, run.done.stdout + run.done.stderr
    assert "rank 0: child exit code 0" in run.done.stdout
    document = json.loads((run.job_dir / "spawning_job.json").read_text())
    assert "ncompass_processes" not in document
    assert sum(_steps_by_pid(document).values()) == 1  # the rank's own call only
    assert not (run.job_dir / "spawning_job.processes").exists()


def test_a_failing_job_passes_its_exit_code_and_its_logs_stay_readable(
    cluster: LocalRayCluster, project: Path, tmp_path: Path
) -> None:
    run = _submit(cluster, project, tmp_path, "--gpus", "0", "--profiler", "none", "failing_job.py")
    assert run.done.returncode == 3
    assert "loading the checkpoint" in run.done.stdout
    assert "checkpoint.pt: no such file" in run.done.stdout
    assert (
        f"ncompass: job {run.job_id} failed (exit code 3); its whole output: "
        f"`ncompass jobs logs {run.job_id}`"
    ) in run.done.stderr
    logs = _ncompass(cluster, project, "jobs", "logs", run.job_id)
    assert logs.returncode == 0 and "checkpoint.pt: no such file" in logs.stdout
    followed = _ncompass(cluster, project, "jobs", "logs", run.job_id, "--follow")
    assert followed.returncode == 3  # following a job ends with its exit code
    assert "loading the checkpoint" in followed.stdout


def test_a_cluster_python_that_is_missing_or_lacks_ray_is_explained(
    cluster: LocalRayCluster, project: Path, tmp_path: Path
) -> None:
    # A bare virtualenv: no ncompass dependencies and no Ray, as a cluster started outside
    # the user's virtualenv would find.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")], check=True)  # fmt: skip
    settings = tmp_path / "remote.yaml"

    def submit_with(python: str) -> subprocess.CompletedProcess[str]:
        settings.write_text(f"python: {python}\n")
        return _ncompass(
            cluster, project, "submit", "--gpus", "0", "--output-dir", str(tmp_path),
            "failing_job.py", NCOMPASS_REMOTE_CONFIG=str(settings),
        )  # fmt: skip

    missing = submit_with("no-such-python")
    assert missing.returncode == 127, missing.stdout + missing.stderr
    assert "failed before its script ran (exit code 127): the cluster's shell has no " in (
        missing.stderr
    )
    assert "`no-such-python` command to run the job with" in missing.stderr
    assert "outside the virtualenv that has Ray" in missing.stderr
    assert "traces not fetched" not in missing.stderr  # nothing ran: nothing to fetch

    bare = submit_with(str(tmp_path / "bare" / "bin" / "python"))
    assert bare.returncode == 2, bare.stdout + bare.stderr
    assert "lacks libcst, pyyaml, pydantic, click, orjson, rich, packaging" in bare.stdout
    assert "cannot import Ray either, so it is not the Python the cluster runs on" in bare.stdout
    assert "loading the checkpoint" not in bare.stdout  # the script never ran
    ray_runs_on = bare.stdout.split("(Ray runs on ")[1].split(")")[0]
    assert Path(ray_runs_on).parent == Path(sys.executable).parent
    assert f"Set `python: {ray_runs_on}` in ~/.config/ncompass/remote.yaml" in bare.stdout


def test_a_job_waiting_for_gpus_says_what_it_waits_for_and_ctrl_c_detaches(
    cluster: LocalRayCluster, project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ncompass.remote import submission
    from ncompass.remote.config import ConfigFile, RemoteConfig

    monkeypatch.setattr(submission, "PENDING_HINT_AFTER_S", 1.0)
    said: list[str] = []

    class Impatient:
        def status(self, message: str) -> None:
            said.append(message)
            if "has waited" in message:
                raise KeyboardInterrupt  # the user gives up waiting

        def output(self, text: str) -> None:
            said.append(text)

        def progress(self, event: ChunkProgress) -> None:
            pass

    options = submission.SubmitOptions(
        script=str(project / "failing_job.py"),
        gpus=3,  # the cluster has 2
        gpu_resource="fake_gpu",
        profiler="none",
        upload_dir=project,
        output_dir=tmp_path,
        address=cluster.url,
    )
    saved = RemoteConfig(address=cluster.url, token=cluster.token)  # a token goes to its address
    settings = ConfigFile(tmp_path / "none.yaml", saved)
    result = submission.submit(options, Impatient(), settings)
    try:
        assert result.exit_code == 130
        hint = next(line for line in said if "has waited" in line)
        assert "it asks for {'entrypoint_resources': {'fake_gpu': 3}}" in hint
        assert "the cluster has CPU 2, fake_gpu 2" in hint
        assert f"detached; job {result.job_id} keeps running" in said[-1]
    finally:
        stopped = _ncompass(cluster, project, "jobs", "stop", result.job_id)
    assert stopped.returncode == 0, stopped.stderr
    assert f"job {result.job_id} has not started; Ray stops it as soon as it does" in (
        stopped.stderr
    )


def test_an_interrupted_fetch_resumes_and_overwrites_nothing(
    cluster: LocalRayCluster, project: Path, one_rank: Submission, tmp_path: Path
) -> None:
    assert one_rank.done.returncode == 0, one_rank.done.stderr
    dashboard = Dashboard(
        Cluster(cluster.url, "tests", {"Authorization": f"Bearer {cluster.token}"})
    )
    fetched: list[ChunkProgress] = []

    def interrupt_after_two(event: ChunkProgress) -> None:
        fetched.append(event)
        if len(fetched) == 2:
            raise KeyboardInterrupt

    job_dir = tmp_path / one_rank.job_id
    with pytest.raises(KeyboardInterrupt):
        fetch_job(dashboard, one_rank.job_id, job_dir, on_chunk=interrupt_after_two)
    resumed = _ncompass(cluster, project, "jobs", "fetch", one_rank.job_id, "-o", str(tmp_path))
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed: 2 chunks were already here" in resumed.stderr
    for name in ("tiny_transformer.json", "tiny_transformer.ncompass.json"):
        assert (job_dir / name).read_bytes() == (one_rank.job_dir / name).read_bytes()

    trace = job_dir / "tiny_transformer.json"
    untouched = trace.stat().st_mtime_ns
    sidecar = job_dir / "tiny_transformer.ncompass.json"
    sidecar.write_text("{}")  # the user edited a fetched file
    again = _ncompass(cluster, project, "jobs", "fetch", one_rank.job_id, "-o", str(tmp_path))
    assert again.returncode == 0, again.stderr
    assert trace.stat().st_mtime_ns == untouched
    assert sidecar.read_text() == "{}"
    assert f"{sidecar} differs from the job's copy and was kept" in again.stderr
    assert (job_dir / "tiny_transformer-1.ncompass.json").read_bytes() == (
        one_rank.job_dir / "tiny_transformer.ncompass.json"
    ).read_bytes()


def test_jobs_list_shows_the_ncompass_jobs(
    cluster: LocalRayCluster, project: Path, one_rank: Submission
) -> None:
    listed = _ncompass(cluster, project, "jobs", "list")
    assert listed.returncode == 0, listed.stderr
    row = next(line for line in listed.stdout.splitlines() if line.startswith(one_rank.job_id))
    assert row.split()[1:3] == ["SUCCEEDED", "0"]
    rows = json.loads(_ncompass(cluster, project, "jobs", "list", "--json").stdout)
    mine = next(item for item in rows if item["job_id"] == one_rank.job_id)
    assert mine["metadata"]["trace_name"] == "tiny_transformer"
    assert mine["entrypoint"].startswith("python -m ncompass.remote.launch")


def test_a_stopped_job_still_writes_and_returns_its_trace(
    cluster: LocalRayCluster, project: Path, tmp_path: Path
) -> None:
    run = _submit(cluster, project, tmp_path, "--gpus", "1", "--no-wait", "sleeping_job.py")
    assert run.done.returncode == 0, run.done.stderr
    assert run.done.stdout.strip() == run.job_id
    deadline = time.monotonic() + 120
    while "warmed up" not in _ncompass(cluster, project, "jobs", "logs", run.job_id).stdout:
        assert time.monotonic() < deadline, "the job never started"
        time.sleep(0.5)
    early = _ncompass(cluster, project, "jobs", "fetch", run.job_id, "-o", str(tmp_path))
    assert (
        early.returncode == 2 and "is RUNNING: its traces are packed when it ends" in early.stderr
    )
    stopped = _ncompass(cluster, project, "jobs", "stop", run.job_id)
    assert stopped.returncode == 0, stopped.stderr
    assert f"ncompass: job {run.job_id} stopped" in stopped.stderr
    fetched = _ncompass(cluster, project, "jobs", "fetch", run.job_id, "-o", str(tmp_path))
    assert fetched.returncode == 0, fetched.stderr
    sidecar = json.loads((run.job_dir / "sleeping_job.ncompass.json").read_text())
    assert sidecar["exit_code"] != 0  # interrupted, yet the trace was written
    assert (run.job_dir / "sleeping_job.json").stat().st_size > 0


def test_a_placement_the_cluster_cannot_give_fails_with_the_reason(
    cluster: LocalRayCluster, project: Path, tmp_path: Path
) -> None:
    run = _submit(
        cluster,
        project,
        tmp_path,
        "--nodes",
        "3",
        "--env",
        "NCOMPASS_REMOTE_PLACEMENT_TIMEOUT_S=2",
        "capture_job.py",
    )
    assert run.done.returncode == 3, run.done.stdout + run.done.stderr
    assert "cannot place 3 node groups of {'fake_gpu': 1.0} (STRICT_SPREAD)" in run.done.stdout
    assert "fake_gpu 2" in run.done.stdout


def test_a_wrong_token_and_an_unknown_job_are_named(
    cluster: LocalRayCluster, project: Path
) -> None:
    refused = _ncompass(cluster, project, "jobs", "list", NCOMPASS_REMOTE_TOKEN="wrong")
    assert refused.returncode == 2
    assert f"the Ray cluster at {cluster.url} (from RAY_ADDRESS) refused the request" in (
        refused.stderr
    )
    assert "Traceback" not in refused.stderr
    unknown = _ncompass(cluster, project, "jobs", "logs", "no-such-job")
    assert unknown.returncode == 2
    assert f"no job no-such-job on the Ray cluster at {cluster.url}" in unknown.stderr


def test_connect_saves_the_cluster_for_later_commands_owner_only(
    cluster: LocalRayCluster, project: Path, tmp_path: Path
) -> None:
    settings = tmp_path / "config" / "ncompass" / "remote.yaml"
    plain = {
        "NCOMPASS_REMOTE_CONFIG": str(settings),
        "RAY_ADDRESS": "",
        "NCOMPASS_REMOTE_TOKEN": "",
    }
    connected = _ncompass(
        cluster,
        project,
        "jobs",
        "connect",
        cluster.url,
        "--token-stdin",
        stdin=cluster.token + "\n",
        **plain,
    )
    assert connected.returncode == 0, connected.stderr
    assert f"answers at {cluster.url}; saved as the default cluster in {settings}" in (
        connected.stderr
    )
    assert stat.S_IMODE(settings.stat().st_mode) == 0o600
    assert stat.S_IMODE(settings.parent.stat().st_mode) == 0o700
    assert cluster.token in settings.read_text()
    listed = _ncompass(cluster, project, "jobs", "list", **plain)
    assert listed.returncode == 0, listed.stderr


def test_the_cluster_serves_only_loopback(cluster: LocalRayCluster) -> None:
    listening = subprocess.run(["ss", "-Hltnp"], capture_output=True, text=True, check=False)
    if listening.returncode != 0:
        pytest.skip("ss is not available")
    ours = {str(pid) for pid in cluster.processes()}
    exposed = [
        line
        for line in listening.stdout.splitlines()
        if any(f"pid={pid}," in line for pid in ours)
        # 127.0.0.1:P, or [::ffff:127.0.0.1]:P (the same socket seen through IPv6)
        and not line.split()[3].replace("[::ffff:", "").startswith("127.0.0.1")
    ]
    assert ours and exposed == []


def test_a_missing_file_on_a_node_is_reported_as_missing(cluster: LocalRayCluster) -> None:
    dashboard = Dashboard(
        Cluster(cluster.url, "tests", {"Authorization": f"Bearer {cluster.token}"})
    )
    (node,) = dashboard.nodes()
    with pytest.raises(FileMissingError):
        b"".join(dashboard.read_file(node.node_id, "ncompass/no-such-job/node0/manifest.json"))


def test_fetching_from_a_cluster_without_the_job_says_so(
    cluster: LocalRayCluster, tmp_path: Path
) -> None:
    dashboard = Dashboard(
        Cluster(cluster.url, "tests", {"Authorization": f"Bearer {cluster.token}"})
    )
    with pytest.raises(RemoteError, match="has no packed traces"):
        fetch_job(dashboard, "never-submitted", tmp_path)
