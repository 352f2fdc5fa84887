"""A run's processes and ranks as HTML parts of the summary page (see :mod:`.processes`)."""

from __future__ import annotations

from html import escape

from ncompass._format import format_duration
from ncompass.analysis.ranks_page import ranks_html_sections
from ncompass.analysis.ranks_types import ProcessRow, RunReport


def run_html_sections(run: RunReport) -> list[str]:
    """The per-process table and the per-rank report, as ``<h2>`` sections of a page."""
    rows = run["processes"]
    parts = [f"<h2>Processes ({len(rows)})</h2>", _process_table(rows)]
    ranks = run.get("ranks")
    if ranks is not None:
        parts += [
            f"<h2>Ranks ({len(ranks['ranks'])})</h2>",
            "<p>Each rank with the processes under it (workers are counted with their rank).</p>",
            *ranks_html_sections(ranks, heading="h3", table_title=False),
        ]
    return parts


def _process_table(rows: list[ProcessRow]) -> str:
    has_gpu = any(row["gpu_events"] for row in rows)
    body = "".join(
        f'<tr><td title="{escape(row["command"])}">{escape(row["role"])}</td>'
        f"{_count(row['pid'])}<td>{escape(_rank(row))}</td>"
        f"{_duration(row['wall_us'])}{_duration(row['marker_cpu_us'])}{_count(row['markers'])}"
        + (f"{_duration(row['gpu_busy_us'])}{_count(row['gpu_events'])}" if has_gpu else "")
        + "<td>"
        + escape(
            ", ".join(
                f"{marker['name']} {format_duration(marker['cpu_total_us'])}"
                for marker in row["top_markers"]
            )
            or "-"
        )
        + "</td></tr>"
        for row in rows
    )
    gpu_head = "<th>GPU busy</th><th>GPU events</th>" if has_gpu else ""
    return (
        '<table class="sortable"><thead><tr><th>process</th><th>pid</th><th>rank</th>'
        "<th>span</th><th>CPU in markers</th><th>markers</th>"
        f"{gpu_head}<th>top markers</th></tr></thead><tbody>{body}</tbody></table>"
    )


def _rank(row: ProcessRow) -> str:
    if row["rank"] is not None:
        return str(row["rank"])
    return f"({row['under_rank']})" if row["under_rank"] is not None else "-"


def _count(value: int) -> str:
    return f'<td data-sort="{value}">{value}</td>'


def _duration(value: float) -> str:
    return f'<td data-sort="{value!r}">{format_duration(value)}</td>'


__all__ = ["run_html_sections"]
