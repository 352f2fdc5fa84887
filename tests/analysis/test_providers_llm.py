"""LLMProvider against a fake OpenAI-compatible chat server on loopback."""

from __future__ import annotations

import hashlib
import json
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ncompass.analysis import summarize_trace
from ncompass.analysis.providers import (
    BuiltinProvider,
    MarkerRequest,
    ProviderFallbackWarning,
    make_local_provider,
    make_provider,
)
from ncompass.analysis.providers.llm import LLMProvider, LLMSettings
from ncompass.analysis.providers.remote import RemoteProvider
from tests.service.endpoints import Request, closed_port_url, http_server, silent_listener

Reply = str | tuple[int, dict[str, Any]]


@dataclass
class FakeChat:
    """An OpenAI-compatible ``/v1/chat/completions``: answers with ``reply(request)``."""

    reply: Callable[[Request], Reply]
    requests: list[Request] = field(default_factory=list)
    url: str = ""

    def handle(self, request: Request) -> tuple[int, dict[str, str], bytes]:
        self.requests.append(request)
        if request.method != "POST" or request.path != "/v1/chat/completions":
            return 404, {}, b'{"error": {"message": "not found"}}'
        reply = self.reply(request)
        if isinstance(reply, tuple):
            status, body = reply
            return status, {"Content-Type": "application/json"}, json.dumps(body).encode()
        completion = {
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "model": request.json()["model"],
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": reply},
                    "finish_reason": "stop",
                }
            ],
        }
        return 200, {"Content-Type": "application/json"}, json.dumps(completion).encode()

    def provider(self, **settings: Any) -> LLMProvider:
        options = {"base_url": f"{self.url}/v1", "model": "test-model", "api_key": "sk-test"}
        return LLMProvider(LLMSettings(**{**options, **settings}))


@pytest.fixture
def fake_chat() -> Iterator[Callable[[Callable[[Request], Reply]], FakeChat]]:
    servers: list[Any] = []

    def start(reply: Callable[[Request], Reply]) -> FakeChat:
        chat = FakeChat(reply)
        context = http_server(chat.handle)
        chat.url = context.__enter__()
        servers.append(context)
        return chat

    yield start
    for context in servers:
        context.__exit__(None, None, None)


def narrative_for(summary: dict[str, Any]) -> str:
    """What a good model writes: the slowest marker, by name, with its real numbers."""
    marker = next(op for op in summary["structured"]["operations"] if op["kind"] == "marker")
    return (
        f"Most of the time is in `{marker['name']}`: {marker['cpu_total_us'] / 1000:.2f} ms over "
        f"{marker['calls']} calls, {marker['share_of_cpu_time']:.0%} of the CPU time. "
        "No GPU work was recorded."
    )


def answer(**body: Any) -> Callable[[Request], Reply]:
    return lambda request: json.dumps(body)


def fell_back(record: pytest.WarningsRecorder, reason: str) -> str:
    [warning] = [w for w in record if issubclass(w.category, ProviderFallbackWarning)]
    message = str(warning.message)
    assert "LLM test-model at http://127.0.0.1:" in message, message
    assert "using the builtin provider instead" in message
    assert reason in message, message
    return message


def test_a_good_narrative_is_added_and_the_numbers_are_untouched(
    fake_chat: Any, torch_trace: Path
) -> None:
    builtin = summarize_trace(torch_trace, top=5)
    chat = fake_chat(answer(narrative=narrative_for(builtin)))
    provider = chat.provider()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ProviderFallbackWarning)
        summary = provider.summarize(torch_trace, top=5)

    assert summary["markdown"].startswith(builtin["markdown"].rstrip("\n"))
    assert "## Narrative (written by the LLM `test-model`" in summary["markdown"]
    assert narrative_for(builtin) in summary["markdown"]
    narrative = summary["structured"].pop("narrative")
    assert narrative == {"model": "test-model", "text": narrative_for(builtin)}
    assert summary["structured"] == builtin["structured"]
    assert provider.last_failure is None

    [request] = chat.requests
    assert request.headers["authorization"] == "Bearer sk-test"
    body = request.json()
    assert body["model"] == "test-model" and body["temperature"] == 0
    assert body["response_format"] == {"type": "json_object"}
    system, user = body["messages"]
    assert system["role"] == "system" and "copied from the data" in system["content"]
    assert '"name": "model.forward"' in user["content"]


