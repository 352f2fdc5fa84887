"""``ProfilingSession``: the seed SDK's examples, run as written against a small planted model."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ncompass.importer.hook import disable_rewrites
from ncompass.trace import ProfilingSession
from tests.session import planted
from tests.support.lines import line_of

SOURCE = Path(planted.__file__).read_text()
MODULE = "tests.session.planted"


@pytest.fixture(autouse=True)
def _rewrites_off() -> Iterator[None]:
    yield
    disable_rewrites()


def run_inference() -> None:
    planted.run(1)


class CountingProvider:
    """Counts summaries actually computed (to see the cache at work)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = inner.name
        self.summaries = 0

    def summarize(self, trace_path: Path, **kwargs: Any) -> dict[str, Any]:
        self.summaries += 1
        return self.inner.summarize(trace_path, **kwargs)

    def filter(self, *args: Any, **kwargs: Any) -> Path:
        return self.inner.filter(*args, **kwargs)

    def propose_markers(self, request: Any) -> None:
        return None


def test_the_seed_workflow_runs_as_written(tmp_path: Path) -> None:
    session = ProfilingSession(
        trace_output_dir=str(tmp_path / "traces"),
        cache_dir=str(tmp_path / "cache"),
        session_name="my_model_optimization",
    )
    counting = CountingProvider(session.provider)
    session.provider = counting

    # Step 1: initial profiling with minimal markers
    trace_path = session.run_profile(run_inference, trace_name_suffix="initial")
    assert Path(trace_path).name == "my_model_optimization-i001-initial.json"

    # Step 2: analysis
    summary = session.get_trace_summary(trace_path)
    assert set(summary) == {"markdown", "structured"}
    assert {"operations", "bottlenecks", "recommendations"} <= set(summary["structured"])
    assert session.get_trace_summary(trace_path) == summary
    assert counting.summaries == 1  # the second one came from the cache

    # Step 3: feedback on the method that is slow
    config = session.submit_feedback(
        feedback_text="Why does compute take most of the time?",
        target_module=MODULE,
        start_line=line_of(SOURCE, "def compute"),
        end_line=line_of(SOURCE, "return total"),
    )
    assert config["targets"][-1]["module"] == MODULE

    # Step 4: apply and re-run
    applied = session.apply_targeted_markers()
    assert applied["targets"]
    assert (tmp_path / "traces" / "my_model_optimization" / "specs" / "v001.yaml").exists()
    trace_path = session.run_profile(run_inference, trace_name_suffix="targeted_attention")

    # Step 5: analyse the targeted results
    summary = session.get_trace_summary(
        trace_path, feedback_context={"feedback_text": "compute", "target_module": MODULE}
    )
    record = session.iterations[-1]
    hottest, _ = record.hottest(1)[0]
    assert hottest.startswith(f"Pipeline.compute:{line_of(SOURCE, 'for step')} for step")

    filtered = session.filter_trace(
        trace_path=trace_path,
        include_cuda_kernels=True,
        include_direct_children=False,
        min_duration_us=100.0,
    )
    names = {e["name"] for e in json.loads(Path(filtered).read_text())["traceEvents"]}
    assert hottest in names

    session.save_config(name="attention_focused")
    session.load_config(name="attention_focused")
    session.apply_targeted_markers()
    assert session.load_trace_summary(trace_name_filter="targeted_attention") == summary

    session.reset()
    assert session.config.full_trace_mode and not session.config.targets


def test_drilling_without_feedback_goes_one_level_deeper_each_time(tmp_path: Path) -> None:
    session = ProfilingSession(str(tmp_path), session_name="drill")
    hottest: list[str] = []
    for _ in range(8):
        session.run_profile(run_inference)
        hottest.append(session.iterations[-1].hottest(1)[0][0])
        session.apply_targeted_markers()
    # the whole run → run_inference → run → its loop → forward → `return self.compute(y)` →
    # compute → its loop → the planted statement
    assert hottest[0] == "ncompass.full_trace"
    assert hottest[3] == f"{MODULE}:Pipeline.forward"
    assert hottest[5] == f"{MODULE}:Pipeline.compute"
    assert hottest[6].startswith(f"Pipeline.compute:{line_of(SOURCE, 'for step')} for step")
    assert hottest[7].startswith(f"Pipeline.compute:{line_of(SOURCE, 'spin(SLOW)  #')} spin(SLOW)")
    # each iteration kept its spec version and trace
    versions = [r.spec_version for r in session.iterations]
    assert versions == sorted(versions) and len(set(versions)) == len(versions)
    again = ProfilingSession(str(tmp_path), session_name="drill")
    assert [r.iteration for r in again.iterations] == list(range(1, 9))


