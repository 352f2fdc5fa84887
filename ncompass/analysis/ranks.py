"""The summary of several traces (the ranks of one job, or repeated runs): one report, rank columns.

Each file is analysed in a worker process (:func:`~ncompass.traces.parallel.map_traces`) down to
a compact :class:`RankFacts`: per-name totals, never events. The parent combines them: the
ranks side by side, the slowest one named, and the top markers and kernels with their time on
each rank and how far the slowest rank is from the median. Stragglers are what a multi-rank
user looks for: in a job whose ranks meet at collectives, every rank waits for the slowest one,
so its peers show the wait as communication time and it shows the most time outside it.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

# typing_extensions' TypedDict, as in summary_types (pydantic validates only it before 3.12)
from typing_extensions import TypedDict

from ncompass._format import format_duration
from ncompass.analysis.breakdown import rank_breakdown
from ncompass.analysis.markers import marker_stats
from ncompass.analysis.operations import kernel_stats
from ncompass.analysis.printable_names import read_printable
from ncompass.analysis.ranks_types import RankRow, RanksStructured, SlowestRank, SpreadRow
from ncompass.analysis.rules import RuleInput, find_bottlenecks
from ncompass.analysis.stragglers import (
    Collective,
    StragglerReport,
    collectives_of,
    straggler_report,
    straggler_sentence,
    straggler_table,
)
from ncompass.analysis.summary_types import RankBreakdownRow
from ncompass.traces.link import LinkedTrace
from ncompass.traces.parallel import map_traces

# More ranks than this get min / median / max columns instead of one column per rank.
_MAX_RANK_COLUMNS = 8
_NAME_WIDTH = 70


class RanksSummary(TypedDict):
    """What :func:`summarize_traces` returns: the report and its data."""

    markdown: str
    structured: RanksStructured


@dataclass(frozen=True)
class RankFacts:
    """What one trace contributes to a combined summary (small enough to send between processes).

    Attributes:
        rank: The rank the trace names (see :func:`~ncompass.traces.identity.trace_identity`),
            else the file's position on the command line.
        path: The trace file.
        cpu_wall_us: First to last CPU event.
        breakdown: The rank's GPU time breakdown (``ncompass breakdown --json``'s per-rank dict).
        markers: Marker name -> (calls, CPU inclusive time).
        kernels: GPU event name -> (class, calls, GPU time).
        findings: The titles of the rank's bottleneck findings, most severe first.
        processes: The roles of the processes of a run reported under this rank (empty for a
            trace file given as a rank).
        collectives: Its collective calls in time order, on the absolute clock (see
            :mod:`~ncompass.analysis.stragglers`).
    """

    rank: int
    path: str
    cpu_wall_us: float
    breakdown: RankBreakdownRow
    markers: dict[str, tuple[int, float]]
    kernels: dict[str, tuple[str, int, float]]
    findings: tuple[str, ...]
    processes: tuple[str, ...] = ()
    collectives: tuple[Collective, ...] = ()

    @property
    def gpu_events(self) -> int:
        """GPU events in the trace."""
        return self.breakdown["gpu_events"]

    @property
    def outside_communication_us(self) -> float:
        """GPU span minus the communication no computation overlapped (the time not waiting)."""
        exposed = self.breakdown["communication_us"] - self.breakdown["communication_overlapped_us"]
        return self.breakdown["kernel_span_us"] - exposed


def rank_facts(path: str | Path, position: int, progress: bool | None) -> RankFacts:
    """Analyse one trace down to its :class:`RankFacts` (runs in a worker process).

    Args:
        path: The trace file.
        position: Its position on the command line (the rank when the trace names none).
        progress: Progress bar on stderr (None: only on a terminal, for large files).

    Returns:
        The facts.

    Raises:
        TraceError: The file is missing, truncated or not a trace.
    """
    trace = read_printable(path, progress=progress)
    return facts_of_trace(trace, trace.identity.rank_or(position))


def facts_of_trace(trace: LinkedTrace, rank: int, processes: tuple[str, ...] = ()) -> RankFacts:
    """Analyse one linked trace (a file, or the part of a run some processes recorded).

    Args:
        trace: The linked trace.
        rank: The rank to report it as.
        processes: The roles of the run's processes it holds (none for a file given as a rank).

    Returns:
        The facts.
    """
    breakdown = rank_breakdown(trace, rank)
    markers = marker_stats(trace)
    kernels = kernel_stats(trace)
    findings = find_bottlenecks(RuleInput(trace, breakdown, markers, kernels))
    return RankFacts(
        rank=rank,
        path=str(trace.path),
        cpu_wall_us=trace.cpu_end - trace.cpu_start if trace.cpu_end > trace.cpu_start else 0.0,
        breakdown=breakdown.to_dict(),
        markers={name: (stats.calls, stats.cpu_total_us) for name, stats in markers.items()},
        kernels={
            name: (entry.kernel_class, entry.calls, entry.total_us)
            for name, entry in kernels.items()
        },
        findings=tuple(finding.title for finding in findings),
        processes=processes,
        collectives=collectives_of(trace),
    )


def summarize_traces(
    paths: Sequence[str | Path],
    *,
    top: int = 20,
    jobs: int | None = 1,
    progress: bool | None = None,
) -> RanksSummary:
    """Summarize several traces together: ranks side by side, the slowest named.

    Args:
        paths: Trace files, one per rank (or one per run of the same program).
        top: How many markers and kernels to list.
        jobs: Files read at once in worker processes; None for one per core, 1 for one by one
            in this process. The result is the same either way.
        progress: Progress bar on stderr (None: only on a terminal, for large inputs).

    Returns:
        ``{"markdown": str, "structured": {"label", "ranks", "slowest", "markers", "kernels"}}``;
        the shape is described in docs/analysis.md ("Several traces").

    Raises:
        TraceError: A file is missing or corrupt (the first such file, in order).
    """
    facts = list(map_traces(rank_facts, paths, jobs=jobs, progress=progress))
    structured = combine(facts, top=top)
    return {"markdown": render_ranks_markdown(structured), "structured": structured}


def combine(facts: Sequence[RankFacts], *, top: int = 20) -> RanksStructured:
    """The ``structured`` part of a several-trace summary, from each trace's facts."""
    distinct_ranks = len({fact.rank for fact in facts}) == len(facts)
    # Ranks that repeat are runs of one program: their columns are their positions instead.
    labels = [str(fact.rank if distinct_ranks else position) for position, fact in enumerate(facts)]
    has_gpu = any(fact.gpu_events for fact in facts)
    structured: RanksStructured = {
        "label": "rank" if distinct_ranks else "run",
        "ranks": [_rank_row(label, fact) for label, fact in zip(labels, facts, strict=True)],
        "slowest": _slowest(labels, facts, has_gpu),
        "markers": _per_rank_rows(labels, [_marker_times(fact) for fact in facts], top),
        "kernels": _per_rank_rows(labels, [fact.kernels for fact in facts], top) if has_gpu else [],
    }
    # Runs of one program never meet at a collective: only ranks are matched.
    stragglers = (
        straggler_report(
            labels, [fact.rank for fact in facts], [fact.collectives for fact in facts]
        )
        if distinct_ranks
        else None
    )
    if stragglers is not None:
        structured["stragglers"] = stragglers
        if stragglers["straggler"] is not None:
            structured["slowest"] = _straggler_as_slowest(stragglers, facts)
    return structured


