"""The service against hostile input: foreign host names, gzip bombs, endless jobs, and a
storage folder that holds someone else's files. Every server here is real, on 127.0.0.1."""

from __future__ import annotations

import gzip
import json
import os
import re
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from ncompass.service.limits import MIB, ServiceLimits
from tests.service.conftest import SERVER_EXTRA
from tests.service.endpoints import Request, call, http_server

REPO = Path(__file__).resolve().parents[2]
TRACE = b'{"traceEvents": [{"ph": "X", "name": "k", "pid": 0, "tid": 1, "ts": 1, "dur": 2}]}'


@pytest.fixture(autouse=True)
def _server_extra() -> None:
    pytest.importorskip("fastapi", reason=SERVER_EXTRA)


@contextmanager
def serve(
    storage: Path, *options: str, env: dict[str, str] | None = None
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """``ncompass serve --port 0 --storage-dir STORAGE OPTIONS`` running; yields its URL.

    ``env`` adds to (or overrides) the environment the service is started with.
    """
    env = {**os.environ, "NCOMPASS_ANALYSIS_TOKEN": "", "PYTHONUNBUFFERED": "1", **(env or {})}
    env["PYTHONPATH"] = str(REPO)
    command = [sys.executable, "-m", "ncompass", "serve", "--port", "0", "--log-level", "warning"]
    process = subprocess.Popen(
        [*command, "--storage-dir", str(storage), *options],
        cwd=REPO,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        printed: list[str] = []
        match = None
        for line in process.stderr:
            printed.append(line)
            if match := re.search(r"on (http://127\.0\.0\.1:\d+) ", line):
                break
        assert match, "".join(printed)
        yield match.group(1), process
    finally:
        process.terminate()
        process.wait(timeout=60)


def refused(storage: Path) -> subprocess.CompletedProcess[str]:
    """``ncompass serve --storage-dir STORAGE`` that is expected to stop at once."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "ncompass", "serve", "--port", "0", "--storage-dir", str(storage)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def upload(url: str, body: bytes, name: str = "t.json") -> Any:
    answer = call("POST", f"{url}/v1/uploads?name={name}", body, timeout=120)
    assert answer.status == 201, answer.body
    return answer.json()["upload_id"]


def finished_job(url: str, job_id: str, deadline_s: float = 120.0) -> Any:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        job = call("GET", f"{url}/v1/jobs/{job_id}").json()
        if job["status"] in ("done", "failed"):
            return job
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} did not finish in {deadline_s} s")


def summarize(url: str, upload_id: str) -> Any:
    answer = call("POST", f"{url}/v1/jobs/summarize", json_body={"upload_id": upload_id})
    assert answer.status == 202, answer.body
    return finished_job(url, answer.json()["job_id"])


def bomb(inflated_mib: int) -> bytes:
    """A valid gzip trace that inflates to about ``inflated_mib`` MiB: the same gzip member of
    kernel events repeated (``cat a.gz a.gz`` is valid gzip)."""
    event = b'{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 3},'
    member = gzip.compress(event * (MIB // len(event)), 6)
    head = gzip.compress(b'{"traceEvents": [')
    tail = gzip.compress(b'{"ph": "i", "name": "end", "pid": 0, "tid": 7, "ts": 1, "s": "t"}]}')
    return head + member * inflated_mib + tail


# DNS rebinding


@pytest.mark.parametrize(
    ("host", "answered"),
    [
        ("127.0.0.1:{port}", True),
        ("localhost:{port}", True),
        ("LOCALHOST", True),
        ("profiler.lab:{port}", True),
        ("evil.example", False),
        ("evil.example:{port}", False),
        ("127.0.0.1.evil.example", False),
        ("localhost.evil.example:{port}", False),
        ("10.0.0.1:{port}", False),
    ],
)
def test_only_the_bound_address_localhost_and_allowed_names_are_answered(
    tmp_path: Path, host: str, answered: bool
) -> None:
    from ncompass.service import BackgroundService

    with BackgroundService(storage_dir=tmp_path / "s", allow_hosts=("profiler.lab",)) as service:
        port = service.url.rsplit(":", 1)[1]
        header = {"Host": host.format(port=port)}
        health = call("GET", f"{service.url}/v1/health", headers=header)
        stored = call("POST", f"{service.url}/v1/uploads?name=t.json", TRACE, headers=header)
        kept = list((tmp_path / "s" / "uploads").iterdir())
    if answered:
        assert (health.status, stored.status) == (200, 201)
    else:
        assert (health.status, stored.status) == (400, 400)
        assert "does not answer to the host name" in health.json()["detail"]
        assert "--allow-host" in health.json()["detail"]
        assert kept == []


def test_a_service_bound_as_localhost_answers_its_loopback_address(tmp_path: Path) -> None:
    from ncompass.service import BackgroundService

    with BackgroundService(host="localhost", storage_dir=tmp_path / "s") as service:
        port = service.url.rsplit(":", 1)[1]
        for name, status in [("127.0.0.1", 200), ("localhost", 200), ("evil.example", 400)]:
            answer = call("GET", f"{service.url}/v1/health", headers={"Host": f"{name}:{port}"})
            assert answer.status == status, name


def test_serve_answers_a_name_given_with_allow_host_and_no_other(tmp_path: Path) -> None:
    with serve(tmp_path / "s", "--allow-host", "gpu-box.lab", "--allow-host", "gpu-box") as (
        url,
        _,
    ):
        port = url.rsplit(":", 1)[1]
        for name, status in [("gpu-box.lab", 200), ("gpu-box", 200), ("rebind.example", 400)]:
            answer = call("GET", f"{url}/v1/health", headers={"Host": f"{name}:{port}"})
            assert answer.status == status, name


# What a failed job tells the client


def test_a_failed_job_does_not_tell_where_the_service_keeps_files(tmp_path: Path) -> None:
    from ncompass.service import BackgroundService

    with BackgroundService(storage_dir=tmp_path / "store") as service:
        job = summarize(service.url, upload(service.url, b'{"traceEvents": [', "run.json"))
    assert job["status"] == "failed" and job["error_kind"] == "trace"
    assert job["error"].startswith("run.json: ")
    assert str(tmp_path) not in job["error"] and "uploads" not in job["error"]


# Bounded work


def test_a_gzip_that_inflates_past_the_limit_is_refused_while_it_arrives(tmp_path: Path) -> None:
    from ncompass.service import BackgroundService

    body = bomb(1024)  # 1 GiB of JSON in about 4 MB of gzip
    assert len(body) < 8 * MIB
    limits = ServiceLimits(max_inflated_bytes=16 * MIB)
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    with BackgroundService(storage_dir=tmp_path / "store", limits=limits) as service:
        answer = call("POST", f"{service.url}/v1/uploads?name=bomb.json.gz", body)
        kept = list((tmp_path / "store" / "uploads").iterdir())
        small = upload(service.url, gzip.compress(TRACE), "small.json.gz")
        assert summarize(service.url, small)["status"] == "done"
    peak_growth = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - peak_before
    assert answer.status == 413
    assert answer.json()["detail"] == (
        "the gzip upload inflates to more than 16 MiB, the most this service reads: filter "
        "the trace first (`ncompass filter`), or restart the service with a larger "
        "--max-inflated-mb"
    )
    # Inflated in pieces and dropped: never the whole GiB, nor even the limit, in memory.
    assert peak_growth < 256 * MIB
    assert kept == []


def test_a_job_past_its_time_limit_fails_and_frees_the_worker(tmp_path: Path) -> None:
    from ncompass.service import BackgroundService

    # ~380 MiB of events: several CPU seconds to summarize on any machine.
    limits = ServiceLimits(job_timeout_s=0.5, workers=1)
    with BackgroundService(storage_dir=tmp_path / "store", limits=limits) as service:
        slow = upload(service.url, bomb(380), "slow.json.gz")
        quick = upload(service.url, TRACE)
        first = call("POST", f"{service.url}/v1/jobs/summarize", json_body={"upload_id": slow})
        second = call("POST", f"{service.url}/v1/jobs/summarize", json_body={"upload_id": quick})
        timed_out = finished_job(service.url, first.json()["job_id"])
        after = finished_job(service.url, second.json()["job_id"])
        health = call("GET", f"{service.url}/v1/health").json()
    assert timed_out["status"] == "failed", timed_out
    assert timed_out["error"] == (
        "the job ran past this service's time limit (0.5 s) and was stopped: filter the trace "
        "first (`ncompass filter`), or restart the service with a larger --job-timeout-s"
    )
    assert after["status"] == "done"
    assert health["jobs"]["running"] == 0


def test_serve_takes_a_job_time_limit_and_an_inflated_size_limit(tmp_path: Path) -> None:
    with serve(tmp_path / "s", "--job-timeout-s", "0.5", "--max-inflated-mb", "400") as (url, _):
        answer = call("POST", f"{url}/v1/uploads?name=b.json.gz", bomb(1024))
        assert answer.status == 413 and "more than 400 MiB" in answer.json()["detail"]
        # 380 MiB of events: seconds of work on any machine, far past half a second.
        job = summarize(url, upload(url, bomb(380), "slow.json.gz"))
    assert job["status"] == "failed" and "time limit (0.5 s)" in job["error"]


@contextmanager
def slow_llm(answer_after_s: float) -> Iterator[tuple[str, dict[str, int]]]:
    """A chat completions endpoint on 127.0.0.1 that answers only after ``answer_after_s``.

    Yields its ``/v1`` base URL and counts of the requests it was sent and answered, so a
    test can tell whether the job waited for it. The wait ends early when the block ends.
    """
    done = threading.Event()
    counts = {"asked": 0, "answered": 0}

    def handle(request: Request) -> tuple[int, dict[str, str], bytes]:
        counts["asked"] += 1
        done.wait(answer_after_s)
        counts["answered"] += 1
        body = {"choices": [{"message": {"content": '{"narrative": "The trace is short."}'}}]}
        return 200, {"Content-Type": "application/json"}, json.dumps(body).encode()

    with http_server(handle) as url:
        try:
            yield f"{url}/v1", counts
        finally:
            done.set()


def test_the_job_time_limit_covers_the_llm_narrative(tmp_path: Path) -> None:
    with slow_llm(answer_after_s=42.0) as (llm_url, counts):
        llm = {"NCOMPASS_LLM_URL": llm_url, "NCOMPASS_LLM_MODEL": "slow"}
        with serve(tmp_path / "s", "--job-timeout-s", "2", env=llm) as (url, _):
            started = time.monotonic()
            job = summarize(url, upload(url, TRACE))
            took = time.monotonic() - started
            health = call("GET", f"{url}/v1/health").json()
        # Stopped at its limit while the model was still writing, not when it answered.
        assert counts == {"asked": 1, "answered": 0}
    assert job["status"] == "failed", job
    assert job["error"].startswith("the job ran past this service's time limit (2 s)")
    assert health["jobs"]["running"] == 0
    assert took < 30.0  # 2 s and some slack for a busy machine; the model answers after 42 s


# The storage folder


def test_serve_deletes_only_what_it_wrote_in_its_storage_folder(tmp_path: Path) -> None:
    storage = tmp_path / "s"
    with serve(storage) as (url, _):
        upload_id = upload(url, TRACE)
        assert (storage / "uploads" / upload_id / "t.json").is_file()
        # Someone puts a file there while the service runs: it is theirs, not the service's.
        (storage / "uploads" / "notes.txt").write_text("mine")
    assert not (storage / "uploads" / upload_id).exists()
    assert (storage / "uploads" / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize(
    ("foreign", "named"),
    [
        ("thesis.tex", "thesis.tex"),
        ("uploads/data.json", "uploads/data.json"),
        ("results/keep/model.pt", "results/keep"),
        (".ncompass-service-not", ".ncompass-service-not"),
    ],
)
def test_serve_refuses_a_storage_folder_holding_files_it_did_not_write(
    tmp_path: Path, foreign: str, named: str
) -> None:
    storage = tmp_path / "s"
    (storage / foreign).parent.mkdir(parents=True, exist_ok=True)
    (storage / foreign).write_text("not the service's")
    result = refused(storage)
    assert result.returncode == 2, result.stderr
    assert result.stderr == (
        f"error: --storage-dir {storage} holds {named}, which ncompass serve did not write; "
        "the service deletes what it stores there, so give it an empty or new folder\n"
    )
    assert (storage / foreign).read_text() == "not the service's"


def test_a_symlinked_uploads_folder_is_one_clear_error(tmp_path: Path) -> None:
    storage, elsewhere = tmp_path / "s", tmp_path / "elsewhere"
    storage.mkdir()
    elsewhere.mkdir()
    (elsewhere / "precious.json").write_text("{}")
    (storage / "uploads").symlink_to(elsewhere)
    result = refused(storage)
    assert result.returncode == 2
    assert result.stderr == (
        f"error: --storage-dir {storage}: uploads is a symbolic link; the service keeps its "
        f"files in a real uploads folder of its own: remove {storage / 'uploads'} or give "
        "another folder\n"
    )
    assert (elsewhere / "precious.json").exists()


def test_a_storage_folder_left_by_a_killed_service_is_taken_again(tmp_path: Path) -> None:
    storage = tmp_path / "s"
    with serve(storage) as (url, process):
        upload_id = upload(url, TRACE)
        process.kill()
        process.wait(timeout=60)
    assert (storage / "uploads" / upload_id).exists()
    with serve(storage) as (url, _):
        assert not (storage / "uploads" / upload_id).exists()
        assert call("GET", f"{url}/v1/health").status == 200
