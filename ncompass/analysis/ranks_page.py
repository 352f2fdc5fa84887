"""Render a several-trace summary as one self-contained HTML page: the ranks side by side."""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING

from ncompass._format import format_duration
from ncompass.analysis.comparison.kernel_names import distinct_short_names
from ncompass.analysis.page_parts import COLOURS, REPORT_CSS, SORTABLE_SCRIPT
from ncompass.analysis.ranks import lead_sentence
from ncompass.analysis.ranks_types import RankRow, RanksStructured, SpreadRow
from ncompass.analysis.stragglers import StragglerReport

if TYPE_CHECKING:
    from ncompass.analysis.ranks import RanksSummary

_LABEL_WIDTH, _PLOT_WIDTH, _ROW = 120, 860, 24


def render_ranks_html(summary: RanksSummary) -> str:
    """Render a summary of several traces (as ``summarize_traces`` returns it) as one page.

    Args:
        summary: ``{"markdown": ..., "structured": ...}`` of several traces.

    Returns:
        The page; it references nothing outside itself.
    """
    structured = summary["structured"]
    title = f"Summary of {len(structured['ranks'])} traces"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{escape(title)}</title><style>{REPORT_CSS}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
        *ranks_html_sections(structured, heading="h2"),
        f"<script>{SORTABLE_SCRIPT}</script></body></html>",
    ]
    return "\n".join(parts) + "\n"


def ranks_html_sections(
    structured: RanksStructured, *, heading: str, table_title: bool = True
) -> list[str]:
    """The several-rank report below its title, as HTML parts: the slowest rank, the GPU time
    chart, the rank table, markers and kernels per rank, findings (``heading``: ``h2``;
    ``table_title``: False under a section already titled with the ranks)."""
    ranks = structured["ranks"]
    label = structured["label"]
    has_gpu = any(row["gpu_events"] for row in ranks)
    in_one_run = any("processes" in row for row in ranks)
    slowest = lead_sentence(structured, name_file=not in_one_run)
    stragglers = structured.get("stragglers")

    def title(text: str) -> str:
        return f"<{heading}>{escape(text)}</{heading}>"

    return [
        f"<p>{escape(slowest.replace('**', ''))}</p>",
        *([title(f"GPU time per {label}"), _ranks_chart(ranks, label)] if has_gpu else []),
        # under a page's own "Ranks (N)" section the table needs no second "Ranks" title
        *([title(f"{label.capitalize()}s")] if table_title else []),
        _rank_table(ranks, label),
        *(
            [title("Collectives: waiting and transfer"), _wait_table(stragglers)]
            if stragglers is not None
            else []
        ),
        title("Markers (CPU time)"),
        _spread_table(structured["markers"], ranks, label, "marker"),
        *(
            [
                title("GPU kernels (GPU time)"),
                _spread_table(structured["kernels"], ranks, label, "kernel"),
            ]
            if has_gpu
            else []
        ),
        title(f"Findings per {label}"),
        _findings(ranks, label),
    ]


def _wait_table(stragglers: StragglerReport) -> str:
    """Each rank's collective time split into waiting and transfer, and the waiting it caused."""
    body = "".join(
        f"<tr><td>{escape(row['label'])}</td><td>{row['collectives']}</td>"
        + "".join(
            f"<td>{format_duration(row[key])}</td>"  # type: ignore[literal-required]
            for key in ("collective_us", "wait_us", "transfer_us")
        )
        + f"<td>{row['last_arrivals']}</td><td>{format_duration(row['wait_caused_us'])}</td></tr>"
        for row in stragglers["ranks"]
    )
    return (
        '<table class="sortable"><thead><tr><th>rank</th><th>collectives</th>'
        "<th>in collectives</th><th>waiting</th><th>transfer</th><th>arrived last</th>"
        f"<th>waiting caused</th></tr></thead><tbody>{body}</tbody></table>"
    )


