"""Session history: iterations compared with ``ncompass.analysis.compare`` (per-call samples,
bootstrap interval of the ratio), on trace files with planted per-call times."""

from __future__ import annotations

from pathlib import Path

import pytest

from ncompass.session.history import IterationRecord, MarkerTime, compare, compare_iterations
from ncompass.session.report import history_json, history_report
from tests.traces.builders import TraceBuilder

CALLS = 40


def _iteration(folder: Path, number: int, **per_call_us: float) -> IterationRecord:
    """An iteration whose trace holds CALLS ranges per marker, each within ±2 % of its time."""
    builder = TraceBuilder()
    clock = 0.0
    for call in range(CALLS):
        for name, us in per_call_us.items():
            duration = us * (1.0 + 0.02 * ((call * 7 % 5) - 2) / 2)
            builder.marker(name, clock, duration)
            clock += duration + 1.0
    path = builder.write(folder / f"i{number}.json")
    markers = {
        name: MarkerTime(CALLS, CALLS * us, CALLS * us, 0.0) for name, us in per_call_us.items()
    }
    return IterationRecord(number, number, None, str(path), markers=markers)


def test_history_uses_the_comparison_verdict_and_interval(tmp_path: Path) -> None:
    before = _iteration(tmp_path, 1, attn=10_000.0, mlp=2_000.0, norm=500.0, gone=1.0)
    after = _iteration(tmp_path, 2, attn=4_000.0, mlp=2_600.0, norm=500.0, new=9.0)
    text = history_report([before, after])
    # in `ncompass compare`'s words: before → after per call, the change, the interval, verdict
    lines = [line for line in text.splitlines() if line.startswith("  since iteration 1: ")]
    assert len(lines) == 2
    assert lines[0].startswith("  since iteration 1: attn: 10.00 ms → 4.00 ms per call (-60.0%, ×")
    assert lines[0].endswith("): faster")
    assert lines[1].startswith("  since iteration 1: mlp: 2.00 ms → 2.60 ms per call (+30.0%, ×")
    assert lines[1].endswith("): slower")
    assert "norm" not in "".join(lines)  # the same time both runs: no news
    [first, second] = history_json([before, after])
    assert "changes" not in first
    changes = {change["marker"]: change for change in second["changes"]}
    assert set(changes) == {"attn", "mlp", "norm"}  # only shared markers
    assert {name: change["verdict"] for name, change in changes.items()} == {
        "attn": "faster",
        "mlp": "slower",
        "norm": "same",
    }
    assert set(changes["mlp"]) == {"marker", "before_us", "after_us", "verdict", "interval"}
    low, high = changes["mlp"]["interval"]
    assert 1.2 < low <= 1.3 <= high < 1.4
    low, high = changes["norm"]["interval"]
    assert low <= 1.0 <= high


def test_a_change_inside_the_noise_band_is_same_and_one_beyond_it_is_found(
    tmp_path: Path,
) -> None:
    # 6 % on a steady marker: every call moved, but an unchanged program moves that much
    # between runs, so it is inside the comparison's ±10 % band.
    before = _iteration(tmp_path, 1, step=800.0)
    [change] = compare(before, _iteration(tmp_path, 2, step=848.0))
    assert change.verdict == "same"
    assert change.interval is not None and change.interval[0] > 1.0
    # 12 % on a 300 µs marker (36 µs a call, under the old fixed 50 µs) is found
    small = _iteration(tmp_path, 3, step=300.0)
    [change] = compare(small, _iteration(tmp_path, 4, step=336.0))
    assert change.verdict == "slower"


def test_without_the_traces_the_verdict_is_unknown(tmp_path: Path) -> None:
    before = _iteration(tmp_path, 1, attn=10_000.0)
    after = _iteration(tmp_path, 2, attn=4_000.0)
    Path(after.trace_path).unlink()
    assert compare_iterations(before, after) is None
    [change] = compare(before, after)
    assert (change.verdict, change.interval) == ("unknown", None)
    assert change.after_us == 4_000.0  # the recorded mean per call still shows
    assert "since iteration" not in history_report([before, after])  # not shown as news


def test_the_session_compares_two_iterations(tmp_path: Path) -> None:
    from ncompass.session.session import ProfilingSession
    from ncompass.session.store import SessionError

    session = ProfilingSession(str(tmp_path / "out"), session_name="h")
    session.iterations.append(_iteration(tmp_path, 1, attn=1_000.0, mlp=300.0))
    session.iterations.append(_iteration(tmp_path, 2, attn=700.0, mlp=300.0))
    comparison = session.compare(1, 2)
    assert comparison.marker("attn") is not None
    assert {c.name: c.verdict for c in comparison.markers} == {"attn": "faster", "mlp": "same"}
    assert "attn" in comparison.to_markdown()
    with pytest.raises(SessionError, match="no iteration 3 in this session"):
        session.compare(1, 3)


def test_the_whole_run_reads_the_whole_run(tmp_path: Path) -> None:
    from ncompass.session.report import finding, iteration_report
    from ncompass.session.sites import FULL_TRACE_MARKER

    record = _iteration(tmp_path, 1, attn=1_000.0)
    record.markers[FULL_TRACE_MARKER] = MarkerTime(1, 900_000.0, 800_000.0, 0.0)
    text = iteration_report(record)
    assert "  hottest: the whole run, outside every finer marker" in text
    assert FULL_TRACE_MARKER not in text
    assert finding(record) == (
        "most time is outside every marker: the whole run has 800.00 ms of its own time"
    )
    del record.markers[FULL_TRACE_MARKER]
    assert finding(record).startswith("slowest marker so far: attn — ")
