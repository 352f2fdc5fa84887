"""A Chrome trace of another tool is summarised as what it holds, not as an empty profile.

The trace is a real viztracer recording (tests/data/traces/viztracer/tiny.json, of the script
beside it): its events by name, thread and process. A trace with no timed event at all says so
in one line.
"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from ncompass.analysis.summary import summarize_trace
from ncompass.cli import ncompass_cli

VIZTRACER = Path(__file__).resolve().parents[1] / "data" / "traces" / "viztracer" / "tiny.json"


def _expected() -> dict[str, tuple[int, float]]:
    """Calls and total duration per name, straight from the file."""
    totals: dict[str, tuple[int, float]] = {}
    for event in json.loads(VIZTRACER.read_text())["traceEvents"]:
        if event.get("ph") == "X":
            calls, total = totals.get(event["name"], (0, 0.0))
            totals[event["name"]] = (calls + 1, total + event["dur"])
    return totals


def test_viztracer_trace_lists_its_events_by_name_thread_and_process() -> None:
    summary = summarize_trace(VIZTRACER)
    foreign = summary["structured"]["foreign"]
    expected = _expected()
    assert foreign["timed_events"] == sum(calls for calls, _ in expected.values())
    by_name = {row["name"]: row for row in foreign["names"]}
    for name, (calls, total) in expected.items():
        assert by_name[name]["calls"] == calls
        assert abs(by_name[name]["total_us"] - total) < 1e-6
    assert by_name["fib (/project/tiny.py:1)"]["calls"] == 75  # fib(6) makes 25 calls, 3 times
    (thread,) = foreign["threads"]
    assert thread["name"] == "MainThread" and thread["events"] == foreign["timed_events"]
    (process,) = foreign["processes"]
    assert process["name"] == "MainProcess"
    markdown = summary["markdown"]
    assert "This trace holds no torch profiler events" in markdown
    assert "## Events by name" in markdown and "`fib (/project/tiny.py:1)` | 75 |" in markdown
    assert "nothing stands out" not in markdown and "0 marker ranges" not in markdown


def test_a_trace_without_timed_events_says_so_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "counters.json"
    path.write_text(
        json.dumps(
            {
                "traceEvents": [
                    {"ph": "C", "name": "memory", "pid": 1, "tid": 1, "ts": 0, "args": {"v": 1}},
                    {"ph": "i", "name": "tick", "pid": 1, "tid": 1, "ts": 5, "s": "t"},
                ]
            }
        )
    )
    result = CliRunner().invoke(ncompass_cli, ["summarize", str(path)])
    assert result.exit_code == 0, result.output
    body = [line for line in result.stdout.splitlines()[1:] if line]
    assert body == [
        "This trace holds no profiler events: none of its 2 events is a timed range (X, or "
        "B/E), so there is no time to report. Record it with `ncompass run` or the torch "
        "profiler."
    ]


def test_a_profiler_trace_has_no_foreign_section() -> None:
    amd = Path(__file__).resolve().parents[1] / "data" / "traces" / "hta" / "amd_trace"
    (path,) = amd.glob("*.json.gz")
    assert "foreign" not in summarize_trace(path)["structured"]