def _ranks_chart(ranks: list[RankRow], label: str) -> str:
    """One stacked bar per rank, on one scale: the longest span fills the width."""
    longest = max(row["kernel_span_us"] for row in ranks) or 1.0
    rows = []
    for position, row in enumerate(ranks):
        y = position * _ROW
        host_bound = row["host_bound_idle_us"]
        segments = [
            ("Computation", row["compute_us"], COLOURS["computation"]),
            ("Communication / memory", row["non_compute_us"], COLOURS["non_compute"]),
            ("Idle, waiting for host", host_bound, COLOURS["idle_host"]),
            ("Idle, other", max(0.0, row["idle_us"] - host_bound), COLOURS["idle_other"]),
        ]
        rows.append(
            f'<text x="{_LABEL_WIDTH - 8}" y="{y + 16}" text-anchor="end">'
            f"{escape(label)} {escape(row['label'])}</text>"
        )
        x = float(_LABEL_WIDTH)
        for name, value, colour in segments:
            width = _PLOT_WIDTH * value / longest
            if width > 0:
                rows.append(
                    f'<rect x="{x:.2f}" y="{y + 2}" width="{width:.2f}" height="{_ROW - 6}" '
                    f'fill="{colour}"><title>{escape(name)}: {format_duration(value)}</title>'
                    "</rect>"
                )
            x += width
    legend = "".join(
        f'<span><i class="swatch" style="background:{COLOURS[key]}"></i>{escape(name)}</span>'
        for key, name in (
            ("computation", "Computation"),
            ("non_compute", "Communication / memory"),
            ("idle_host", "Idle, waiting for host"),
            ("idle_other", "Idle, other"),
        )
    )
    height = _ROW * len(ranks)
    return (
        f'<svg role="img" aria-label="GPU time per {escape(label)}" '
        f'viewBox="0 0 1000 {height}" width="100%">{"".join(rows)}</svg>'
        f'<p class="legend">{legend}</p>'
    )


def _rank_table(ranks: list[RankRow], label: str) -> str:
    in_one_run = any("processes" in row for row in ranks)
    # Without GPU events the GPU columns would be zeros: only the CPU wall is shown.
    has_gpu = any(row["gpu_events"] for row in ranks)
    rows = "".join(
        f'<tr><td title="{escape(row["path"])}">{escape(row["label"])}</td>'
        + (f"<td>{escape(', '.join(row.get('processes', [])))}</td>" if in_one_run else "")
        + (
            f"{_duration(row['kernel_span_us'])}{_duration(row['compute_us'])}"
            f"{_duration(row['communication_us'])}{_duration(row['idle_us'])}"
            f"{_duration(row['host_bound_idle_us'])}{_count(row['gpu_events'])}"
            if has_gpu
            else ""
        )
        + f"{_duration(row['cpu_wall_us'])}</tr>"
        for row in ranks
    )
    gpu_heads = (
        "<th>GPU span</th><th>compute</th><th>communication</th><th>idle</th>"
        "<th>host-bound idle</th><th>GPU events</th>"
    )
    return (
        f'<table class="sortable"><thead><tr><th>{escape(label)}</th>'
        + ("<th>processes</th>" if in_one_run else "")
        + (gpu_heads if has_gpu else "")
        + "<th>CPU wall</th></tr></thead>"
        f"<tbody>{rows}</tbody></table>"
    )


def _spread_table(entries: list[SpreadRow], ranks: list[RankRow], label: str, kind: str) -> str:
    if not entries:
        return f"<p>No {kind}s.</p>"
    labels = [row["label"] for row in ranks]
    names = (
        distinct_short_names([entry["name"] for entry in entries])
        if kind == "kernel"
        else {entry["name"]: entry["name"] for entry in entries}
    )
    head = "".join(f"<th>{escape(label)} {escape(name)}</th>" for name in labels)
    rows = "".join(
        f'<tr><td title="{escape(entry["name"])}">{escape(names[entry["name"]])}</td>'
        f"{_count(entry['calls'])}"
        + "".join(_duration(entry["by_rank_us"][name]) for name in labels)
        + f"<td>{escape(entry['slowest'])}</td>"
        f'<td data-sort="{entry["over_median"]!r}">{entry["over_median"]:.2f}×</td></tr>'
        for entry in entries
    )
    return (
        f'<table class="sortable"><thead><tr><th>{kind}</th><th>calls</th>{head}'
        f"<th>slowest {escape(label)}</th><th>max / median</th></tr></thead>"
        f"<tbody>{rows}</tbody></table>"
    )


def _findings(ranks: list[RankRow], label: str) -> str:
    items = "".join(
        f"<li>{escape(label)} {escape(row['label'])}<ul>"
        + "".join(f"<li>{escape(title)}</li>" for title in row["findings"])
        + "</ul></li>"
        for row in ranks
        if row["findings"]
    )
    return f"<ul>{items}</ul>" if items else "<p>No rule fired on any trace.</p>"


def _count(value: int) -> str:
    return f'<td data-sort="{value}">{value}</td>'


def _duration(value: float) -> str:
    return f'<td data-sort="{value!r}">{format_duration(value)}</td>'
