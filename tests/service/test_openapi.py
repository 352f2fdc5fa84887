"""The OpenAPI schema FastAPI generates: it loads and documents every endpoint."""

from __future__ import annotations

import pytest

from tests.service.conftest import SERVER_EXTRA
from tests.service.endpoints import call

pytest.importorskip("fastapi", reason=SERVER_EXTRA)

from ncompass.service import BackgroundService, create_app

ENDPOINTS = {
    "/v1/health": {"get"},
    "/v1/uploads": {"post"},
    "/v1/uploads/{upload_id}": {"delete"},
    "/v1/jobs/summarize": {"post"},
    "/v1/jobs/analyze": {"post"},
    "/v1/jobs/filter": {"post"},
    "/v1/jobs/propose-markers": {"post"},
    "/v1/jobs/{job_id}": {"get"},
    "/v1/jobs/{job_id}/result": {"get"},
}


def test_schema_lists_every_endpoint_and_its_models() -> None:
    schema = create_app().openapi()
    assert schema["openapi"].startswith("3.")
    assert schema["info"]["title"] == "ncompass analysis service"
    paths = {path: set(operations) for path, operations in schema["paths"].items()}
    assert paths == ENDPOINTS
    components = schema["components"]["schemas"]
    for model in ("JobInfo", "UploadInfo", "HealthInfo", "SummarizeRequest", "FilterRequest"):
        assert model in components
    # Results are documented through models that only appear there.
    assert {"SummaryResult", "ProposalResult"} <= set(components)
    upload_body = schema["paths"]["/v1/uploads"]["post"]["requestBody"]["content"]
    assert upload_body["application/gzip"]["schema"]["format"] == "binary"
    job = schema["paths"]["/v1/jobs/summarize"]["post"]
    assert job["responses"]["202"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/JobInfo"
    }
    assert set(components["JobInfo"]["properties"]["status"]["enum"]) == {
        "queued",
        "running",
        "done",
        "failed",
    }


def test_the_running_service_serves_its_schema(service: BackgroundService) -> None:
    answer = call("GET", f"{service.url}/openapi.json")
    assert answer.status == 200
    assert set(answer.json()["paths"]) == set(ENDPOINTS)
