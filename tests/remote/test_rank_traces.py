"""Ranks compared side by side when their traces hold no GPU time to break down."""

from __future__ import annotations

import json
from pathlib import Path

from ncompass.analysis.summary import summarize_trace
from ncompass.remote.rank_traces import cpu_by_rank


def _trace(path: Path, markers: dict[str, float]) -> Path:
    """A CPU-only trace: one ``user_annotation`` range per marker, one after the other."""
    events, start = [], 0.0
    for name, duration in markers.items():
        events.append(
            {"ph": "X", "cat": "user_annotation", "name": name, "ts": start, "dur": duration,
             "pid": 1, "tid": 1}
        )  # fmt: skip
        start += duration + 10
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def test_markers_are_compared_across_ranks_longest_first(tmp_path: Path) -> None:
    rank0 = _trace(tmp_path / "r0.json", {"decode": 2000.0, "attn": 300.0, "only.rank0": 50.0})
    rank1 = _trace(tmp_path / "r1.json", {"decode": 1500.0, "attn": 900.0})
    summaries = [(0, summarize_trace(rank0)), (1, summarize_trace(rank1))]
    lines = cpu_by_rank(summaries, top=10)
    assert lines[0].split() == ["marker", "(CPU", "total)", "rank", "0", "rank", "1"]
    assert [line.split()[0] for line in lines[1:-1]] == ["decode", "attn", "only.rank0"]
    assert lines[1].split() == ["decode", "2.00", "ms", "1.50", "ms"]
    assert lines[3].split() == ["only.rank0", "50.0", "µs", "-"]  # rank 1 never ran it
    assert lines[-1].startswith("CPU wall time")
    assert [line.split()[0] for line in cpu_by_rank(summaries, top=1)[1:-1]] == ["decode"]