def test_the_users_question_is_asked(fake_chat: Any, torch_trace: Path) -> None:
    chat = fake_chat(answer(narrative="`model.linear` is the one to look at."))
    context = {"feedback_text": "why is the linear slow?", "target_module": "model.linear"}
    summary = chat.provider().summarize(torch_trace, feedback_context=context)
    assert summary["structured"]["focus"]["markers"] == ["model.linear"]
    user = chat.requests[0].json()["messages"][1]["content"]
    assert user.startswith("The user asks: why is the linear slow?")


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("Sure! The trace shows that the model is slow.", "the answer is not JSON"),
        ('["a list"]', "JSON but not an object"),
        ('{"story": "..."}', "the narrative is missing"),
        ('{"narrative": "`decoder.mlp` dominates."}', "it cites `decoder.mlp`"),
        ('{"narrative": "`model.forward` takes 987.6 ms."}', "it states '987.6 ms'"),
    ],
    ids=["prose", "list", "no-narrative", "invented-marker", "invented-number"],
)
def test_a_bad_answer_keeps_the_builtin_summary(
    fake_chat: Any, torch_trace: Path, content: str, reason: str
) -> None:
    provider = fake_chat(lambda request: content).provider()
    with pytest.warns(ProviderFallbackWarning) as record:
        summary = provider.summarize(torch_trace, top=5)
    fell_back(record, reason)
    assert summary == summarize_trace(torch_trace, top=5)
    assert provider.last_failure is not None and reason in provider.last_failure


def test_a_fenced_json_answer_is_accepted(fake_chat: Any, torch_trace: Path) -> None:
    text = "`model.activation` is cheap."
    reply = "```json\n" + json.dumps({"narrative": text}) + "\n```"
    summary = fake_chat(lambda request: reply).provider().summarize(torch_trace)
    assert summary["structured"]["narrative"]["text"] == text


def test_an_endpoint_without_json_mode_is_asked_again_without_it(
    fake_chat: Any, torch_trace: Path
) -> None:
    def reply(request: Request) -> Reply:
        if "response_format" in request.json():
            return 400, {"error": {"message": "response_format is not supported"}}
        return json.dumps({"narrative": "`model.forward` holds the rest."})

    chat = fake_chat(reply)
    summary = chat.provider().summarize(torch_trace)
    assert summary["structured"]["narrative"]["text"] == "`model.forward` holds the rest."
    assert len(chat.requests) == 2


def test_an_endpoint_answering_500_keeps_the_builtin_summary(
    fake_chat: Any, torch_trace: Path
) -> None:
    provider = fake_chat(lambda r: (500, {"error": {"message": "model overloaded"}})).provider()
    with pytest.warns(ProviderFallbackWarning) as record:
        summary = provider.summarize(torch_trace)
    fell_back(record, "HTTP 500: model overloaded")
    assert summary == summarize_trace(torch_trace)


def test_an_endpoint_that_is_down_keeps_the_builtin_summary(torch_trace: Path) -> None:
    url = closed_port_url()
    provider = LLMProvider(LLMSettings(f"{url}/v1", "test-model"))
    with pytest.warns(ProviderFallbackWarning) as record:
        summary = provider.summarize(torch_trace)
    message = fell_back(record, "connection refused")
    assert "check NCOMPASS_LLM_URL" in message
    assert summary == summarize_trace(torch_trace)


def test_an_endpoint_that_hangs_times_out(torch_trace: Path) -> None:
    with silent_listener() as url:
        provider = LLMProvider(LLMSettings(f"{url}/v1", "test-model", timeout_s=0.5))
        started = time.monotonic()
        with pytest.warns(ProviderFallbackWarning) as record:
            summary = provider.summarize(torch_trace)
        assert time.monotonic() - started < 3.0
    fell_back(record, "no answer within 0.5 s")
    assert summary == summarize_trace(torch_trace)