def _straggler_as_slowest(stragglers: StragglerReport, facts: Sequence[RankFacts]) -> SlowestRank:
    """The straggler in the ``slowest`` shape: the rank causing the most waiting at collectives."""
    caused = [row["wait_caused_us"] for row in stragglers["ranks"]]
    index = next(
        position
        for position, row in enumerate(stragglers["ranks"])
        if row["label"] == stragglers["straggler"]
    )
    median = statistics.median(caused)
    return {
        "label": stragglers["ranks"][index]["label"],
        "rank": facts[index].rank,
        "path": facts[index].path,
        "measure": "wait_caused_us",
        "value_us": caused[index],
        "median_us": median,
        "over_median": caused[index] / median if median > 0 else 0.0,
    }


def _rank_row(label: str, fact: RankFacts) -> RankRow:
    breakdown = fact.breakdown
    row: RankRow = {
        "label": label,
        "rank": fact.rank,
        "path": fact.path,
        "cpu_wall_us": fact.cpu_wall_us,
        "gpu_events": fact.gpu_events,
        "kernel_span_us": breakdown["kernel_span_us"],
        "compute_us": breakdown["compute_us"],
        "non_compute_us": breakdown["non_compute_us"],
        "communication_us": breakdown["communication_us"],
        "idle_us": breakdown["idle_us"],
        "host_bound_idle_us": breakdown["idle_gaps"]["host_bound_us"],
        "outside_communication_us": fact.outside_communication_us,
        "findings": list(fact.findings),
    }
    if fact.processes:
        row["processes"] = list(fact.processes)
    return row


