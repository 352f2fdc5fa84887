"""Render a summary as one self-contained HTML page: inline CSS and SVG charts, no network."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any, Literal, cast

from ncompass._format import format_duration
from ncompass.analysis.comparison.kernel_names import distinct_short_names
from ncompass.analysis.compiled_region_text import compiled_region_lines
from ncompass.analysis.evidence_text import evidence_sentence
from ncompass.analysis.markdown_report import compiled_headline
from ncompass.analysis.marker_tree_page import marker_tree_html
from ncompass.analysis.page_parts import COLOURS, REPORT_CSS, SORTABLE_SCRIPT, timeline_svg
from ncompass.analysis.printable_names import read_printable
from ncompass.analysis.processes_page import run_html_sections
from ncompass.analysis.roofline_page import roofline_section
from ncompass.analysis.setup_text import setup_sentences
from ncompass.analysis.steady_timeline import steady_timeline
from ncompass.analysis.summary_types import (
    BottleneckRow,
    BreakdownRow,
    CompilePhases,
    CpuOperation,
    KernelOperation,
    MarkerRow,
    StructuredSummary,
    Summary,
    Timeline,
)
from ncompass.traces.unrecorded_markers import unrecorded_markers_advice


class SummaryReport(dict[str, Any]):
    """A summary (``{"markdown", "structured"}``, a dict as before) that Jupyter displays as
    its HTML report."""

    def to_html(self, *, top: int = 20) -> str:
        """The summary as one self-contained HTML page (see :func:`render_html`)."""
        return render_html(cast(Summary, self), top=top)

    def _repr_html_(self) -> str:
        return self.to_html()


def render_html(summary: Summary, *, top: int = 20) -> str:
    """Render a summary (as returned by ``summarize_trace``) as one HTML page.

    Args:
        summary: ``{"markdown": ..., "structured": ...}``.
        top: How many markers and kernels to chart and list.

    Returns:
        The page; it references nothing outside itself.
    """
    structured = summary["structured"]
    trace = structured["trace"]
    has_gpu = bool(trace["gpu_events"])
    operations = structured["operations"]
    title = f"Trace summary: {Path(trace['path']).name}"
    run = structured.get("run")
    who = f"Rank {trace['rank']}"
    if run is not None:
        who = f"Run of {len(run['processes'])} processes (in total; per process below)"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{escape(title)}</title><style>{REPORT_CSS}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
        f"<p>{escape(who)} · CPU wall time {format_duration(trace['cpu_wall_us'])} · "
        f"{trace['markers']} marker ranges · "
        + (f"{trace['gpu_events']} GPU events" if has_gpu else "CPU only (no GPU events)")
        + "</p>",
        *(
            [f"<p>{escape(unrecorded_markers_advice(trace['unrecorded_markers']))}</p>"]
            if "unrecorded_markers" in trace
            else []
        ),
        *_compile_phases(trace.get("compile_phases") or {}),
        *(f"<p>{escape(line)}</p>" for line in setup_sentences(trace)),
        "<h2>Timeline</h2>",
        *_timeline_parts(_timeline(structured)),
        *(["<h2>GPU time</h2>", _breakdown_chart(structured["breakdown"])] if has_gpu else []),
        "<h2>Markers</h2>",
        *marker_tree_html(structured.get("marker_tree")),
        _marker_chart([op for op in operations if op["kind"] == "marker"][:top], has_gpu),
        *roofline_section(structured, top),
        *_compiled_code(structured["markers"], top),
        *_compiled_regions(structured),
        "<h2>Bottlenecks</h2>",
        _bottlenecks(structured["bottlenecks"]),
        "<h2>Recommendations</h2>",
        _list(structured["recommendations"]) or "<p>None.</p>",
        *(
            [
                "<h2>GPU kernels</h2>",
                _kernel_table([op for op in operations if op["kind"] == "kernel"][:top]),
            ]
            if has_gpu
            else []
        ),
        "<h2>CPU operators</h2>",
        _operator_table([op for op in operations if op["kind"] == "cpu_op"][:top]),
        *(run_html_sections(run) if run is not None else []),
        f"<script>{SORTABLE_SCRIPT}</script></body></html>",
    ]
    return "\n".join(parts) + "\n"


def _timeline_parts(timeline: Mapping[str, Any]) -> list[str]:
    """The timeline from the steady state when setup fills its start, the whole run a click
    away (see :mod:`.steady_timeline`); else the whole run."""
    steady = steady_timeline(timeline)
    if steady is None:
        return [timeline_svg(timeline)]
    cropped, folded = steady
    return [
        f'<p class="legend">Setup folded: the first {format_duration(folded)} of the run, '
        "before the first busy time or marker, is left out below.</p>",
        f'<div class="steady-timeline">{timeline_svg(cropped)}</div>',
        '<details class="whole-timeline"><summary>Show the whole run, setup included'
        f"</summary>{timeline_svg(timeline)}</details>",
    ]


def _timeline(structured: StructuredSummary) -> Timeline | dict[str, Any]:
    """The summary's timeline; a summary made before it had one reads its trace once more."""
    timeline = structured.get("timeline")
    if timeline is not None:
        return timeline
    path = Path(structured["trace"]["path"])
    if not path.is_file():
        return {}
    from ncompass.analysis.timeline import busy_timeline

    return busy_timeline(read_printable(path, progress=False))


