"""The service against what a web page can make a browser send it, and against JSON that is
not JSON (NaN). Every server here is real, on 127.0.0.1, and every request is sent as the
browser would send it (the headers of a cross-origin ``fetch`` that needs no preflight)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.service.conftest import SERVER_EXTRA
from tests.service.endpoints import call

TRACE = b'{"traceEvents": [{"ph": "X", "name": "k", "pid": 0, "tid": 1, "ts": 1, "dur": 2}]}'
NO_UPLOAD = "0" * 32


@pytest.fixture(autouse=True)
def _server_extra() -> None:
    pytest.importorskip("fastapi", reason=SERVER_EXTRA)


def stored(storage: Path) -> list[Path]:
    uploads = storage / "uploads"
    return sorted(uploads.iterdir()) if uploads.exists() else []


# JSON that the stdlib decoder takes but JSON has not: NaN, Infinity


@pytest.mark.parametrize(
    ("endpoint", "body", "constant"),
    [
        ("summarize", b'{"upload_id": "%s", "top": NaN}' % NO_UPLOAD.encode(), "NaN"),
        ("analyze", b'{"upload_id": "%s", "top": -Infinity}' % NO_UPLOAD.encode(), "-Infinity"),
        (
            "filter",
            b'{"upload_id": "%s", "min_duration_us": Infinity}' % NO_UPLOAD.encode(),
            "Infinity",
        ),
        ("propose-markers", b'{"spec": NaN, "summary": {}, "markers": []}', "NaN"),
    ],
)
def test_nan_or_infinity_in_a_job_body_is_a_clear_400(
    tmp_path: Path, endpoint: str, body: bytes, constant: str
) -> None:
    from ncompass.service import BackgroundService

    with BackgroundService(storage_dir=tmp_path / "s") as service:
        json_type = {"Content-Type": "application/json"}
        answer = call("POST", f"{service.url}/v1/jobs/{endpoint}", body, headers=json_type)
        health = call("GET", f"{service.url}/v1/health")
    assert answer.status == 400, answer.body
    at = body.index(constant.encode())
    assert answer.json()["detail"] == (
        f"the request JSON holds {constant} at byte {at}, which JSON does not allow: send a "
        "number (or leave the field out for its default)"
    )
    assert health.status == 200 and health.json()["jobs"] == {
        "queued": 0,
        "running": 0,
        "done": 0,
        "failed": 0,
    }


def test_nan_inside_a_string_is_text_not_a_number(tmp_path: Path) -> None:
    from ncompass.service import BackgroundService

    with BackgroundService(storage_dir=tmp_path / "s") as service:
        upload_id = call("POST", f"{service.url}/v1/uploads?name=t.json", TRACE).json()["upload_id"]
        body = {"upload_id": upload_id, "feedback_context": {"feedback_text": "why NaN, Infinity?"}}
        answer = call("POST", f"{service.url}/v1/jobs/analyze", json_body=body)
    assert answer.status == 202, answer.body


# Requests from web pages


@pytest.mark.parametrize(
    "origin",
    ["http://evil.example", "http://127.0.0.1:1", "https://localhost.evil.example", "null"],
)
def test_a_cross_origin_upload_from_a_page_is_refused_and_stores_nothing(
    tmp_path: Path, origin: str
) -> None:
    from ncompass.service import BackgroundService

    with BackgroundService(storage_dir=tmp_path / "s") as service:
        # What fetch(url, {method: "POST", mode: "no-cors", body: "..."}) sends: no preflight.
        page = {"Origin": origin, "Content-Type": "text/plain;charset=UTF-8"}
        answer = call("POST", f"{service.url}/v1/uploads?name=t.json", TRACE, headers=page)
        job = call(
            "POST",
            f"{service.url}/v1/jobs/summarize",
            b'{"upload_id": "%s"}' % NO_UPLOAD.encode(),
            headers=page,
        )
        kept = stored(tmp_path / "s")
    assert answer.status == 403, answer.body
    assert answer.json()["detail"] == (
        f"this service does not answer requests from web pages of other origins ({origin}); "
        "call it from a program (ncompass, curl), which sends no Origin header"
    )
    assert job.status == 403
    assert kept == []


def test_a_page_served_by_the_service_itself_is_answered(tmp_path: Path) -> None:
    from ncompass.service import BackgroundService

    with BackgroundService(storage_dir=tmp_path / "s") as service:
        port = service.url.rsplit(":", 1)[1]
        for own in (service.url, f"http://localhost:{port}"):
            host = own.removeprefix("http://")
            headers = {"Origin": own, "Host": host, "Content-Type": "application/json"}
            answer = call("POST", f"{service.url}/v1/uploads?name=t.json", TRACE, headers=headers)
            assert answer.status == 201, (own, answer.body)


@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain",
        "text/plain;charset=UTF-8",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "TEXT/PLAIN",
    ],
)
def test_an_upload_a_form_could_send_is_refused_without_an_origin_too(
    tmp_path: Path, content_type: str
) -> None:
    from ncompass.service import BackgroundService

    with BackgroundService(storage_dir=tmp_path / "s") as service:
        headers = {"Content-Type": content_type}
        answer = call("POST", f"{service.url}/v1/uploads?name=t.json", TRACE, headers=headers)
        kept = stored(tmp_path / "s")
    assert answer.status == 415, answer.body
    assert answer.json()["detail"] == (
        f"an upload sent as {content_type.partition(';')[0].strip().lower()} is what a web "
        "page's form can send: send the trace as application/octet-stream, application/json or "
        "application/gzip (curl: -H 'Content-Type: application/octet-stream')"
    )
    assert kept == []


@pytest.mark.parametrize(
    "content_type", [None, "application/octet-stream", "application/json", "application/gzip"]
)
def test_uploads_from_programs_are_taken(tmp_path: Path, content_type: str | None) -> None:
    from ncompass.service import BackgroundService

    with BackgroundService(storage_dir=tmp_path / "s") as service:
        headers = {"Content-Type": content_type} if content_type else {}
        answer = call("POST", f"{service.url}/v1/uploads?name=t.json", TRACE, headers=headers)
    assert answer.status == 201, answer.body


# The token covers the API's documentation too


@pytest.mark.parametrize("path", ["/docs", "/openapi.json", "/redoc", "/docs/oauth2-redirect"])
def test_with_a_token_the_api_docs_need_it_too(tmp_path: Path, path: str) -> None:
    from ncompass.service import BackgroundService

    with BackgroundService(token="s3cret", storage_dir=tmp_path / "s") as service:
        without = call("GET", f"{service.url}{path}")
        wrong = call("GET", f"{service.url}{path}", headers={"Authorization": "Bearer no"})
        given = call("GET", f"{service.url}{path}", headers={"Authorization": "Bearer s3cret"})
        health = call("GET", f"{service.url}/v1/health")
    assert (without.status, wrong.status) == (401, 401)
    assert "NCOMPASS_ANALYSIS_TOKEN" in without.json()["detail"]
    assert given.status == 200
    assert health.status == 200


def test_without_a_token_the_api_docs_are_open(tmp_path: Path) -> None:
    from ncompass.service import BackgroundService

    with BackgroundService(storage_dir=tmp_path / "s") as service:
        assert call("GET", f"{service.url}/docs").status == 200
        assert call("GET", f"{service.url}/openapi.json").json()["paths"]