def test_a_time_budget_shortens_the_wait_and_ends_it_without_a_fallback(
    torch_trace: Path,
) -> None:
    """Inside a time budget (a service job's limit), the model's wait ends with the budget:
    no fallback answer, no warning, however long the model's own timeout."""
    from ncompass.analysis.providers.time_budget import TimeBudgetSpent, time_budget

    with silent_listener() as url:
        provider = LLMProvider(LLMSettings(f"{url}/v1", "test-model", timeout_s=60.0))
        started = time.monotonic()
        with warnings.catch_warnings():
            warnings.simplefilter("error", ProviderFallbackWarning)
            with pytest.raises(TimeBudgetSpent), time_budget(1.0):
                provider.summarize(torch_trace)
        waited = time.monotonic() - started
    assert 0.9 < waited < 30.0  # the budget's second (and a busy machine), not the 60 s
    with pytest.raises(TimeBudgetSpent), time_budget(0.0):  # nothing left: no request at all
        provider.propose_markers(marker_request())


def test_filtering_is_left_to_the_wrapped_provider(
    fake_chat: Any, torch_trace: Path, tmp_path: Path
) -> None:
    chat = fake_chat(answer(narrative="unused"))
    written = chat.provider().filter(torch_trace, tmp_path / "f.json")
    assert written == tmp_path / "f.json" and written.stat().st_size > 0
    assert chat.requests == []


# Marker proposals.

SOURCE = """\
import time


class Block:
    def forward(self, x):
        y = x * 2
        time.sleep(0.01)
        z = y + 1
        return z
"""


def marker_request(feedback: dict[str, Any] | None = None) -> MarkerRequest:
    return MarkerRequest(
        spec={
            "version": 1,
            "targets": [{"module": "demo.block", "functions": [{"qualname": "Block.forward"}]}],
        },
        summary={
            "operations": [
                {
                    "kind": "marker",
                    "name": "demo.block:Block.forward",
                    "calls": 3,
                    "cpu_self_us": 30000.0,
                }
            ]
        },
        markers=[
            {
                "name": "demo.block:Block.forward",
                "module": "demo.block",
                "qualname": "Block.forward",
                "start_line": 5,
                "end_line": 9,
            }
        ],
        feedback=feedback,
        sources={
            "demo.block": {
                "path": "demo/block.py",
                "sha256": hashlib.sha256(SOURCE.encode()).hexdigest(),
                "text": SOURCE,
            }
        },
    )


def test_good_proposals_are_checked_and_completed(fake_chat: Any) -> None:
    targets = [
        {
            "module": "demo.block",
            "ranges": [{"in": "Block.forward", "lines": [7, 7], "name": "block.sleep"}],
            "calls": [{"in": "Block.forward", "call": "time.sleep", "name": "block.sleep_call"}],
        }
    ]
    chat = fake_chat(answer(targets=targets, reason="the sleep is the slow part"))
    feedback = {
        "feedback_text": "what is slow in forward?",
        "target_module": "demo.block",
        "start_line": 5,
        "end_line": 9,
    }
    with warnings.catch_warnings():
        warnings.simplefilter("error", ProviderFallbackWarning)
        proposal = chat.provider().propose_markers(marker_request(feedback))
    [target] = proposal or []
    assert target["sha256"] == marker_request().sources["demo.block"]["sha256"]
    assert target["ranges"] == [
        {
            "in": "Block.forward",
            "lines": [7, 7],
            "first": "time.sleep(0.01)",
            "last": "time.sleep(0.01)",
            "name": "block.sleep",
        }
    ]
    user = chat.requests[0].json()["messages"][1]["content"]
    assert "what is slow in forward?" in user
    assert "    7|         time.sleep(0.01)" in user


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("not json at all", "the answer is not JSON"),
        (
            json.dumps(
                {
                    "targets": [
                        {
                            "module": "demo.block",
                            "ranges": [{"in": "Block.forward", "lines": [9, 7]}],
                        }
                    ]
                }
            ),
            "not a valid spec",
        ),
        (
            json.dumps(
                {
                    "targets": [
                        {
                            "module": "demo.block",
                            "functions": [{"qualname": "Block.forward", "colour": "red"}],
                        }
                    ]
                }
            ),
            "not a valid spec",
        ),
        (
            json.dumps({"targets": [{"module": "demo.other", "functions": [{"qualname": "f"}]}]}),
            "not a module it was shown",
        ),
        (json.dumps({"targets": "all of them"}), "must be a list"),
    ],
    ids=["invalid-json", "reversed-lines", "unknown-key", "invented-module", "not-a-list"],
)
def test_bad_proposals_fall_back_to_the_wrapped_provider(
    fake_chat: Any, reply: str, reason: str
) -> None:
    provider = fake_chat(lambda request: reply).provider()
    with pytest.warns(ProviderFallbackWarning) as record:
        assert provider.propose_markers(marker_request()) is None
    fell_back(record, reason)