def _breakdown_chart(breakdown: BreakdownRow) -> str:
    span = breakdown["kernel_span_us"]
    host_bound = breakdown["idle_gaps"]["host_bound_us"]
    segments = [
        ("Computation", breakdown["compute_us"], COLOURS["computation"]),
        ("Communication / memory", breakdown["non_compute_us"], COLOURS["non_compute"]),
        ("Idle, waiting for host", host_bound, COLOURS["idle_host"]),
        ("Idle, other", max(0.0, breakdown["idle_us"] - host_bound), COLOURS["idle_other"]),
    ]
    width, height = 1000, 40
    x = 0.0
    rects = []
    for label, value, colour in segments:
        segment = width * value / span if span > 0 else 0.0
        if segment > 0:
            rects.append(
                f'<rect x="{x:.2f}" y="0" width="{segment:.2f}" height="{height}" '
                f'fill="{colour}"><title>{escape(label)}: {format_duration(value)}</title></rect>'
            )
        x += segment
    legend = "".join(
        f'<span><i class="swatch" style="background:{colour}"></i>{escape(label)} '
        f"{format_duration(value)} ({value / span if span > 0 else 0:.1%})</span>"
        for label, value, colour in segments
    )
    return (
        f"<p>Kernel span {format_duration(span)}.</p>"
        f'<svg role="img" aria-label="GPU time breakdown" viewBox="0 0 {width} {height}" '
        f'width="100%" preserveAspectRatio="none">{"".join(rects)}</svg>'
        f'<p class="legend">{legend}</p>'
    )


def _marker_chart(markers: Sequence[MarkerRow], has_gpu: bool) -> str:
    if not markers:
        return "<p>No markers in this trace.</p>"
    label_width, bar_width = 330, 560
    row = 34 if has_gpu else 20
    bars: tuple[tuple[int, Literal["cpu_total_us", "gpu_total_us"], str], ...] = (
        ((2, "cpu_total_us", "cpu"), (16, "gpu_total_us", "gpu"))
        if has_gpu
        else ((2, "cpu_total_us", "cpu"),)
    )
    longest = max(max(m["cpu_total_us"], m["gpu_total_us"]) for m in markers) or 1.0
    rows = []
    for position, marker in enumerate(markers):
        y = position * row
        name = _shorten(marker["name"], 44)
        rows.append(
            f'<text x="{label_width - 8}" y="{y + 18}" text-anchor="end">'
            f"<title>{escape(marker['name'])}</title>{escape(name)}</text>"
        )
        for offset, key, colour in bars:
            value = marker[key]
            length = bar_width * value / longest
            rows.append(
                f'<rect x="{label_width}" y="{y + offset}" width="{length:.2f}" height="12" '
                f'fill="{COLOURS[colour]}"><title>{colour.upper()} {format_duration(value)}'
                f"</title></rect>"
                f'<text x="{label_width + length + 4:.2f}" y="{y + offset + 10}">'
                f"{format_duration(value)}</text>"
            )
    height = row * len(markers)
    legend = (
        f'<p class="legend"><span><i class="swatch" style="background:{COLOURS["cpu"]}"></i>'
        "CPU time (inclusive)</span>"
        + (
            f'<span><i class="swatch" style="background:{COLOURS["gpu"]}"></i>'
            "GPU time of the kernels launched inside</span>"
            if has_gpu
            else ""
        )
        + "</p>"
    )
    return (
        f'<svg role="img" aria-label="Time per marker" viewBox="0 0 1000 {height}" '
        f'width="100%">{"".join(rows)}</svg>{legend}'
    )


