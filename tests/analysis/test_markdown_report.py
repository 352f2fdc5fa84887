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


def test_cpu_only_trace_has_no_gpu_columns() -> None:
    from tests.traces.builders import shared_trace

    markdown = summarize_trace(shared_trace("cpu_only"))["markdown"]
    assert "CPU only (no GPU events)" in markdown
    assert "| marker | calls | CPU total | CPU self | CPU share |" in markdown
    assert "GPU total" not in markdown and "## GPU" not in markdown


def test_gpu_trace_keeps_the_gpu_columns(tmp_path: Path) -> None:
    builder = TraceBuilder().marker("step", 0, 100)
    builder.launch("gemm", 1, 1, 10, 30)
    markdown = summarize_trace(builder.write(tmp_path / "t.json"))["markdown"]
    assert "| CPU self | GPU total | GPU events | CPU share |" in markdown
    assert "1 GPU events" in markdown