def test_no_proposal_leaves_it_to_the_wrapped_provider(fake_chat: Any) -> None:
    provider = fake_chat(answer(targets=[])).provider()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ProviderFallbackWarning)
        assert provider.propose_markers(marker_request()) is None


def test_proposals_when_the_endpoint_is_down() -> None:
    provider = LLMProvider(LLMSettings(f"{closed_port_url()}/v1", "test-model"))
    with pytest.warns(ProviderFallbackWarning, match="propose markers failed: connection refused"):
        assert provider.propose_markers(marker_request()) is None


# Configuration by environment.


def test_environment_turns_the_llm_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NCOMPASS_ANALYSIS_URL", raising=False)
    monkeypatch.setenv("NCOMPASS_LLM_URL", "http://127.0.0.1:9/v1/")
    monkeypatch.setenv("NCOMPASS_LLM_MODEL", "qwen")
    monkeypatch.setenv("NCOMPASS_LLM_API_KEY", "sk-x")
    monkeypatch.setenv("NCOMPASS_LLM_TIMEOUT_S", "12.5")
    provider = make_provider()
    assert isinstance(provider, LLMProvider) and isinstance(provider.wrapped, BuiltinProvider)
    assert provider.settings == LLMSettings("http://127.0.0.1:9/v1", "qwen", "sk-x", 12.5)
    assert provider.name == "llm qwen + builtin"
    over_remote = make_provider("http://127.0.0.1:9")
    assert isinstance(over_remote, LLMProvider)
    assert isinstance(over_remote.wrapped, RemoteProvider)
    assert isinstance(make_local_provider(), LLMProvider)


def test_without_environment_there_is_no_llm(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("NCOMPASS_LLM_URL", "NCOMPASS_ANALYSIS_URL"):
        monkeypatch.delenv(name, raising=False)
    assert isinstance(make_provider(), BuiltinProvider)


@pytest.mark.parametrize(
    ("variables", "reason"),
    [
        ({"NCOMPASS_LLM_URL": "http://127.0.0.1:9/v1"}, "NCOMPASS_LLM_MODEL is not"),
        (
            {
                "NCOMPASS_LLM_URL": "http://127.0.0.1:9/v1",
                "NCOMPASS_LLM_MODEL": "m",
                "NCOMPASS_LLM_TIMEOUT_S": "soon",
            },
            "'soon' is not a number",
        ),
    ],
)
def test_an_incomplete_configuration_warns_and_stays_builtin(
    monkeypatch: pytest.MonkeyPatch, variables: dict[str, str], reason: str
) -> None:
    for name in ("NCOMPASS_ANALYSIS_URL", "NCOMPASS_LLM_MODEL", "NCOMPASS_LLM_TIMEOUT_S"):
        monkeypatch.delenv(name, raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    with pytest.warns(ProviderFallbackWarning, match=reason):
        assert isinstance(make_provider(), BuiltinProvider)


def test_the_llm_narrates_numbers_computed_by_the_service(
    fake_chat: Any, torch_trace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("fastapi", reason="the service needs the server extra")
    from ncompass.service import BackgroundService

    builtin = summarize_trace(torch_trace)
    chat = fake_chat(answer(narrative=narrative_for(builtin)))
    monkeypatch.setenv("NCOMPASS_LLM_URL", f"{chat.url}/v1")
    monkeypatch.setenv("NCOMPASS_LLM_MODEL", "test-model")
    with BackgroundService(provider=BuiltinProvider(), storage_dir=tmp_path / "s") as service:
        provider = make_provider(service.url)
        with warnings.catch_warnings():
            warnings.simplefilter("error", ProviderFallbackWarning)
            summary = provider.summarize(torch_trace)
    assert summary["structured"].pop("narrative")["text"] == narrative_for(builtin)
    assert summary["structured"] == builtin["structured"]