def _compiled_code(markers: list[MarkerRow], top: int) -> list[str]:
    compiled = [marker for marker in markers if marker.get("compiled_kernels")]
    if not compiled:
        return []
    items = []
    for marker in compiled:
        kernels = marker["compiled_kernels"]
        rows = "".join(
            f'<tr><td title="{escape(k["name"])}">{escape(_shorten(k["name"], 140))}</td>'
            f"{_count(k['calls'])}{_duration(k['total_us'])}</tr>"
            for k in kernels[:top]
        )
        items.append(
            f"<li><code>{escape(marker['name'])}</code>: {escape(compiled_headline(kernels))}"
            f'<table class="sortable"><thead><tr><th>Inductor kernel</th><th>calls</th>'
            f"<th>total</th></tr></thead><tbody>{rows}</tbody></table></li>"
        )
    return ["<h2>Compiled code</h2>", "<ul>" + "".join(items) + "</ul>"]


def _compiled_regions(structured: StructuredSummary) -> list[str]:
    """The compiled regions' time and what no marker holds (markdown_report's paragraph)."""
    listed = any(marker.get("compiled_kernels") for marker in structured["markers"])
    lines = compiled_region_lines(structured.get("compiled_code"), heading=False)
    if not lines:
        return []
    heading = [] if listed else ["<h2>Compiled code</h2>"]
    return [*heading, f"<p>{escape(lines[0])}</p>"]


def _bottlenecks(bottlenecks: list[BottleneckRow]) -> str:
    if not bottlenecks:
        return "<p>No rule fired: nothing stands out.</p>"
    items = []
    for finding in bottlenecks:
        evidence = escape(evidence_sentence(finding["evidence"]))
        items.append(
            f'<li><span class="sev-{escape(finding["severity"])}">[{escape(finding["severity"])}]'
            f"</span> <b>{escape(finding['rule'])}</b>: {escape(finding['title'])}"
            f'<div class="evidence">{evidence}</div></li>'
        )
    return "<ol>" + "".join(items) + "</ol>"


def _kernel_table(kernels: list[KernelOperation]) -> str:
    if not kernels:
        return "<p>No GPU events.</p>"
    names = distinct_short_names([k["name"] for k in kernels])
    rows = "".join(
        f'<tr><td title="{escape(k["name"])}">{escape(names[k["name"]])}</td>'
        f"<td>{escape(k['class'])}</td>{_count(k['calls'])}{_duration(k['total_us'])}"
        f"{_duration(k['mean_us'])}{_share(k['share_of_gpu_time'])}</tr>"
        for k in kernels
    )
    return (
        '<table class="sortable"><thead><tr><th>kernel</th><th>class</th><th>calls</th>'
        f"<th>total</th><th>mean</th><th>GPU share</th></tr></thead><tbody>{rows}</tbody></table>"
    )


def _operator_table(operators: list[CpuOperation]) -> str:
    if not operators:
        return "<p>No CPU operators in this trace.</p>"
    rows = "".join(
        f'<tr><td title="{escape(op["name"])}">{escape(_shorten(op["name"], 140))}</td>'
        f"{_count(op['calls'])}{_duration(op['total_us'])}{_duration(op['mean_us'])}"
        f"{_duration(op['max_us'])}{_share(op['share_of_cpu_time'])}</tr>"
        for op in operators
    )
    return (
        '<table class="sortable"><thead><tr><th>operator</th><th>calls</th><th>total</th>'
        "<th>mean</th><th>max</th><th>share of CPU wall time</th></tr></thead>"
        f"<tbody>{rows}</tbody></table>"
    )


def _count(value: int) -> str:
    return f'<td data-sort="{value}">{value}</td>'


def _duration(value: float) -> str:
    return f'<td data-sort="{value!r}">{format_duration(value)}</td>'


def _share(value: float) -> str:
    return f'<td data-sort="{value!r}">{value:.1%}</td>'


def _list(items: list[str]) -> str:
    return "<ul>" + "".join(f"<li>{escape(item)}</li>" for item in items) + "</ul>" if items else ""


def _number(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1 else f"{value:.1f}"
    return str(value)


def _shorten(name: str, width: int) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"


def _compile_phases(phases: CompilePhases | dict[str, Any]) -> list[str]:
    if not phases.get("ranges"):
        return []
    return [
        f"<p>torch.compile compiled during the trace: {phases['ranges']} ranges of its own "
        f"phases ({format_duration(phases['total_us'])} inside them), kept apart from the "
        "markers as setup.</p>"
    ]
