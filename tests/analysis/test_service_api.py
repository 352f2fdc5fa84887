"""The service's wire models, shared by ``ncompass serve`` and its client.

The client refuses an answer of the wrong shape (wrong type, missing key, other API version)
with one warning naming the URL, the endpoint and what was wrong, then falls back; the real
service's answers validate against the same models.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ncompass.analysis import summarize_trace
from ncompass.analysis.providers import BuiltinProvider, ProviderFallbackWarning
from ncompass.analysis.providers.remote import RemoteProvider
from ncompass.analysis.providers.service_api import (
    API_VERSION,
    HealthInfo,
    JobInfo,
    LimitsInfo,
    SummaryResult,
    UploadInfo,
)
from tests.service.conftest import SERVER_EXTRA
from tests.service.endpoints import Request, call, http_server

Answers = dict[str, Any]


def complete_answers(summary: dict[str, Any]) -> Answers:
    """What a well-behaved service answers, built with the server's own models."""
    limits = LimitsInfo(
        max_upload_bytes=10**9,
        max_request_bytes=10**6,
        max_storage_bytes=10**10,
        retention_s=60.0,
        max_queued_jobs=4,
    )
    health = HealthInfo(version="test", provider="builtin", auth=False, limits=limits, jobs={})
    upload = UploadInfo(upload_id="u", name="t.json", bytes=1, gzip=False, expires_in_s=60.0)
    job = JobInfo(
        job_id="j", kind="summarize", status="done", created_at=0.0, result_url="/v1/jobs/j/result"
    )
    return {
        "health": health.model_dump(),
        "upload": upload.model_dump(),
        "job": job.model_dump(),
        "result": summary,
    }


def scripted_service(answers: Answers) -> Callable[[Request], tuple[int, dict[str, str], bytes]]:
    def answer(request: Request) -> tuple[int, dict[str, str], bytes]:
        path = request.path
        if path == "/v1/health":
            return 200, {}, json.dumps(answers["health"]).encode()
        if path.startswith("/v1/uploads"):
            return 201, {}, json.dumps(answers["upload"]).encode()
        if path.endswith("/result"):
            return 200, {}, json.dumps(answers["result"]).encode()
        return 202, {}, json.dumps(answers["job"]).encode()

    return answer


def with_change(answers: Answers, where: str, key: str, value: Any) -> Answers:
    """``answers`` with ``where``'s ``key`` (a dotted path) set to ``value`` (or removed)."""
    changed = json.loads(json.dumps(answers))
    *parents, last = key.split(".")
    node = changed[where]
    for parent in parents:
        node = node[parent]
    if value is REMOVE:
        del node[last]
    else:
        node[last] = value
    return changed


REMOVE = object()


@pytest.fixture(scope="module")
def local_summary(torch_trace: Path) -> dict[str, Any]:
    return dict(summarize_trace(torch_trace, top=3))


def test_a_complete_answer_is_accepted(torch_trace: Path, local_summary: dict[str, Any]) -> None:
    with http_server(scripted_service(complete_answers(local_summary))) as url:
        provider = RemoteProvider(url, BuiltinProvider())
        with warnings.catch_warnings():
            warnings.simplefilter("error", ProviderFallbackWarning)
            summary = provider.summarize(torch_trace, top=3)
    assert provider.last_failure is None
    assert summary["markdown"] == local_summary["markdown"]


@pytest.mark.parametrize(
    ("where", "key", "value", "endpoint", "reason"),
    [
        (
            "health",
            "limits.max_upload_bytes",
            "lots",
            "/v1/health",
            "malformed answer: not a health answer "
            "(limits.max_upload_bytes: Input should be a valid integer",
        ),
        (
            "health",
            "limits",
            REMOVE,
            "/v1/health",
            "malformed answer: not a health answer (limits: Field required)",
        ),
        (
            "health",
            "api",
            API_VERSION + 1,
            "/v1/health",
            f"the service speaks API {API_VERSION + 1}, this client {API_VERSION}: run the same "
            "ncompass version on both sides",
        ),
        (
            "upload",
            "upload_id",
            REMOVE,
            "/v1/uploads",
            "malformed answer: no upload_id (upload_id: Field required)",
        ),
        (
            "job",
            "status",
            "finished",
            "/v1/jobs/summarize",
            "malformed answer: not a job status (status: Input should be 'queued', 'running', "
            "'done' or 'failed')",
        ),
        (
            "job",
            "result_url",
            None,
            "/v1/jobs/summarize",
            "malformed answer: not a job status (Value error, a done job needs a result_url)",
        ),
        (
            "result",
            "structured.operations",
            {},
            "/v1/jobs/j/result",
            "malformed answer: not a summary (markdown + structured) "
            "(structured: Value error, no list 'operations')",
        ),
        (
            "result",
            "markdown",
            REMOVE,
            "/v1/jobs/j/result",
            "malformed answer: not a summary (markdown + structured) (markdown: Field required)",
        ),
    ],
    ids=[
        "health-wrong-type",
        "health-missing-limits",
        "health-other-api",
        "upload-missing-id",
        "job-unknown-status",
        "job-done-without-result",
        "summary-wrong-type",
        "summary-missing-markdown",
    ],
)
def test_a_malformed_answer_is_refused_with_one_clear_message(
    torch_trace: Path,
    local_summary: dict[str, Any],
    where: str,
    key: str,
    value: Any,
    endpoint: str,
    reason: str,
) -> None:
    answers = with_change(complete_answers(local_summary), where, key, value)
    with http_server(scripted_service(answers)) as url:
        provider = RemoteProvider(url, BuiltinProvider())
        with pytest.warns(ProviderFallbackWarning) as record:
            summary = provider.summarize(torch_trace, top=3)
    [warning] = [w for w in record if issubclass(w.category, ProviderFallbackWarning)]
    message = str(warning.message)
    assert f"analysis service at {url}" in message, message
    assert f"{endpoint}: {reason}" in message, message
    assert message.count("malformed answer") <= 1
    assert summary == summarize_trace(torch_trace, top=3)  # the local engine answered


def test_the_real_services_answers_match_the_shared_models(
    tmp_path: Path, torch_trace: Path
) -> None:
    pytest.importorskip("fastapi", reason=SERVER_EXTRA)
    from pydantic import TypeAdapter

    from ncompass.analysis import Summary
    from ncompass.service import BackgroundService

    with BackgroundService(storage_dir=tmp_path / "store") as service:
        health = HealthInfo.model_validate(call("GET", f"{service.url}/v1/health").json())
        assert health.api == API_VERSION
        answer = call("POST", f"{service.url}/v1/uploads?name=t.json", torch_trace.read_bytes())
        upload = UploadInfo.model_validate(answer.json())
        answer = call(
            "POST", f"{service.url}/v1/jobs/summarize", json_body={"upload_id": upload.upload_id}
        )
        job = JobInfo.model_validate(answer.json())
        while job.status not in ("done", "failed"):
            job = JobInfo.model_validate(call("GET", f"{service.url}/v1/jobs/{job.job_id}").json())
        assert job.status == "done", job.error
        result = call("GET", f"{service.url}{job.result_url}").json()
    SummaryResult.model_validate(result)
    assert TypeAdapter(Summary).validate_python(result, strict=True) == result
