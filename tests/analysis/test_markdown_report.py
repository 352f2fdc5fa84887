from __future__ import annotations

from pathlib import Path

from ncompass.analysis import summarize_trace
from ncompass.analysis.markdown_report import format_duration
from tests.traces.builders import TraceBuilder


def test_durations_use_a_readable_unit() -> None:
    assert format_duration(850) == "850.0 µs"
    assert format_duration(12_345) == "12.35 ms"
    assert format_duration(4_560_000) == "4.56 s"


def test_report_has_tables_and_escapes_pipes(tmp_path: Path) -> None:
    builder = TraceBuilder().marker("a|b", 0, 100)
    builder.launch("gemm", 1, 1, 10, 30)
    markdown = summarize_trace(builder.write(tmp_path / "t.json"))["markdown"]
    assert "## GPU time" in markdown and "## Markers" in markdown and "## GPU kernels" in markdown
    assert "`a\\|b`" in markdown
