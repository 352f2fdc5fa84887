"""The summary's setup sentences (markdown and HTML alike): imports, model construction and
torch.compile's compilation apart from the steady state, and how much of the run markers cover."""

from __future__ import annotations

from ncompass._format import format_duration
from ncompass.analysis.summary_types import SetupLabelRow, SetupRow, TraceInfo

NOT_TOLD_APART = (
    "Imports and model construction are not told apart from the steady state: the trace has no "
    "setup spans (no sidecar, or one from a run older than them)."
)


def setup_sentences(trace: TraceInfo) -> list[str]:
    """The setup line (when there was setup) and the markers' coverage (when there are markers)."""
    setup = trace.get("setup")
    if not setup:
        return []
    wall = trace["cpu_wall_us"]
    recorded = bool(setup.get("setup_spans_recorded"))
    lines = []
    if recorded:
        line = _setup_line(setup, wall)
        if line:
            lines.append(line)
    elif setup["compile_us"] > 0:
        steady = max(wall - setup["compile_us"], 0.0)
        lines.append(
            f"Setup: torch.compile compiled for {format_duration(setup['compile_us'])} "
            f"({_percent(setup['compile_us'], wall)} of the CPU wall time, "
            f"{_compilations(setup)}); "
            f"steady state {format_duration(steady)}. Compilation is kept out of the operators "
            "and the findings; the markers table shows how much of each marker it was."
        )
    if wall > 0 and trace["markers"]:
        coverage = (
            f"Inside markers: {_percent(setup['in_markers_us'], wall)} of the CPU wall time; "
            f"outside every marker: {_percent(setup['outside_markers_us'], wall)}"
        )
        if recorded:
            coverage += (
                f" (setup {_percent(setup['setup_outside_markers_us'], wall)}, "
                f"the rest {_percent(setup['other_outside_markers_us'], wall)})"
            )
        lines.append(coverage + "." + _launch_sentence(trace, wall))
    if not recorded and lines:
        lines.append(NOT_TOLD_APART)
    return lines


def _launch_sentence(trace: TraceInfo, wall: float) -> str:
    """A run's merged trace: how much of its wall time no process ran profiled code in."""
    program = trace.get("program_span_us")
    if program is None or wall <= 0 or program >= wall:
        return ""
    rest = wall - program
    return (
        f" The processes ran markers or launches during {format_duration(program)} of it; the "
        f"other {format_duration(rest)} ({_percent(rest, wall)}) is process launch, start-up "
        "before the profiled code and teardown (a launcher such as torchrun waiting for its "
        "processes), not program time."
    )


def _setup_line(setup: SetupRow, wall: float) -> str | None:
    parts = []
    if setup["imports_us"] > 0:
        parts.append(f"imports {format_duration(setup['imports_us'])}{_top(setup['imports_top'])}")
    if setup["construction_us"] > 0:
        construction = format_duration(setup["construction_us"])
        parts.append(f"model construction {construction}{_top(setup['construction_top'])}")
    if setup["compile_us"] > 0:
        compiled = format_duration(setup["compile_us"])
        parts.append(f"torch.compile compiled for {compiled} ({_compilations(setup)})")
    if not parts:
        return None
    compiling = (
        "; the markers table shows how much of each marker was compiling"
        if setup["compile_us"] > 0
        else ""
    )
    return (
        f"Setup: {', '.join(parts)}: {_percent(setup['setup_us'], wall)} of the CPU wall time; "
        f"steady state {format_duration(setup['steady_us'])}. Setup is kept out of the "
        f"operators and the findings{compiling}."
    )


def _top(rows: list[SetupLabelRow]) -> str:
    """``(GPT2LMHeadModel)`` for one label, ``(top: transformers 1.60 s)`` for several."""
    if not rows:
        return ""
    if len(rows) == 1:
        return f" ({rows[0]['label']})"
    return f" (top: {rows[0]['label']} {format_duration(rows[0]['us'])})"


def _compilations(setup: SetupRow) -> str:
    count = setup["compilations"]
    return f"{count} compilation{'s' if count != 1 else ''}"


def _percent(part: float, whole: float) -> str:
    return f"{part / whole:.1%}" if whole > 0 else "-"


__all__ = ["NOT_TOLD_APART", "setup_sentences"]
