"""Render a summary's structured data as a markdown report."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ncompass._format import format_duration
from ncompass.analysis.compiled_region_text import compiled_region_lines
from ncompass.analysis.efficiency_text import efficiency_cell, efficiency_lines, has_efficiency
from ncompass.analysis.evidence_text import evidence_sentence
from ncompass.analysis.foreign_events import foreign_markdown
from ncompass.analysis.machine_wait import CONTENDED_WAIT_SHARE, busy_machine_sentence
from ncompass.analysis.processes import run_markdown
from ncompass.analysis.setup_text import setup_sentences
from ncompass.analysis.summary_types import (
    BottleneckRow,
    BreakdownRow,
    CompiledKernelRow,
    CpuOperation,
    Focus,
    KernelOperation,
    MarkerRow,
    StructuredSummary,
    TraceInfo,
)
from ncompass.traces.unrecorded_markers import unrecorded_markers_advice

_NAME_WIDTH = 80


def render_markdown(structured: StructuredSummary, *, top: int = 20) -> str:
    """Render the ``structured`` part of a summary.

    Args:
        structured: As built by :func:`~ncompass.analysis.summary.summarize_trace`.
        top: How many rows each table shows.

    Returns:
        The report.
    """
    trace = structured["trace"]
    lines = [f"# Trace summary: {Path(trace['path']).name}", ""]
    foreign = structured.get("foreign")
    if foreign is not None:  # another tool's trace: what it holds, not empty profiler tables
        return "\n".join([*lines, *foreign_markdown(foreign)]).rstrip() + "\n"
    has_gpu = bool(trace["gpu_events"])
    run = structured.get("run")
    who = f"Rank {trace['rank']}"
    if run is not None:
        who = f"Run of {len(run['processes'])} processes (in total; per process below)"
    lines.append(
        f"{who} · CPU wall time {format_duration(trace['cpu_wall_us'])} · "
        f"{trace['markers']} marker ranges · "
        + (f"{trace['gpu_events']} GPU events" if has_gpu else "CPU only (no GPU events)")
    )
    lines.append("")
    if "unrecorded_markers" in trace:  # markers that fired into NVTX, absent from this trace
        lines += [unrecorded_markers_advice(trace["unrecorded_markers"]), ""]
    waited = trace.get("cpu_waited_share")
    if waited is not None and waited >= CONTENDED_WAIT_SHARE:  # the figures are stretched
        lines += [busy_machine_sentence(waited), ""]
    lines += _setup_lines(trace)
    focus = structured.get("focus") or {}
    if focus.get("target_module") or focus.get("feedback_text"):
        lines += _focus_section(focus, structured["markers"], has_gpu)
    if has_gpu:
        lines += _gpu_section(structured["breakdown"])
    lines += _bottleneck_section(structured["bottlenecks"])
    lines += efficiency_lines(structured)
    if structured["recommendations"]:
        lines += ["## Recommendations", ""]
        lines += [f"- {text}" for text in structured["recommendations"]]
        lines.append("")
    operations = structured["operations"]
    compiling = (trace.get("setup") or {}).get("compile_in_marker_us") or None
    marker_rows = [op for op in operations if op["kind"] == "marker"][:top]
    lines += _marker_table(marker_rows, has_gpu, compiling=compiling)
    lines += _compiled_section(structured["markers"], top)
    listed = any(marker.get("compiled_kernels") for marker in structured["markers"])
    lines += compiled_region_lines(structured.get("compiled_code"), heading=not listed)
    lines += _kernel_table([op for op in operations if op["kind"] == "kernel"][:top])
    lines += _operator_table([op for op in operations if op["kind"] == "cpu_op"][:top])
    if run is not None:
        lines += run_markdown(run)
    return "\n".join(lines).rstrip() + "\n"


def _setup_lines(trace: TraceInfo) -> list[str]:
    """Setup apart from the steady state, and how much markers cover."""
    lines = setup_sentences(trace)
    return [*lines, ""] if lines else []


def _focus_section(focus: Focus, markers: list[MarkerRow], has_gpu: bool) -> list[str]:
    lines = ["## Focus", ""]
    if focus.get("feedback_text"):
        lines.append(f"Question: {focus['feedback_text']}")
    if focus.get("target_module"):
        lines.append(f"Target: `{focus['target_module']}`")
    lines.append("")
    matching = [stats for stats in markers if stats["name"] in set(focus.get("markers", []))]
    if matching:
        lines += _marker_table(matching, has_gpu, title=None)
    else:
        lines += ["No marker in this trace matches the target yet.", ""]
    return lines


def _gpu_section(breakdown: BreakdownRow) -> list[str]:
    span = breakdown["kernel_span_us"]
    gaps = breakdown["idle_gaps"]
    launches = breakdown["launches"]
    rows = [
        ("Computation", breakdown["compute_us"]),
        ("Communication / memory (not overlapping computation)", breakdown["non_compute_us"]),
        ("Idle", breakdown["idle_us"]),
        ("  of which waiting for the host (host-bound gaps)", gaps["host_bound_us"]),
    ]
    lines = [
        "## GPU time",
        "",
        f"Kernel span {format_duration(span)} (first GPU event start to last end).",
        "",
        "| | time | share of span |",
        "|---|---:|---:|",
    ]
    for label, value in rows:
        share = value / span if span > 0 else 0.0
        lines.append(f"| {label} | {format_duration(value)} | {share:.1%} |")
    lines += [
        "",
        f"Launches: {launches['linked']} of {launches['gpu_events']} GPU events linked to a CPU "
        f"launch; median launch-to-start delay "
        f"{format_duration(launches['launch_delay_us']['median'])}, median CPU launch "
        f"{format_duration(launches['launch_cpu_us']['median'])}, median GPU duration "
        f"{format_duration(launches['gpu_duration_us']['median'])}; "
        f"{launches['shorter_than_launch']} ran shorter than their launch.",
        "",
    ]
    return lines


def _bottleneck_section(bottlenecks: list[BottleneckRow]) -> list[str]:
    lines = ["## Bottlenecks", ""]
    if not bottlenecks:
        return [*lines, "No rule fired: nothing stands out.", ""]
    for number, finding in enumerate(bottlenecks, start=1):
        lines.append(f"{number}. **[{finding['severity']}] {finding['rule']}**: {finding['title']}")
        evidence = evidence_sentence(finding["evidence"])
        lines.append(f"   - evidence: {evidence}")
    lines.append("")
    return lines


# The marker table's denominator, named: findings say theirs (the steady state, or steps).
_SHARE_NOTE = "CPU share: a marker's CPU total over the whole CPU wall time of the trace."


def _marker_table(
    rows: Sequence[MarkerRow],
    has_gpu: bool,
    title: str | None = "Markers",
    compiling: dict[str, float] | None = None,
) -> list[str]:
    """The marker table; its GPU columns only when the trace has GPU events, its compiling
    column (torch.compile's time inside each marker) only when some marker held a compilation."""
    if not rows:
        return []
    lines = [f"## {title}", "", _SHARE_NOTE, ""] if title else []
    gpu_header = " GPU total | GPU events |" if has_gpu else ""
    gpu_rule = "---:|---:|" if has_gpu else ""
    compile_header, compile_rule = (" of it compiling |", "---:|") if compiling else ("", "")
    bound = has_efficiency(rows)
    bound_header, bound_rule = (" bound, of peak |", "---:|") if bound else ("", "")
    lines += [
        f"| marker | calls | CPU total |{compile_header} CPU self |{gpu_header} CPU share |"
        f"{bound_header}",
        f"|---|---:|---:|{compile_rule}---:|{gpu_rule}---:|{bound_rule}",
    ]
    for row in rows:
        share = row.get("share_of_cpu_time")
        gpu = f" {format_duration(row['gpu_total_us'])} | {row['gpu_events']} |" if has_gpu else ""
        inside = (compiling or {}).get(row["name"], 0.0)
        compile_cell = (f" {format_duration(inside)} |" if inside else " |") if compiling else ""
        lines.append(
            f"| {_cell(row['name'])} | {row['calls']} | {format_duration(row['cpu_total_us'])} |"
            f"{compile_cell} {format_duration(row['cpu_self_us'])} |{gpu} "
            f"{'' if share is None else f'{share:.1%}'} |"
            + (f" {efficiency_cell(row)} |" if bound else "")
        )
    return [*lines, ""]


def compiled_headline(kernels: list[CompiledKernelRow]) -> str:
    """``compiled: its time is in 3 Inductor kernels (1.20 ms)``."""
    total = sum(kernel["total_us"] for kernel in kernels)
    plural = "" if len(kernels) == 1 else "s"
    return (
        f"compiled: its time is in {len(kernels)} Inductor kernel{plural} "
        f"({format_duration(total)})"
    )


def _compiled_section(markers: list[MarkerRow], top: int) -> list[str]:
    compiled = [marker for marker in markers if marker.get("compiled_kernels")]
    if not compiled:
        return []
    lines = [
        "## Compiled code",
        "",
        "Markers whose code `torch.compile` compiled: Inductor kernels generated from their "
        "lines (a kernel made from several markers' lines is listed under each).",
        "",
    ]
    for marker in compiled:
        kernels = marker["compiled_kernels"]
        lines.append(f"- {_cell(marker['name'])}: {compiled_headline(kernels)}")
        for kernel in kernels[:top]:
            lines.append(
                f"  - {_cell(kernel['name'])}: {kernel['calls']} calls, "
                f"{format_duration(kernel['total_us'])}"
            )
        if len(kernels) > top:
            lines.append(f"  - … {len(kernels) - top} more")
    return [*lines, ""]


def _kernel_table(rows: list[KernelOperation]) -> list[str]:
    if not rows:
        return []
    bound = has_efficiency(rows)
    lines = [
        "## GPU kernels",
        "",
        "| kernel | class | calls | total | mean | GPU share |"
        + (" bound, of peak |" if bound else ""),
        "|---|---|---:|---:|---:|---:|" + ("---:|" if bound else ""),
    ]
    for row in rows:
        lines.append(
            f"| {_cell(row['name'])} | {row['class']} | {row['calls']} | "
            f"{format_duration(row['total_us'])} | {format_duration(row['mean_us'])} | "
            f"{row['share_of_gpu_time']:.1%} |" + (f" {efficiency_cell(row)} |" if bound else "")
        )
    return [*lines, ""]


def _operator_table(rows: list[CpuOperation]) -> list[str]:
    if not rows:
        return []
    bound = has_efficiency(rows)
    lines = [
        "## CPU operators",
        "",
        "Inclusive times: nested operators are counted in their parents too.",
        "",
        "| operator | calls | total | mean | CPU share |" + (" bound, of peak |" if bound else ""),
        "|---|---:|---:|---:|---:|" + ("---:|" if bound else ""),
    ]
    for row in rows:
        lines.append(
            f"| {_cell(row['name'])} | {row['calls']} | {format_duration(row['total_us'])} | "
            f"{format_duration(row['mean_us'])} | {row['share_of_cpu_time']:.1%} |"
            + (f" {efficiency_cell(row)} |" if bound else "")
        )
    return [*lines, ""]


def _cell(name: str) -> str:
    short = name if len(name) <= _NAME_WIDTH else name[: _NAME_WIDTH - 1] + "…"
    return "`" + short.replace("|", "\\|").replace("`", "'") + "`"


def _number(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1 else f"{value:.1f}"
    return str(value)
