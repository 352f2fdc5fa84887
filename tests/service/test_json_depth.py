"""JSON request bodies nested past the limit are refused with one clear 400, over real HTTP."""

from __future__ import annotations

import pytest

from tests.service.conftest import SERVER_EXTRA, service
from tests.service.endpoints import call

pytest.importorskip("fastapi", reason=SERVER_EXTRA)

from ncompass.service import BackgroundService
from ncompass.service.json_depth import MAX_JSON_DEPTH, exceeds_depth

__all__ = ["service"]


def nested(depth: int) -> bytes:
    return b'{"upload_id": "x", "feedback_context": {"a": ' + b"[" * depth + b"]" * depth + b"}}"


def test_depth_counts_brackets_but_not_brackets_inside_strings() -> None:
    assert not exceeds_depth(nested(MAX_JSON_DEPTH - 2))
    assert exceeds_depth(nested(MAX_JSON_DEPTH - 1))
    text_with_brackets = b'{"a": "' + b"[[[[{{{{" * 100 + b'\\" [[["}'
    assert not exceeds_depth(text_with_brackets)


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH, 100_000])
def test_deeply_nested_request_is_a_clear_400(service: BackgroundService, depth: int) -> None:
    answer = call(
        "POST",
        f"{service.url}/v1/jobs/analyze",
        nested(depth),
        headers={"Content-Type": "application/json"},
    )
    assert answer.status == 400
    assert f"nests deeper than {MAX_JSON_DEPTH} levels" in answer.json()["detail"]


def test_shallow_request_still_reaches_validation(service: BackgroundService) -> None:
    answer = call(
        "POST",
        f"{service.url}/v1/jobs/analyze",
        nested(3),
        headers={"Content-Type": "application/json"},
    )
    assert answer.status == 404  # the upload "x" does not exist: past the depth check