def test_a_new_session_starts_from_a_full_trace_not_the_last_sessions_markers(
    tmp_path: Path,
) -> None:
    first = ProfilingSession(str(tmp_path), session_name="first")
    first.run_profile(run_inference)
    compute = line_of(SOURCE, "def compute")
    first.submit_feedback("compute?", MODULE, compute, compute + 7)
    first.apply_targeted_markers()
    first.run_profile(run_inference)
    assert f"{MODULE}:Pipeline.compute" in first.iterations[-1].markers

    second = ProfilingSession(str(tmp_path), session_name="second")
    second.run_profile(run_inference)
    assert set(second.iterations[-1].markers) == {"ncompass.full_trace"}


def test_markers_the_user_enabled_themselves_stay_on(tmp_path: Path) -> None:
    from ncompass.trace import enable_rewrites

    enable_rewrites(
        {
            "version": 1,
            "targets": [{"module": MODULE, "functions": [{"qualname": "Pipeline.prepare"}]}],
        }
    )
    session = ProfilingSession(str(tmp_path), session_name="manual")
    session.run_profile(run_inference)
    assert f"{MODULE}:Pipeline.prepare" in session.iterations[-1].markers


def test_code_that_runs_its_own_profiler_gives_its_trace(tmp_path: Path) -> None:
    import torch

    def with_own_profiler() -> None:
        with (
            torch.profiler.profile() as profiler,
            torch.profiler.record_function("users_own_marker"),
        ):
            planted.spin(0.001)
        profiler.export_chrome_trace(str(tmp_path / "custom_profiler_trace.json"))

    session = ProfilingSession(str(tmp_path), session_name="custom")
    trace = session.run_profile(with_own_profiler)
    assert Path(trace).name == "custom_profiler_trace.json"
    assert "users_own_marker" in session.iterations[-1].markers
    assert "written by the profiled code" in (session.iterations[-1].note or "")


def test_other_json_files_the_code_writes_are_not_taken_for_its_trace(tmp_path: Path) -> None:
    def writes_results() -> None:
        planted.spin(0.001)
        (tmp_path / "results.json").write_text(json.dumps({"accuracy": 0.9}))
        (tmp_path / "partial.json").write_text('{"traceEvents": [{"ph": "X", "name": "cut')

    session = ProfilingSession(str(tmp_path), session_name="results")
    trace = session.run_profile(writes_results)
    assert Path(trace).name == "results-i001.json"  # the session's own trace
    assert session.iterations[-1].note is None
    assert "ncompass.full_trace" in session.iterations[-1].markers


def test_a_trace_written_by_another_process_is_picked_up(tmp_path: Path) -> None:
    script = (
        "import sys, torch\n"
        "with torch.profiler.profile() as p:\n"
        "    torch.ones(3) + 1\n"
        "p.export_chrome_trace(sys.argv[1])\n"
    )

    def like_vllm() -> None:  # the engine profiles in a worker process of its own
        target = tmp_path / "worker" / "engine.pt.trace.json"
        target.parent.mkdir()
        subprocess.run([sys.executable, "-c", script, str(target)], check=True)

    session = ProfilingSession(str(tmp_path), session_name="vllm")
    trace = session.run_profile(like_vllm)
    assert Path(trace) == tmp_path / "worker" / "engine.pt.trace.json"


def test_bad_input_is_a_clear_error(tmp_path: Path) -> None:
    from ncompass.errors import NcompassError

    session = ProfilingSession(str(tmp_path), session_name="bad")
    with pytest.raises(NcompassError, match="no trace yet"):
        session.get_trace_summary()
    with pytest.raises(NcompassError, match="not found"):
        session.get_trace_summary(str(tmp_path / "missing.json"))
    with pytest.raises(NcompassError, match="no config named 'nothing'"):
        session.load_config("nothing")
    with pytest.raises(NcompassError, match="not found"):
        session.submit_feedback("?", "no_such_module_xyz", 1, 2)
    with pytest.raises(NcompassError, match="may only use"):
        ProfilingSession(str(tmp_path), session_name="../escape")


