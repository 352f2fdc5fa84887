"""The service's HTTP API over real HTTP on loopback: uploads, jobs, polling, limits, auth."""

from __future__ import annotations

import gzip
import http.client
import json
import time
from pathlib import Path
from typing import Any

import pytest

from ncompass.analysis import summarize_trace
from ncompass.traces import TraceReader, filter_trace
from tests.service.conftest import SERVER_EXTRA
from tests.service.doubles import BrokenProvider, GatedProvider
from tests.service.endpoints import Answer, call
from tests.traces.builders import TraceBuilder, shared_trace

pytest.importorskip("fastapi", reason=SERVER_EXTRA)

from ncompass.service import BackgroundService, ServiceLimits

KIB = 1024


def upload(url: str, path: Path, name: str | None = None, **headers: str) -> Answer:
    query = f"?name={name or path.name}"
    return call("POST", f"{url}/v1/uploads{query}", path.read_bytes(), headers=headers)


def wait_for(url: str, job: dict[str, Any], timeout: float = 20.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while job["status"] not in ("done", "failed"):
        assert time.monotonic() < deadline, f"job still {job['status']}"
        time.sleep(0.02)
        job = call("GET", f"{url}/v1/jobs/{job['job_id']}").json()
    return job


def service_root(service: BackgroundService) -> Path:
    root: Path = service.app.state.store.root
    return root


def submit(url: str, kind: str, **body: Any) -> Answer:
    return call("POST", f"{url}/v1/jobs/{kind}", json_body=body)


@pytest.fixture
def small_trace(tmp_path: Path) -> Path:
    builder = TraceBuilder().marker("step", 0, 100).cpu_op("aten::mm", 10, 50)
    return builder.write(tmp_path / "small.json")


def test_health_says_what_runs_and_what_is_accepted(service: BackgroundService) -> None:
    answer = call("GET", f"{service.url}/v1/health")
    assert answer.status == 200
    health = answer.json()
    assert health["service"] == "ncompass" and health["api"] == 1
    assert health["provider"] == "builtin" and health["auth"] is False
    defaults = ServiceLimits()
    assert health["limits"]["max_upload_bytes"] == defaults.max_upload_bytes
    # every bound a client can run into is announced, the newer ones included
    assert health["limits"]["max_inflated_bytes"] == defaults.max_inflated_bytes
    assert health["limits"]["job_timeout_s"] == defaults.job_timeout_s
    assert health["limits"]["workers"] == defaults.workers
    assert health["jobs"] == {"queued": 0, "running": 0, "done": 0, "failed": 0}


def test_summarize_job_on_an_uploaded_torch_trace(
    service: BackgroundService, torch_trace: Path
) -> None:
    answer = upload(service.url, torch_trace)
    assert answer.status == 201, answer.body
    stored = answer.json()
    assert stored["name"] == torch_trace.name and stored["gzip"] is False
    assert stored["bytes"] == torch_trace.stat().st_size

    accepted = submit(service.url, "summarize", upload_id=stored["upload_id"], top=5)
    assert accepted.status == 202
    job = accepted.json()
    assert job["kind"] == "summarize" and job["status"] in ("queued", "running", "done")
    job = wait_for(service.url, job)
    assert job["status"] == "done" and job["error"] is None
    assert job["result_url"] == f"/v1/jobs/{job['job_id']}/result"

    summary = call("GET", service.url + job["result_url"]).json()
    # Same numbers as the engine run locally; the trace is named by its upload name, never by
    # the service's own folders.
    assert summary["structured"]["trace"]["path"] == torch_trace.name
    assert "ncompass-service" not in json.dumps(summary) and str(
        service_root(service)
    ) not in json.dumps(summary)
    local = json.loads(
        json.dumps(summarize_trace(torch_trace, top=5)).replace(str(torch_trace), torch_trace.name)
    )
    assert summary == local


def test_analyze_job_focuses_on_the_question(service: BackgroundService, torch_trace: Path) -> None:
    upload_id = upload(service.url, torch_trace).json()["upload_id"]
    context = {"feedback_text": "why is the linear slow?", "target_module": "model.linear"}
    job = submit(service.url, "analyze", upload_id=upload_id, feedback_context=context).json()
    job = wait_for(service.url, job)
    summary = call("GET", service.url + job["result_url"]).json()
    assert summary["structured"]["focus"]["markers"] == ["model.linear"]
    assert "why is the linear slow?" in summary["markdown"]


def test_gzip_upload_is_recognised_by_its_content(service: BackgroundService) -> None:
    trace = shared_trace("amd_trace")
    stored = upload(service.url, trace, name="renamed.json").json()
    assert stored["gzip"] is True and stored["name"] == "renamed.json"
    job = wait_for(
        service.url, submit(service.url, "summarize", upload_id=stored["upload_id"]).json()
    )
    assert job["status"] == "done"


def test_upload_name_cannot_reach_outside_the_store(
    service: BackgroundService, small_trace: Path, tmp_path: Path
) -> None:
    stored = upload(service.url, small_trace, name="../../../outside.json").json()
    assert stored["name"] == "outside.json"
    assert not (tmp_path / "outside.json").exists()
    [written] = (tmp_path / "store" / "uploads").rglob("outside.json")
    assert written.parent.name == stored["upload_id"]


def test_upload_that_is_not_a_trace_is_refused(service: BackgroundService) -> None:
    answer = call("POST", f"{service.url}/v1/uploads", b"PK\x03\x04 a zip file")
    assert answer.status == 415
    assert "Chrome/Kineto trace" in answer.json()["detail"]
    assert call("POST", f"{service.url}/v1/uploads", b"").status == 415


def test_upload_over_the_limit_is_refused_before_it_is_read(
    tmp_path: Path, small_trace: Path
) -> None:
    limits = ServiceLimits(max_upload_bytes=4 * KIB, max_storage_bytes=64 * KIB)
    with BackgroundService(limits=limits, storage_dir=tmp_path / "store") as service:
        answer = call("POST", f"{service.url}/v1/uploads", b"{" + b" " * (8 * KIB) + b"}")
        assert answer.status == 413
        detail = answer.json()["detail"]
        assert "4 KiB" in detail and "--max-upload-mb" in detail
        assert not list((tmp_path / "store" / "uploads").iterdir())
        assert upload(service.url, small_trace).status == 201


def test_chunked_upload_over_the_limit_is_cut_off_and_discarded(tmp_path: Path) -> None:
    limits = ServiceLimits(max_upload_bytes=4 * KIB, max_storage_bytes=64 * KIB)
    with BackgroundService(limits=limits, storage_dir=tmp_path / "store") as service:
        host, port = service.url.removeprefix("http://").split(":")
        connection = http.client.HTTPConnection(host, int(port), timeout=10)
        chunks = iter([b'{"traceEvents": [' + b" " * KIB] * 8)
        connection.request("POST", "/v1/uploads", body=chunks, encode_chunked=True)
        response = connection.getresponse()
        assert response.status == 413
        assert "larger than this service accepts" in json.loads(response.read())["detail"]
        connection.close()
        assert not list((tmp_path / "store" / "uploads").iterdir())


def test_stored_files_are_deleted_when_the_service_stops(tmp_path: Path, small_trace: Path) -> None:
    with BackgroundService(storage_dir=tmp_path / "store") as service:
        upload_id = upload(service.url, small_trace).json()["upload_id"]
        wait_for(service.url, submit(service.url, "summarize", upload_id=upload_id).json())
        assert list((tmp_path / "store").rglob("*.json"))
    assert not list((tmp_path / "store").rglob("*.json"))


def test_json_request_over_the_limit_is_refused(tmp_path: Path) -> None:
    limits = ServiceLimits(max_request_bytes=2 * KIB)
    with BackgroundService(limits=limits, storage_dir=tmp_path / "store") as service:
        body = {"spec": {}, "summary": {"text": "x" * 4 * KIB}, "markers": []}
        answer = submit(service.url, "propose-markers", **body)
        assert answer.status == 413
        assert "request body" in answer.json()["detail"]


def test_unknown_or_malformed_ids_are_not_found(service: BackgroundService) -> None:
    missing = "0" * 32
    assert submit(service.url, "summarize", upload_id=missing).status == 404
    assert (
        "upload the trace again"
        in submit(service.url, "summarize", upload_id=missing).json()["detail"]
    )
    assert submit(service.url, "summarize", upload_id="../etc/passwd").status == 404
    assert call("GET", f"{service.url}/v1/jobs/{missing}").status == 404
    assert call("GET", f"{service.url}/v1/jobs/..%2F..%2Fetc/result").status == 404
    assert call("DELETE", f"{service.url}/v1/uploads/{missing}").status == 404


def test_invalid_job_requests_are_422(service: BackgroundService, small_trace: Path) -> None:
    upload_id = upload(service.url, small_trace).json()["upload_id"]
    assert submit(service.url, "summarize", upload_id=upload_id, top=0).status == 422
    assert submit(service.url, "summarize", upload_id=upload_id, tpo=3).status == 422
    bad_filter = submit(service.url, "filter", upload_id=upload_id, min_duration_us=-1)
    assert bad_filter.status == 422
    assert "min_duration_us" in bad_filter.body.decode()


def test_jobs_go_from_queued_to_running_to_done(tmp_path: Path, small_trace: Path) -> None:
    provider = GatedProvider()
    limits = ServiceLimits(workers=1)
    with BackgroundService(
        limits=limits, provider=provider, storage_dir=tmp_path / "store"
    ) as service:
        upload_id = upload(service.url, small_trace).json()["upload_id"]
        first = submit(service.url, "summarize", upload_id=upload_id).json()
        second = submit(service.url, "summarize", upload_id=upload_id).json()
        assert provider.started.wait(10)
        first = call("GET", f"{service.url}/v1/jobs/{first['job_id']}").json()
        second = call("GET", f"{service.url}/v1/jobs/{second['job_id']}").json()
        assert (first["status"], second["status"]) == ("running", "queued")
        assert first["started_at"] is not None and second["started_at"] is None

        early = call("GET", f"{service.url}/v1/jobs/{first['job_id']}/result")
        assert early.status == 409 and "poll it until it is done" in early.json()["detail"]
        # An upload a job still reads cannot be deleted.
        assert call("DELETE", f"{service.url}/v1/uploads/{upload_id}").status == 409

        provider.gate.set()
        assert wait_for(service.url, first)["status"] == "done"
        assert wait_for(service.url, second)["status"] == "done"
        assert call("DELETE", f"{service.url}/v1/uploads/{upload_id}").status == 204
        assert submit(service.url, "summarize", upload_id=upload_id).status == 404


def test_a_full_queue_answers_429_with_retry_after(tmp_path: Path, small_trace: Path) -> None:
    provider = GatedProvider()
    limits = ServiceLimits(workers=1, max_queued_jobs=1)
    with BackgroundService(
        limits=limits, provider=provider, storage_dir=tmp_path / "store"
    ) as service:
        upload_id = upload(service.url, small_trace).json()["upload_id"]
        assert submit(service.url, "summarize", upload_id=upload_id).status == 202
        assert provider.started.wait(10)
        assert submit(service.url, "summarize", upload_id=upload_id).status == 202
        refused = submit(service.url, "summarize", upload_id=upload_id)
        assert refused.status == 429 and refused.headers["retry-after"]
        assert "retry" in refused.json()["detail"]
        provider.gate.set()


def test_an_unreadable_trace_fails_its_job_with_the_reason(service: BackgroundService) -> None:
    answer = call("POST", f"{service.url}/v1/uploads?name=cut.json", b'{"traceEvents": [{"ph": "X"')
    upload_id = answer.json()["upload_id"]
    job = wait_for(service.url, submit(service.url, "summarize", upload_id=upload_id).json())
    assert job["status"] == "failed" and job["error_kind"] == "trace"
    assert "cut.json" in job["error"] and "truncated" in job["error"]
    result = call("GET", f"{service.url}/v1/jobs/{job['job_id']}/result")
    assert result.status == 409 and "failed" in result.json()["detail"]


def test_an_engine_bug_fails_the_job_as_internal(tmp_path: Path, small_trace: Path) -> None:
    with BackgroundService(provider=BrokenProvider(), storage_dir=tmp_path / "store") as service:
        upload_id = upload(service.url, small_trace).json()["upload_id"]
        job = wait_for(service.url, submit(service.url, "summarize", upload_id=upload_id).json())
        assert job["status"] == "failed" and job["error_kind"] == "internal"
        assert job["error"] == "internal error: RuntimeError: engine bug"
        assert call("GET", f"{service.url}/v1/health").json()["jobs"]["failed"] == 1


@pytest.mark.parametrize("compressed", [False, True], ids=["json", "gzip"])
def test_filter_job_result_is_the_filtered_trace(
    service: BackgroundService, tmp_path: Path, compressed: bool
) -> None:
    trace = shared_trace("trace_filter")
    upload_id = upload(service.url, trace).json()["upload_id"]
    options = {"include_cuda_kernels": True, "include_direct_children": True, "min_duration_us": 5}
    job = submit(service.url, "filter", upload_id=upload_id, gzip=compressed, **options).json()
    job = wait_for(service.url, job)
    assert job["status"] == "done"
    answer = call("GET", service.url + job["result_url"])
    assert answer.status == 200
    expected_type = "application/gzip" if compressed else "application/json"
    assert answer.headers["content-type"].startswith(expected_type)
    assert trace.name.removesuffix(".json.gz") in answer.headers["content-disposition"]
    body = gzip.decompress(answer.body) if compressed else answer.body
    remote = tmp_path / "remote.json"
    remote.write_bytes(body)
    local = filter_trace(trace, tmp_path / "local.json", **options)
    assert list(TraceReader(remote)) == list(TraceReader(local))


def test_propose_markers_job_with_the_builtin_engine_proposes_nothing(
    service: BackgroundService,
) -> None:
    body = {"spec": {"version": 1, "targets": []}, "summary": {}, "markers": []}
    job = wait_for(service.url, submit(service.url, "propose-markers", **body).json())
    assert job["status"] == "done" and job["upload_id"] is None
    assert call("GET", service.url + job["result_url"]).json() == {"targets": None}


def test_a_token_guards_everything_but_health(tmp_path: Path, small_trace: Path) -> None:
    with BackgroundService(token="s3cret", storage_dir=tmp_path / "store") as service:
        assert call("GET", f"{service.url}/v1/health").json()["auth"] is True
        refused = upload(service.url, small_trace)
        assert refused.status == 401 and refused.headers["www-authenticate"] == "Bearer"
        assert "NCOMPASS_ANALYSIS_TOKEN" in refused.json()["detail"]
        assert upload(service.url, small_trace, Authorization="Bearer wrong").status == 401
        assert upload(service.url, small_trace, Authorization="Bearer s3cret").status == 201