def _slowest(labels: list[str], facts: Sequence[RankFacts], has_gpu: bool) -> SlowestRank:
    measure: Literal["outside_communication_us", "cpu_wall_us"]
    if has_gpu:
        measure = "outside_communication_us"
        values = [fact.outside_communication_us for fact in facts]
    else:
        measure = "cpu_wall_us"
        values = [fact.cpu_wall_us for fact in facts]
    index = max(range(len(values)), key=values.__getitem__)  # the first on ties
    median = statistics.median(values)
    return {
        "label": labels[index],
        "rank": facts[index].rank,
        "path": facts[index].path,
        "measure": measure,
        "value_us": values[index],
        "median_us": median,
        "over_median": values[index] / median if median > 0 else 0.0,
    }


def _marker_times(fact: RankFacts) -> dict[str, tuple[str, int, float]]:
    return {name: ("marker", calls, total) for name, (calls, total) in fact.markers.items()}


def _per_rank_rows(
    labels: list[str], per_rank: list[dict[str, tuple[str, int, float]]], top: int
) -> list[SpreadRow]:
    """The ``top`` names by time over all ranks, each with its time on every rank."""
    totals: dict[str, float] = {}
    for times in per_rank:
        for name, (_, _, total) in times.items():
            totals[name] = totals.get(name, 0.0) + total
    rows: list[SpreadRow] = []
    for name in sorted(totals, key=lambda name: (-totals[name], name))[:top]:
        found = [times.get(name) for times in per_rank]
        by_rank = [entry[2] if entry is not None else 0.0 for entry in found]
        slowest = max(range(len(by_rank)), key=by_rank.__getitem__)
        median = statistics.median(by_rank)
        row: SpreadRow = {
            "name": name,
            "calls": sum(entry[1] for entry in found if entry is not None),
            "total_us": totals[name],
            "by_rank_us": dict(zip(labels, by_rank, strict=True)),
            "median_us": median,
            "max_us": by_rank[slowest],
            "slowest": labels[slowest],
            "over_median": by_rank[slowest] / median if median > 0 else 0.0,
        }
        kind = next(entry[0] for entry in found if entry is not None)
        if kind != "marker":
            row["class"] = kind
        rows.append(row)
    return rows


def render_ranks_markdown(structured: RanksStructured) -> str:
    """Render a several-trace summary's ``structured`` part as a markdown report."""
    ranks = structured["ranks"]
    label = structured["label"]
    lines = [f"# Summary of {len(ranks)} traces ({label}s {_listing(ranks)})", ""]
    lines += ranks_markdown_sections(structured, heading="##")
    return "\n".join(lines).rstrip() + "\n"


def ranks_markdown_sections(structured: RanksStructured, *, heading: str) -> list[str]:
    """The several-rank report below its title: the slowest rank, the rank table, the markers
    and kernels per rank and the findings, with ``heading`` (``##``) before each section."""
    ranks = structured["ranks"]
    label = structured["label"]
    in_one_run = any("processes" in row for row in ranks)
    stragglers = structured.get("stragglers")
    lines = [lead_sentence(structured, name_file=not in_one_run), ""]
    lines += _rank_table(ranks, label)
    if stragglers is not None:
        lines += straggler_table(stragglers, heading=heading)
    markers, kernels = structured["markers"], structured["kernels"]
    lines += _spread_table(f"{heading} Markers (CPU time)", "marker", markers, ranks, label)
    lines += _spread_table(f"{heading} GPU kernels (GPU time)", "kernel", kernels, ranks, label)
    findings = [row for row in ranks if row["findings"]]
    if findings:
        lines += [f"{heading} Findings per {label}", ""]
        for row in findings:
            lines.append(f"- {label} {row['label']}: " + "; ".join(row["findings"]))
        lines.append("")
    return lines


