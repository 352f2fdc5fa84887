"""A run's merged trace, per process and per rank: who did what, as well as the total.

A trace that lists more than one process under ``ncompass_processes`` (the merged trace of a
run whose child processes were followed) is reported in total as any trace is, and then per
process (its wall span, CPU time in markers, top markers and GPU time) and, where processes
state ranks, per rank with the several-rank report. Processes are grouped under their rank:
a process that states none (a DataLoader worker, a compile worker) is under its nearest
ancestor's, so workers are never ranks of their own.

Nothing here runs for a trace of one process: the per-event work of reading and linking is
the same as before, and a run's parts are cut from the linked trace, not read again.
"""

from __future__ import annotations

from ncompass._format import format_duration
from ncompass.analysis.breakdown import rank_breakdown
from ncompass.analysis.intervals import total_length, union
from ncompass.analysis.markers import marker_stats
from ncompass.analysis.ranks import RankFacts, combine, facts_of_trace, ranks_markdown_sections
from ncompass.analysis.ranks_types import ProcessRow, RunReport, TopMarker
from ncompass.analysis.run_parts import (
    ProcessPart,
    is_run_trace,
    marker_cpu_us,
    process_parts,
    rank_parts,
    wall_us,
)
from ncompass.traces.link import LinkedTrace

TOP_MARKERS_PER_PROCESS = 3
_ROLE_WIDTH = 48


def run_report(trace: LinkedTrace, *, top: int = 20) -> RunReport | None:
    """The per-process and per-rank report of a run's merged trace.

    Args:
        trace: A linked trace.
        top: How many markers and kernels the per-rank report lists.

    Returns:
        ``{"processes": [...], "ranks": {...}}`` (``ranks`` only when some process states a
        rank; the several-rank report's shape); None for a trace of one process.
    """
    if not is_run_trace(trace):
        return None
    rows: list[ProcessRow] = []
    facts: dict[int, RankFacts] = {}
    spans: list[tuple[float, float]] = []
    for part in process_parts(trace):
        if part.trace.cpu_end > part.trace.cpu_start:
            spans.append((part.trace.cpu_start, part.trace.cpu_end))
        own = None
        if part.alone_in_rank and part.under_rank is not None:  # its part is its rank's
            own = facts[part.under_rank] = facts_of_trace(
                part.trace, part.under_rank, (part.process.role,)
            )
        rows.append(_process_row(part, own))
    for rank, roles, rank_part in rank_parts(trace, skip_alone=True):
        facts[rank] = facts_of_trace(rank_part, rank, roles)
    # the program's time: when some process ran a marker or a launch (the rest is the launcher
    # waiting, process start-up and imports before the profiled code, and teardown)
    report: RunReport = {"processes": rows, "program_span_us": total_length(union(spans))}
    if facts:
        report["ranks"] = combine([facts[rank] for rank in sorted(facts)], top=top)
    return report


def _process_row(part: ProcessPart, facts: RankFacts | None) -> ProcessRow:
    """One process's row; ``facts`` are its part's when already analysed (as its rank)."""
    process, trace = part.process, part.trace
    if facts is not None:
        busy = facts.breakdown["kernel_span_us"] - facts.breakdown["idle_us"]
        times = {name: (calls, total) for name, (calls, total) in facts.markers.items()}
    else:
        busy = 0.0
        if len(trace.gpu):
            breakdown = rank_breakdown(trace, part.under_rank or 0)
            busy = breakdown.kernel_span_us - breakdown.idle_us
        times = {
            name: (entry.calls, entry.cpu_total_us) for name, entry in marker_stats(trace).items()
        }
    ranked = sorted(times, key=lambda name: (-times[name][1], name))[:TOP_MARKERS_PER_PROCESS]
    top_markers: list[TopMarker] = [
        {"name": name, "calls": times[name][0], "cpu_total_us": times[name][1]} for name in ranked
    ]
    return {
        "pid": process.pid,
        "ppid": process.ppid,
        "role": process.role,
        "rank": process.rank,
        "under_rank": part.under_rank,
        "command": process.command,
        "exit_code": process.exit_code,
        "trace_file": process.trace_file,
        "wall_us": wall_us(trace),
        "marker_cpu_us": marker_cpu_us(trace),
        "markers": len(trace.markers),
        "launches": len(trace.launches),
        "gpu_events": len(trace.gpu),
        "gpu_busy_us": busy,
        "top_markers": top_markers,
    }


def run_markdown(report: RunReport) -> list[str]:
    """The per-process table and the per-rank report, as markdown lines (``##`` sections)."""
    rows = report["processes"]
    has_gpu = any(row["gpu_events"] for row in rows)
    lines = [
        f"## Processes ({len(rows)})",
        "",
        "Each process's share of the run: its span from first to last marker or launch, the "
        "CPU time inside its outermost markers"
        + (", and the GPU time of the work it launched." if has_gpu else "."),
        "",
        "| process | pid | rank | span | CPU in markers | markers | "
        + ("GPU busy | GPU events | " if has_gpu else "")
        + "top markers |",
        "|---|---:|---:|---:|---:|---:|" + ("---:|---:|" if has_gpu else "") + "---|",
    ]
    for row in rows:
        gpu = f"{format_duration(row['gpu_busy_us'])} | {row['gpu_events']} | " if has_gpu else ""
        lines.append(
            f"| {_cell(row['role'])} | {row['pid']} | {_rank_cell(row)} | "
            f"{format_duration(row['wall_us'])} | {format_duration(row['marker_cpu_us'])} | "
            f"{row['markers']} | {gpu}{_top_markers(row['top_markers'])} |"
        )
    lines.append("")
    ranks = report.get("ranks")
    if ranks is not None:
        count = len(ranks["ranks"])
        lines += [
            f"## Ranks ({count})",
            "",
            "Each rank with the processes under it (workers are counted with their rank).",
            "",
        ]
        lines += ranks_markdown_sections(ranks, heading="###")
    return lines


def _rank_cell(row: ProcessRow) -> str:
    if row["rank"] is not None:
        return str(row["rank"])
    return f"({row['under_rank']})" if row["under_rank"] is not None else "-"


def _top_markers(markers: list[TopMarker]) -> str:
    if not markers:
        return "-"
    return ", ".join(
        f"{_cell(marker['name'])} {format_duration(marker['cpu_total_us'])}" for marker in markers
    )


def _cell(name: str) -> str:
    short = name if len(name) <= _ROLE_WIDTH else name[: _ROLE_WIDTH - 1] + "…"
    return "`" + short.replace("|", "\\|").replace("`", "'") + "`"


__all__ = ["run_markdown", "run_report"]
