"""The summary of one trace: the seed's ``{"markdown", "structured"}`` shape."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from ncompass.analysis.breakdown import rank_breakdown
from ncompass.analysis.compiled_regions import compiled_region_stats
from ncompass.analysis.efficiency_rows import add_efficiency
from ncompass.analysis.foreign_events import foreign_events, holds_no_profiler_events
from ncompass.analysis.html_page import SummaryReport
from ncompass.analysis.machine_wait import cpu_waited_share
from ncompass.analysis.markdown_report import render_markdown
from ncompass.analysis.marker_tree import marker_tree
from ncompass.analysis.markers import (
    MarkerStats,
    add_compiled_kernels,
    compiled_kernel_stats,
    marker_stats,
    may_hold_compiled_kernels,
)
from ncompass.analysis.operations import build_operations, kernel_stats
from ncompass.analysis.printable_names import read_printable
from ncompass.analysis.processes import run_report
from ncompass.analysis.rules import RuleInput, find_bottlenecks
from ncompass.analysis.summary_types import Focus, StructuredSummary, Summary
from ncompass.analysis.timeline import busy_timeline
from ncompass.traces.unrecorded_markers import sidecar_unrecorded_markers


def summarize_trace(
    path: str | Path,
    *,
    top: int = 20,
    feedback_context: dict[str, Any] | None = None,
    progress: bool | None = None,
    jobs: int | None = 1,
    efficiency: bool = True,
    peak_flops: float | None = None,
    peak_bandwidth: float | None = None,
    calibrate: bool | None = None,
) -> Summary:
    """Summarize where a trace's time went.

    Args:
        path: A ``.json`` or ``.json.gz`` Chrome/Kineto trace.
        top: How many markers, GPU events and CPU operators to list.
        feedback_context: What the user asked about (``feedback_text``, ``target_module``);
            markers matching the target module are listed under ``structured["focus"]``.
        progress: Progress bar on stderr (None: only on a terminal, for large files).
        jobs: Processes reading a large trace in parts (None: one per core); see
            :func:`~ncompass.traces.link.link_trace`.
        efficiency: Add FLOPs, bytes, the bound and the share of peak (``device``,
            ``model_flops``, ``mfu`` and each row's ``efficiency``; see
            :mod:`~ncompass.analysis.roofline`).
        peak_flops: The device's peak FLOP/s, in place of the table's or the calibration's.
        peak_bandwidth: The device's memory bandwidth (bytes/s), likewise.
        calibrate: Measure this machine's peaks (None: for CPU traces, once, cached).

    Returns:
        ``{"markdown": str, "structured": {"operations", "bottlenecks", "recommendations",
        "markers", "breakdown", "trace", "focus", "timeline"}}`` (the keys and rows are
        :class:`~ncompass.analysis.summary_types.Summary`'s). Each marker lists the Inductor
        kernels compiled from its code (``compiled_kernels``); a compiled marker whose range
        never recorded has an entry too. A run's merged trace (more than one process listed
        under ``ncompass_processes``) also has ``run``: its processes and ranks (see
        :func:`~ncompass.analysis.processes.run_report`). At run time a
        :class:`SummaryReport`, a plain dict that Jupyter shows as its HTML page.

    Raises:
        TraceError: The file is missing, truncated or not a trace.
    """
    trace = read_printable(path, progress=progress, jobs=jobs)
    timeline = busy_timeline(trace)  # first: its sweep's memory comes before the kernel table's
    rank = trace.identity.rank_or(0)
    breakdown = rank_breakdown(trace, rank)
    markers = marker_stats(trace)
    kernels = kernel_stats(trace)
    facts = RuleInput(trace, breakdown, markers, kernels)
    bottlenecks = find_bottlenecks(facts)
    recommendations = list(dict.fromkeys(finding.recommendation for finding in bottlenecks))
    compiled_only: list[MarkerStats] = []
    regions = None
    if may_hold_compiled_kernels(trace):  # a second pass, only over traces of compiled code
        compiled_only = add_compiled_kernels(markers, compiled_kernel_stats(path))
        regions = compiled_region_stats(path)
    wall = trace.cpu_end - trace.cpu_start if trace.cpu_end > trace.cpu_start else 0.0
    structured: StructuredSummary = {
        "operations": build_operations(trace, markers, kernels, top, facts.setup),
        "bottlenecks": [finding.to_dict() for finding in bottlenecks],
        "recommendations": recommendations,
        "markers": [stats.to_dict() for stats in [*markers.values(), *compiled_only]],
        "breakdown": {"rank": rank, **breakdown.to_dict()},
        "trace": {
            "path": str(trace.path),
            "rank": rank,
            "cpu_wall_us": wall,
            "gpu_events": len(trace.gpu),
            "markers": len(trace.markers),
            "launches": len(trace.launches),
            "event_counts": trace.event_counts,
            # torch.compile's own phase ranges: compilation is setup, not a marker
            "compile_phases": {
                "ranges": sum(phase.calls for phase in trace.compile_phases.values()),
                "total_us": sum(phase.total_us for phase in trace.compile_phases.values()),
            },
            "setup": facts.setup.to_dict(),
        },
        "focus": _focus(feedback_context, list(markers)),
        "timeline": timeline,
    }
    if regions is not None:
        structured["compiled_code"] = regions
    waited = cpu_waited_share(path)
    if waited is not None:
        structured["trace"]["cpu_waited_share"] = waited
    unrecorded = sidecar_unrecorded_markers(path)
    if unrecorded is not None:
        structured["trace"]["unrecorded_markers"] = unrecorded
    if trace.markers:
        structured["marker_tree"] = marker_tree(trace)
    if holds_no_profiler_events(trace) and trace.event_counts:  # another tool's trace
        structured["foreign"] = foreign_events(path, top=top)
    run = run_report(trace, top=top)
    if run is not None:  # a run's merged trace: per process and per rank as well
        structured["run"] = run
        if "program_span_us" in run:
            structured["trace"]["program_span_us"] = run["program_span_us"]
    if efficiency:
        add_efficiency(
            structured,
            path,
            peak_flops=peak_flops,
            peak_bandwidth=peak_bandwidth,
            calibrate=calibrate,
        )
    report = SummaryReport(markdown=render_markdown(structured, top=top), structured=structured)
    return cast(Summary, report)


def _focus(feedback_context: dict[str, Any] | None, marker_names: list[str]) -> Focus:
    if not feedback_context:
        return {}
    target = str(feedback_context.get("target_module") or "")
    needles = {part for part in (target, target.rsplit(".", 1)[-1]) if part}
    matching = [name for name in marker_names if any(needle in name for needle in needles)]
    return {
        "feedback_text": str(feedback_context.get("feedback_text") or ""),
        "target_module": target,
        "markers": matching,
    }