def test_filtering_never_overwrites_a_kept_trace(tmp_path: Path) -> None:
    from ncompass.errors import NcompassError

    session = ProfilingSession(str(tmp_path), session_name="keep")
    first = session.run_profile(run_inference)
    second = session.run_profile(run_inference)
    before = Path(first).read_bytes()
    for output in (first, second):
        with pytest.raises(NcompassError, match="is a trace this session keeps"):
            session.filter_trace(first, output_path=output)
    assert Path(first).read_bytes() == before
    assert session.filter_trace(first).endswith("keep-i001.filtered.json")


def test_a_corrupt_cache_entry_is_recomputed(tmp_path: Path) -> None:
    session = ProfilingSession(str(tmp_path), session_name="cache")
    trace = session.run_profile(run_inference)
    summary = session.get_trace_summary(trace)
    for entry in (tmp_path / "cache" / "summaries").glob("*.json"):
        entry.write_text("{not json")
    assert session.get_trace_summary(trace) == summary


class FallingBackOnceProvider(CountingProvider):
    """Like a remote provider whose service is down for the first request only."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.last_failure: str | None = None

    def summarize(self, trace_path: Path, **kwargs: Any) -> dict[str, Any]:
        self.last_failure = "connection refused" if self.summaries == 0 else None
        return super().summarize(trace_path, **kwargs)


def test_a_fallback_summary_is_not_served_from_the_cache(tmp_path: Path) -> None:
    session = ProfilingSession(str(tmp_path), session_name="fallback")
    provider = FallingBackOnceProvider(session.provider)
    session.provider = provider
    trace = session.run_profile(run_inference)
    session.get_trace_summary(trace)  # answered by the fallback: kept, but not served again
    assert session.load_trace_summary("fallback") is not None
    session.get_trace_summary(trace)  # the provider is asked again, and answers
    session.get_trace_summary(trace)  # now from the cache
    assert provider.summaries == 2


def test_proposing_markers_after_a_fallback_summary_does_not_ask_again(tmp_path: Path) -> None:
    session = ProfilingSession(str(tmp_path), session_name="down")
    provider = FallingBackOnceProvider(session.provider)
    provider.name = "service-down"  # not the built-in one: it is asked for markers first
    session.provider = provider
    session.run_profile(run_inference)
    session.get_trace_summary()  # falls back
    compute = line_of(SOURCE, "def compute")
    session.submit_feedback("compute?", MODULE, compute, compute + 7)  # needs the last summary
    assert provider.summaries == 1  # the fallback answer was good enough for the proposal
    session.get_trace_summary()  # a user asking again still asks the provider
    assert provider.summaries == 2


def test_markers_proposed_by_an_llm_are_checked_and_applied(tmp_path: Path) -> None:
    from ncompass.analysis.providers import ProviderFallbackWarning
    from ncompass.analysis.providers.llm import LLMProvider, LLMSettings
    from tests.service.endpoints import Request, http_server

    slow = line_of(SOURCE, "spin(SLOW)  #")
    proposal = {
        "targets": [
            {
                "module": MODULE,
                "ranges": [{"in": "Pipeline.compute", "lines": [slow, slow], "name": "llm.spin"}],
                "functions": [{"qualname": "Pipeline.prepare", "name": "llm.prepare"}],
            }
        ],
        "reason": "the spin in the loop",
    }
    asked: list[dict[str, Any]] = []

    def chat(request: Request) -> tuple[int, dict[str, str], bytes]:
        body = request.json()
        if "next profiling markers" not in body["messages"][0]["content"]:
            return 503, {}, b'{"error": {"message": "narratives are not under test"}}'
        asked.append(body)
        message = {"role": "assistant", "content": json.dumps(proposal)}
        answer = {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}
        return 200, {"Content-Type": "application/json"}, json.dumps(answer).encode()

    with http_server(chat) as url, pytest.warns(ProviderFallbackWarning) as warned:
        session = ProfilingSession(str(tmp_path), session_name="llm")
        session.provider = LLMProvider(LLMSettings(base_url=f"{url}/v1", model="test-model"))
        session.run_profile(run_inference)
        compute = line_of(SOURCE, "def compute")
        session.submit_feedback("where in compute?", MODULE, compute, compute + 7)
        session.apply_targeted_markers()
        trace = session.run_profile(run_inference)
    # only the narratives fell back; the proposal was used
    assert not [w for w in warned if "propose markers" in str(w.message)]
    [request] = asked
    assert MODULE in request["messages"][-1]["content"]  # the source was shown
    assert session.last_proposal is not None
    assert any("llm test-model" in reason for reason in session.last_proposal.reasons)
    names = {e["name"] for e in json.loads(Path(trace).read_text())["traceEvents"]}
    assert {"llm.spin", "llm.prepare"} <= names


class ProposingProvider(CountingProvider):
    """A non-built-in provider whose proposal is fixed."""

    def __init__(self, inner: Any, targets: list[dict[str, Any]]) -> None:
        super().__init__(inner)
        self.name = "proposing"
        self.targets = targets

    def propose_markers(self, request: Any) -> Any:
        return self.targets


def test_feedback_pointing_at_no_code_is_an_error_whoever_proposes(tmp_path: Path) -> None:
    from ncompass.errors import NcompassError

    targets = [{"module": MODULE, "functions": [{"qualname": "Pipeline.prepare"}]}]
    session = ProfilingSession(str(tmp_path), session_name="bad-feedback")
    session.provider = ProposingProvider(session.provider, targets)
    session.run_profile(run_inference)
    with pytest.raises(NcompassError, match="past the end"):
        session.submit_feedback("?", MODULE, 900, 901)
    assert session.pending is None


def test_a_proposal_that_matches_nothing_leaves_it_to_the_planner(tmp_path: Path) -> None:
    session = ProfilingSession(str(tmp_path), session_name="nothing")
    targets = [{"module": MODULE, "functions": [{"qualname": "Pipeline.missing"}]}]
    session.provider = ProposingProvider(session.provider, targets)
    session.run_profile(run_inference)
    compute = line_of(SOURCE, "def compute")
    config = session.submit_feedback("compute?", MODULE, compute, compute + 7)
    assert session.last_proposal is not None
    assert any("Pipeline.missing" in reason for reason in session.last_proposal.dropped)
    [target] = config["targets"]
    assert any(r["first"] == "for step in range(3):" for r in target["ranges"])  # one level finer


def test_the_seed_workflow_through_an_analysis_service(tmp_path: Path) -> None:
    import warnings

    pytest.importorskip("fastapi", reason="the service needs the server extra")
    from ncompass.analysis.providers import ProviderFallbackWarning
    from ncompass.service import BackgroundService

    with BackgroundService(storage_dir=tmp_path / "store") as service, warnings.catch_warnings():
        warnings.simplefilter("error", ProviderFallbackWarning)  # nothing may fall back
        session = ProfilingSession(str(tmp_path / "traces"), base_url=service.url)
        trace = session.run_profile(run_inference)
        summary = session.get_trace_summary(trace)
        assert summary["markdown"].startswith("# Trace summary")
        compute = line_of(SOURCE, "def compute")
        session.submit_feedback("compute?", MODULE, compute, compute + 7)
        session.apply_targeted_markers()
        trace = session.run_profile(run_inference)
        filtered = session.filter_trace(trace, min_duration_us=100.0)
    names = {e["name"] for e in json.loads(Path(filtered).read_text())["traceEvents"]}
    assert f"{MODULE}:Pipeline.compute" in names
    assert session.provider.name == f"remote {service.url}"


def test_a_session_whose_service_is_down_falls_back_at_once(tmp_path: Path) -> None:
    import time

    from ncompass.analysis.providers import ProviderFallbackWarning
    from tests.service.endpoints import closed_port_url

    url = closed_port_url()
    session = ProfilingSession(str(tmp_path), base_url=url)
    trace = session.run_profile(run_inference)
    started = time.perf_counter()
    with pytest.warns(ProviderFallbackWarning, match=f"analysis service at {url}"):
        summary = session.get_trace_summary(trace)
    assert time.perf_counter() - started < 10  # no hang
    assert "structured" in summary


def test_a_service_that_is_down_is_reported_at_the_users_line(tmp_path: Path) -> None:
    from ncompass.analysis.providers import ProviderFallbackWarning
    from tests.service.endpoints import closed_port_url

    session = ProfilingSession(str(tmp_path), session_name="down", base_url=closed_port_url())
    trace = session.run_profile(run_inference)
    with pytest.warns(ProviderFallbackWarning) as warned:
        session.get_trace_summary(trace)
    assert {(w.filename, w.lineno) for w in warned} == {(__file__, line_of_this_call() - 1)}


def line_of_this_call() -> int:
    return sys._getframe(1).f_lineno