def _listing(ranks: list[RankRow]) -> str:
    shown = [str(row["label"]) for row in ranks]
    return ", ".join(shown) if len(shown) <= 10 else f"{shown[0]}–{shown[-1]}"


def lead_sentence(structured: RanksStructured, *, name_file: bool = True) -> str:
    """The report's first line: the straggler at collectives when the ranks meet at some, else
    the slowest rank (or run) by time (markdown)."""
    stragglers = structured.get("stragglers")
    if stragglers is not None:
        return straggler_sentence(stragglers)
    return slowest_sentence(structured["slowest"], structured["label"], name_file=name_file)


def slowest_sentence(slowest: SlowestRank, label: str, *, name_file: bool = True) -> str:
    """The report's first line: which rank (or run) is slowest, by how much (markdown); the
    file is named unless ``name_file`` is False (the ranks of one run's trace)."""
    name = f"{label} {slowest['label']}"
    if name_file:
        name += f" ({Path(slowest['path']).name})"
    value = format_duration(slowest["value_us"])
    median = format_duration(slowest["median_us"])
    above = f"{slowest['over_median'] - 1:.1%} above" if slowest["over_median"] else "against"
    if slowest["measure"] == "cpu_wall_us":
        return f"Slowest {label}: **{name}**, CPU wall time {value}, {above} the median {median}."
    return (
        f"Slowest {label}: **{name}**, {value} of GPU time outside exposed communication, "
        f"{above} the median {median}. Ranks that meet at collectives wait for it there."
    )


def _rank_table(ranks: list[RankRow], label: str) -> list[str]:
    in_one_run = any("processes" in row for row in ranks)
    holder = "processes" if in_one_run else "file"
    if not any(row["gpu_events"] for row in ranks):  # GPU columns would be zeros
        lines = [f"| {label} | {holder} | CPU wall |", "|---|---|---:|"]
        for row in ranks:
            lines.append(
                f"| {row['label']} | {_holder(row, in_one_run)} | "
                f"{format_duration(row['cpu_wall_us'])} |"
            )
        return [*lines, ""]
    lines = [
        f"| {label} | {holder} | GPU span | compute "
        "| communication | idle | host-bound idle | GPU events | CPU wall |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in ranks:
        lines.append(
            f"| {row['label']} | {_holder(row, in_one_run)} | "
            f"{format_duration(row['kernel_span_us'])} | {format_duration(row['compute_us'])} | "
            f"{format_duration(row['communication_us'])} | {format_duration(row['idle_us'])} | "
            f"{format_duration(row['host_bound_idle_us'])} | {row['gpu_events']} | "
            f"{format_duration(row['cpu_wall_us'])} |"
        )
    return [*lines, ""]


def _holder(row: RankRow, in_one_run: bool) -> str:
    """The rank table's second column: the file, or the processes of a run under the rank."""
    if in_one_run:
        return ", ".join(_cell(role) for role in row.get("processes", []))
    return f"`{Path(row['path']).name}`"


def _spread_table(
    title: str, kind: str, rows: list[SpreadRow], ranks: list[RankRow], label: str
) -> list[str]:
    if not rows:
        return []
    labels = [str(row["label"]) for row in ranks]
    wide = len(labels) <= _MAX_RANK_COLUMNS
    columns = [f"{label} {name}" for name in labels] if wide else ["min", "median", "max"]
    lines = [
        title,
        "",
        f"| {kind} | calls | " + " | ".join(columns) + f" | slowest {label} | max / median |",
        "|---|---:|" + "---:|" * len(columns) + "---:|---:|",
    ]
    for row in rows:
        times = list(row["by_rank_us"].values())
        shown = times if wide else [min(times), row["median_us"], row["max_us"]]
        cells = " | ".join(format_duration(value) for value in shown)
        spread = f"{row['over_median']:.2f}×" if row["over_median"] else "-"
        lines.append(
            f"| {_cell(row['name'])} | {row['calls']} | {cells} | {row['slowest']} | {spread} |"
        )
    return [*lines, ""]


def _cell(name: str) -> str:
    short = name if len(name) <= _NAME_WIDTH else name[: _NAME_WIDTH - 1] + "…"
    return "`" + short.replace("|", "\\|").replace("`", "'") + "`"
