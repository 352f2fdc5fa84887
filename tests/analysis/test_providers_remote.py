"""RemoteProvider against a real service on loopback, and against services that fail."""

from __future__ import annotations

import json
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ncompass.analysis import summarize_trace
from ncompass.analysis.providers import (
    BuiltinProvider,
    MarkerRequest,
    ProviderFallbackWarning,
    make_provider,
)
from ncompass.analysis.providers.remote import RemoteProvider
from ncompass.errors import TraceError
from ncompass.service import BackgroundService, ServiceLimits
from ncompass.traces import TraceReader, filter_trace
from tests.service.conftest import SERVER_EXTRA
from tests.service.doubles import BrokenProvider, ProposingProvider
from tests.service.endpoints import Request, closed_port_url, http_server, silent_listener
from tests.traces.builders import shared_trace


def running_service(tmp_path: Path, **options: Any) -> BackgroundService:
    """A service on loopback (the tests of a client talking to nothing need no server extra)."""
    pytest.importorskip("fastapi", reason=SERVER_EXTRA)
    return BackgroundService(storage_dir=tmp_path / "store", **options)


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BackgroundService]:
    with running_service(tmp_path_factory.mktemp("service")) as running:
        yield running


def uploads_on(service: BackgroundService) -> int:
    store = service.app.state.store
    return sum(1 for item in store._items.values() if item.kind == "upload")


def remote_only(provider: RemoteProvider, call: Any) -> Any:
    """Run ``call`` and fail on any fallback warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", ProviderFallbackWarning)
        result = call()
    assert provider.last_failure is None
    return result


def test_make_provider_with_a_base_url_summarizes_on_the_service(
    service: BackgroundService, torch_trace: Path
) -> None:
    provider = make_provider(service.url)
    assert isinstance(provider, RemoteProvider)
    assert provider.name == f"remote {service.url}"
    summary = remote_only(provider, lambda: provider.summarize(torch_trace, top=5))
    # Exactly what the built-in engine says locally, local path included.
    assert summary == summarize_trace(torch_trace, top=5)


def test_environment_variable_selects_the_service(
    service: BackgroundService, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NCOMPASS_ANALYSIS_URL", service.url)
    provider = make_provider()
    assert isinstance(provider, RemoteProvider) and provider.base_url == service.url


def test_shared_gpu_trace_summary_and_feedback(service: BackgroundService) -> None:
    trace = shared_trace("trace_filter")
    provider = RemoteProvider(service.url, BuiltinProvider())
    before = uploads_on(service)
    summary = remote_only(provider, lambda: provider.summarize(trace, top=8))
    assert summary == summarize_trace(trace, top=8)
    context = {"feedback_text": "decoder?", "target_module": "decoder"}
    focused = remote_only(
        provider, lambda: provider.summarize(trace, top=8, feedback_context=context)
    )
    assert focused == summarize_trace(trace, top=8, feedback_context=context)
    # The trace went up once; the second job reused the upload.
    assert uploads_on(service) == before + 1


def test_an_expired_upload_is_sent_again(service: BackgroundService, torch_trace: Path) -> None:
    provider = RemoteProvider(service.url, BuiltinProvider())
    remote_only(provider, lambda: provider.summarize(torch_trace))
    [upload_id] = provider._uploads.values()
    assert service.app.state.store.delete(upload_id)
    summary = remote_only(provider, lambda: provider.summarize(torch_trace, top=3))
    assert summary == summarize_trace(torch_trace, top=3)
    assert list(provider._uploads.values()) != [upload_id]


@pytest.mark.parametrize("suffix", [".json", ".json.gz"])
def test_filter_downloads_the_filtered_trace(
    service: BackgroundService, tmp_path: Path, suffix: str
) -> None:
    trace = shared_trace("trace_filter")
    provider = RemoteProvider(service.url, BuiltinProvider())
    output = tmp_path / "out" / f"filtered{suffix}"
    written = remote_only(provider, lambda: provider.filter(trace, output, min_duration_us=10.0))
    assert written == output
    local = filter_trace(trace, tmp_path / f"local{suffix}", min_duration_us=10.0)
    assert output.read_bytes()[:2] == local.read_bytes()[:2]  # gzip magic, or "{"
    assert list(TraceReader(output)) == list(TraceReader(local))
    assert not [p for p in output.parent.iterdir() if p != output]  # no temporary left


def test_a_corrupt_trace_is_the_users_error_not_a_fallback(
    service: BackgroundService, tmp_path: Path
) -> None:
    trace = tmp_path / "cut.json"
    trace.write_text('{"traceEvents": [{"ph": "X", "name": "a"')
    provider = RemoteProvider(service.url, BuiltinProvider())
    with warnings.catch_warnings():
        warnings.simplefilter("error", ProviderFallbackWarning)
        with pytest.raises(TraceError, match=r"analysis service at .* cannot read .*cut\.json"):
            provider.summarize(trace)


def test_a_missing_trace_gets_the_local_error(service: BackgroundService, tmp_path: Path) -> None:
    provider = RemoteProvider(service.url, BuiltinProvider())
    with pytest.raises(TraceError, match=r"nothing\.json"):
        provider.summarize(tmp_path / "nothing.json")


def fallback_summary(
    provider: RemoteProvider, trace: Path, match: str, max_seconds: float = 5.0
) -> dict[str, Any]:
    """Summarize through a failing service: one warning naming the URL and the cause, the
    built-in engine's answer, quickly."""
    started = time.monotonic()
    with pytest.warns(ProviderFallbackWarning) as record:
        summary = provider.summarize(trace, top=3)
    elapsed = time.monotonic() - started
    [warning] = [w for w in record if issubclass(w.category, ProviderFallbackWarning)]
    message = str(warning.message)
    assert f"analysis service at {provider.base_url}" in message, message
    assert "using the builtin provider instead" in message
    assert match in message, message
    assert elapsed < max_seconds
    assert summary == summarize_trace(trace, top=3)
    return summary


