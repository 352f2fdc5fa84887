"""Time spent once (torch.compile's compilation) apart from the steady state, the markers'
coverage, and findings that do not apply left out (issue 22, items 5 and 6)."""

from __future__ import annotations

from pathlib import Path

from ncompass.analysis import summarize_trace
from ncompass.analysis.setup_time import compile_operator_names
from tests.traces.builders import TraceBuilder


def _compiled_step_trace(tmp_path: Path) -> Path:
    """A first step that compiles for 900 µs (dynamo's phases as torch 2.13 records them,
    with an aten op fake-tracing inside) and runs 50 µs of work; a second step of 60 µs."""
    return (
        TraceBuilder()
        .marker("ncompass.full_trace", 0, 2000)
        .marker("step", 0, 1000)
        .cpu_op("dynamo", 10, 900)
        .cpu_op("entire_frame_compile", 11, 898)
        .cpu_op("backend_compile", 20, 800)
        .cpu_op("OutputGraph.call_user_compiler (dynamo_timed)", 20, 800)
        .cpu_op("aten::empty", 30, 100)  # fake-tensor tracing during compilation
        .cpu_op("aten::addmm", 920, 50)
        .marker("step", 1100, 60)
        .cpu_op("aten::addmm", 1100, 50)
        .marker("outside", 1500, 10)
        .write(tmp_path / "compiled.json")
    )


def test_compile_phases_are_setup_not_operators_or_findings(tmp_path: Path) -> None:
    summary = summarize_trace(_compiled_step_trace(tmp_path))
    structured = summary["structured"]
    setup = structured["trace"]["setup"]
    assert setup["compile_us"] == 900 and setup["compilations"] == 1
    assert setup["compile_in_marker_us"]["step"] == 900
    operators = {op["name"]: op for op in structured["operations"] if op["kind"] == "cpu_op"}
    assert set(operators) == {"aten::addmm"}  # phases and what ran inside them: setup
    assert operators["aten::addmm"]["calls"] == 2 and operators["aten::addmm"]["total_us"] == 100
    # 'step' is 1,060 µs of a 2,000 µs run, but only 160 µs of it is not compiling
    assert [b["rule"] for b in structured["bottlenecks"]] == []
    markdown = summary["markdown"]
    assert (
        "Setup: torch.compile compiled for 900.0 µs (45.0% of the CPU wall time, 1 compilation)"
        in markdown
    )
    assert "| `step` | 2 | 1.06 ms | 900.0 µs |" in markdown
    assert "Inside markers: 53.5% of the CPU wall time; outside every marker: 46.5%." in markdown


def test_the_whole_run_range_and_a_cpu_only_run_bring_no_finding(tmp_path: Path) -> None:
    path = (
        TraceBuilder()
        .marker("ncompass.full_trace", 0, 1000)
        .marker("step", 0, 400)
        .marker("step", 500, 400)
        .cpu_op("aten::mm", 10, 300)
        .write(tmp_path / "cpu.json")
    )
    summary = summarize_trace(path)
    rules = [b["rule"] for b in summary["structured"]["bottlenecks"]]
    assert rules == ["dominant-marker"] and "'step' takes 80%" in summary["markdown"]
    assert (
        "ncompass.full_trace" not in summary["markdown"].split("## Bottlenecks")[1].split("##")[0]
    )
    assert "GPU" not in " ".join(summary["structured"]["recommendations"])
    assert summary["markdown"].count("no GPU events") == 1


def test_compile_phase_names() -> None:
    names = ["dynamo", "entire_frame_compile", "code_gen", "code_gen (dynamo_timed)", "aten::mm"]
    assert compile_operator_names(names) == {
        "dynamo",
        "entire_frame_compile",
        "code_gen",
        "code_gen (dynamo_timed)",
    }
