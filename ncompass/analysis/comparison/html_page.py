"""The comparison as one self-contained HTML page: inline CSS and script, sortable tables."""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from pathlib import Path
from typing import Any

from ncompass._format import format_duration
from ncompass.analysis.comparison.kernel_names import distinct_short_names, short_kernel_name
from ncompass.analysis.comparison.markdown import (
    PROCESSES,
    describe_change,
    reading_note,
    verdict_cell,
)
from ncompass.analysis.page_parts import SORTABLE_CSS, SORTABLE_SCRIPT, TIMELINE_CSS, timeline_svg

_CSS = " ".join(
    (
        "body{font-family:system-ui,sans-serif;margin:2rem auto;max-width:1200px;color:#222;",
        "padding:0 1rem} h1{font-size:1.5rem}",
        "h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #ddd}",
        "table{border-collapse:collapse;font-size:.85rem;width:100%}",
        "td,th{border-bottom:1px solid #eee;padding:.25rem .5rem;text-align:right}",
        SORTABLE_CSS,
        TIMELINE_CSS,
        "td:first-child,th:first-child{text-align:left}",
        "td:first-child{font-family:ui-monospace,monospace;word-break:break-all}",
        ".slower{color:#c42525;font-weight:600} .faster{color:#2a8a3e;font-weight:600}",
        ".same,.unknown{color:#666} .new,.vanished{color:#6a51a3;font-weight:600}",
        ".note{color:#555;font-size:.85rem}",
        ".warning{color:#8a4b00;font-size:.9rem}",
    )
)
_KINDS = (("markers", "Markers"), ("kernels", "GPU kernels"), ("cpu_ops", "CPU operators"))


def render_comparison_html(
    comparison: dict[str, Any],
    *,
    top: int = 50,
    timelines: tuple[Mapping[str, Any], Mapping[str, Any]] = ({}, {}),
) -> str:
    """Render ``Comparison.to_dict()`` as one HTML page.

    Args:
        comparison: The comparison's dict.
        top: Rows per table (the largest changes of time).
        timelines: The busy timelines of the first trace of each side (none: no pictures).

    Returns:
        The page; it references nothing outside itself.
    """
    before = ", ".join(Path(path).name for path in comparison["before"])
    after = ", ".join(Path(path).name for path in comparison["after"])
    title = f"Comparison: {before} → {after}"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{escape(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
        "<h2>Overall</h2><ul>",
    ]
    for change in comparison["overall"]:
        parts.append(_item(change))
    parts.append("</ul>")
    biggest = comparison["biggest_changes"]
    parts.append("<h2>Biggest real changes</h2>")
    if biggest:
        parts.append("<ol>" + "".join(_item(change, kind=True) for change in biggest) + "</ol>")
    else:
        parts.append("<p>No real change in any entry.</p>")
    parts.append(f'<p class="note">{escape(reading_note(comparison))} Click a column to sort.</p>')
    for warning in comparison.get("warnings", []):
        parts.append(f'<p class="warning"><b>Warning:</b> {escape(warning)}.</p>')
    for side, timeline, paths in zip(
        ("Before", "After"), timelines, (comparison["before"], comparison["after"]), strict=True
    ):
        if timeline.get("busy"):
            parts.append(f"<h2>{side}: {escape(Path(paths[0]).name)}</h2>")
            parts.append(timeline_svg(timeline))
    kinds = (PROCESSES, *_KINDS) if "processes" in comparison else _KINDS
    for key, heading in kinds:
        rows = comparison[key][:top]
        if rows:
            names = distinct_short_names([row["name"] for row in rows])
            parts.append(f"<h2>{heading}</h2>")
            parts.append(_table(rows, names if key == "kernels" else None))
    parts.append(f"<script>{SORTABLE_SCRIPT}</script></body></html>")
    return "\n".join(parts) + "\n"


def _item(change: dict[str, Any], *, kind: bool = False) -> str:
    label = f"{change['kind']} " if kind else ""
    name = change["name"]
    shown = short_kernel_name(name) if change["kind"] == "kernel" else name
    return (
        f'<li>{escape(label)}<b title="{escape(_full_name(change))}">{escape(shown)}</b>: '
        f'<span class="{escape(change["verdict"])}">{escape(describe_change(change))}</span></li>'
    )


def _table(rows: list[dict[str, Any]], short_names: dict[str, str] | None) -> str:
    header = (
        '<table class="sortable"><thead><tr><th>name</th><th>calls before</th>'
        "<th>calls after</th><th>before</th><th>after</th><th>change</th><th>ratio</th>"
        "<th>interval</th><th>typical call</th><th>verdict</th></tr></thead><tbody>"
    )
    body = [header]
    for row in rows:
        name = row["name"]
        shown = short_names.get(name, name) if short_names else name
        before, after = row["before"], row["after"]
        interval = row["interval"]
        typical = row.get("lower_quartile_ratio")
        cells = [
            f'<td title="{escape(_full_name(row))}">{escape(shown)}</td>',
            _number(before["calls"] if before else None, f"{before['calls']:g}" if before else "-"),
            _number(after["calls"] if after else None, f"{after['calls']:g}" if after else "-"),
            _duration(before["total_us"] if before else None),
            _duration(after["total_us"] if after else None),
            _number(row["delta_us"], _signed(row["delta_us"])),
            _number(row["ratio"], f"{row['ratio']:.3f}" if row["ratio"] is not None else "-"),
            _number(
                interval[0] if interval else None,
                f"{interval[0]:.3f}–{interval[1]:.3f}" if interval else "-",
            ),
            _number(typical, f"{typical:.3f}" if typical is not None else "-"),
            f'<td class="{escape(row["verdict"])}" title="{escape(row.get("reason", ""))}">'
            f"{escape(verdict_cell(row))}</td>",
        ]
        body.append("<tr>" + "".join(cells) + "</tr>")
    body.append("</tbody></table>")
    return "".join(body)


def _full_name(row: dict[str, Any]) -> str:
    members = [*row.get("names_before", []), *row.get("names_after", [])]
    if not members:
        return str(row["name"])
    return f"{row['name']} (matched by normalised name)\n" + "\n".join(dict.fromkeys(members))


def _duration(value: float | None) -> str:
    return _number(value, format_duration(value) if value is not None else "-")


def _signed(value: float) -> str:
    return ("+" if value >= 0 else "−") + format_duration(abs(value))


def _number(value: float | None, text: str) -> str:
    sort = "" if value is None else f' data-sort="{value!r}"'
    return f"<td{sort}>{escape(text)}</td>"