def test_connection_refused_falls_back_at_once(torch_trace: Path) -> None:
    url = closed_port_url()
    provider = RemoteProvider(url, BuiltinProvider())
    fallback_summary(provider, torch_trace, "connection refused", max_seconds=2.0)
    assert provider.last_failure is not None


def test_a_service_that_never_answers_times_out(torch_trace: Path) -> None:
    with silent_listener() as url:
        provider = RemoteProvider(url, BuiltinProvider(), timeout_s=0.5)
        fallback_summary(provider, torch_trace, "no answer within 0.5 s", max_seconds=3.0)
        # It is not asked again for a while: the next call does not wait for it.
        started = time.monotonic()
        fallback_summary(provider, torch_trace, "not retried for another")
        assert time.monotonic() - started < 0.5


def test_a_service_answering_500_falls_back(torch_trace: Path) -> None:
    def broken(request: Request) -> tuple[int, dict[str, str], bytes]:
        return 500, {"Content-Type": "text/plain"}, b"Internal Server Error"

    with http_server(broken) as url:
        provider = RemoteProvider(url, BuiltinProvider())
        fallback_summary(provider, torch_trace, "HTTP 500: Internal Server Error")


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (b"<html>a web page</html>", "not JSON"),
        (b'{"status": "ok"}', "not an ncompass analysis service"),
        (b'{"service": "ncompass", "api": 99, "limits": {}}', "speaks API 99"),
    ],
    ids=["html", "other-json", "other-api"],
)
def test_a_service_answering_garbage_falls_back(
    torch_trace: Path, answer: bytes, reason: str
) -> None:
    def garbage(request: Request) -> tuple[int, dict[str, str], bytes]:
        return 200, {"Content-Type": "application/json"}, answer

    with http_server(garbage) as url:
        provider = RemoteProvider(url, BuiltinProvider())
        fallback_summary(provider, torch_trace, reason)


def test_a_malformed_summary_falls_back(service: BackgroundService, torch_trace: Path) -> None:
    """A service that looks right until the result: the summary itself is checked."""

    def half(request: Request) -> tuple[int, dict[str, str], bytes]:
        path = request.path
        if path.endswith("/result"):
            return 200, {}, b'{"markdown": "# hi"}'
        if path == "/v1/health":
            health = {"service": "ncompass", "api": 1}
            health["limits"] = {"max_upload_bytes": 10**9, "max_request_bytes": 10**6}
            return 200, {}, json.dumps(health).encode()
        if path.startswith("/v1/uploads"):
            return 201, {}, b'{"upload_id": "u"}'
        job = {"job_id": "j", "status": "done", "result_url": "/v1/jobs/j/result"}
        return 202, {}, json.dumps(job).encode()

    with http_server(half) as url:
        provider = RemoteProvider(url, BuiltinProvider())
        fallback_summary(provider, torch_trace, "not a summary")


def test_a_failing_job_falls_back(tmp_path: Path, torch_trace: Path) -> None:
    with running_service(tmp_path, provider=BrokenProvider()) as service:
        provider = RemoteProvider(service.url, BuiltinProvider())
        fallback_summary(provider, torch_trace, "the summarize job failed: internal error")


def test_a_job_that_takes_too_long_falls_back(tmp_path: Path, torch_trace: Path) -> None:
    from tests.service.doubles import GatedProvider

    gated = GatedProvider()
    with running_service(tmp_path, provider=gated) as service:
        provider = RemoteProvider(service.url, BuiltinProvider(), job_timeout_s=2.0)
        fallback_summary(provider, torch_trace, "still running after 2 s")
        gated.gate.set()


def test_a_trace_over_the_upload_limit_is_not_sent(tmp_path: Path, torch_trace: Path) -> None:
    limits = ServiceLimits(max_upload_bytes=1024, max_storage_bytes=1 << 20)
    with running_service(tmp_path, limits=limits) as service:
        provider = RemoteProvider(service.url, BuiltinProvider())
        fallback_summary(provider, torch_trace, "the service accepts uploads up to 1 KiB")
        assert uploads_on(service) == 0


def test_a_service_with_a_token(
    tmp_path: Path, torch_trace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with running_service(tmp_path, token="s3cret") as service:
        monkeypatch.delenv("NCOMPASS_ANALYSIS_TOKEN", raising=False)
        without = RemoteProvider(service.url, BuiltinProvider())
        fallback_summary(without, torch_trace, "set NCOMPASS_ANALYSIS_TOKEN")
        wrong = RemoteProvider(service.url, BuiltinProvider(), token="guess")
        fallback_summary(wrong, torch_trace, "set NCOMPASS_ANALYSIS_TOKEN")
        assert uploads_on(service) == 0
        monkeypatch.setenv("NCOMPASS_ANALYSIS_TOKEN", "s3cret")
        provider = make_provider(service.url)
        assert remote_only(provider, lambda: provider.summarize(torch_trace, top=3))


# Marker proposals.

MODULE_TEXT = "def forward(x):\n    y = x + 1\n    z = y * 2\n    return z\n"


def marker_request() -> MarkerRequest:
    import hashlib

    digest = hashlib.sha256(MODULE_TEXT.encode()).hexdigest()
    return MarkerRequest(
        spec={
            "version": 1,
            "targets": [{"module": "demo.model", "functions": [{"qualname": "forward"}]}],
        },
        summary={"operations": []},
        markers=[{"name": "demo.model:forward", "module": "demo.model", "qualname": "forward"}],
        sources={"demo.model": {"path": "demo/model.py", "sha256": digest, "text": MODULE_TEXT}},
    )


def test_service_proposals_are_checked_and_completed(tmp_path: Path) -> None:
    targets = [
        {"module": "demo.model", "ranges": [{"in": "forward", "lines": [2, 3], "name": "yz"}]}
    ]
    with running_service(tmp_path, provider=ProposingProvider(targets)) as service:
        provider = RemoteProvider(service.url, BuiltinProvider())
        proposal = remote_only(provider, lambda: provider.propose_markers(marker_request()))
    [target] = proposal
    assert target["sha256"] == marker_request().sources["demo.model"]["sha256"]
    assert target["ranges"] == [
        {"in": "forward", "lines": [2, 3], "first": "y = x + 1", "last": "z = y * 2", "name": "yz"}
    ]


def test_a_service_without_proposals_returns_none(service: BackgroundService) -> None:
    provider = RemoteProvider(service.url, BuiltinProvider())
    assert remote_only(provider, lambda: provider.propose_markers(marker_request())) is None


@pytest.mark.parametrize(
    ("target", "reason"),
    [
        ({"module": "os", "functions": [{"qualname": "system"}]}, "not a module it was shown"),
        (
            {"module": "demo.model", "replace": [{"name": "forward", "with": "evil:f"}]},
            "not replace code",
        ),
        (
            {
                "module": "demo.model",
                "functions": [{"qualname": "forward", "context": "os:system"}],
            },
            "context 'os:system'",
        ),
        (
            {
                "module": "demo.model",
                "functions": [{"qualname": "forward", "name": "{__import__('os')}"}],
            },
            "evaluated as code",
        ),
        (
            {"module": "demo.model", "ranges": [{"in": "forward", "lines": [2, 30]}]},
            "the module has 4 lines",
        ),
        (
            {"module": "demo.model", "functions": [{"qualname": "forward", "colour": "red"}]},
            "not a valid spec",
        ),
    ],
    ids=["unknown-module", "replace", "custom-context", "template-name", "lines", "schema"],
)
def test_unsafe_or_invalid_service_proposals_are_refused(
    tmp_path: Path, target: dict[str, Any], reason: str
) -> None:
    with running_service(tmp_path, provider=ProposingProvider([target])) as service:
        provider = RemoteProvider(service.url, BuiltinProvider())
        with pytest.warns(
            ProviderFallbackWarning, match="the proposed markers were refused"
        ) as record:
            assert provider.propose_markers(marker_request()) is None
    assert reason in str(record[0].message)
