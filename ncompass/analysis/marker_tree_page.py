"""The marker tree as a sortable HTML table: each marker indented under its enclosing one."""

from __future__ import annotations

from html import escape

from ncompass._format import format_duration
from ncompass.analysis.marker_tree import MarkerTreeRow


def marker_tree_html(rows: list[MarkerTreeRow] | None) -> list[str]:
    """A short note and the table (nothing without rows). Sorting by a column orders all rows
    by it (the tree's order is the table's first, ``data-sort`` of the first column)."""
    if not rows:
        return []
    body = "".join(
        f'<tr><td data-sort="{position}" title="{escape(" › ".join(row["path"]))}" '
        f'style="padding-left:{0.4 + 1.2 * row["depth"]:.1f}em">{escape(row["name"])}</td>'
        f'<td data-sort="{row["calls"]}">{row["calls"]}</td>'
        f'<td data-sort="{row["self_us"]!r}">{format_duration(row["self_us"])}</td>'
        f'<td data-sort="{row["total_us"]!r}">{format_duration(row["total_us"])}</td></tr>'
        for position, row in enumerate(rows)
    )
    return [
        "<p>Each marker under the marker that encloses it; self is its time less the markers "
        "nested in it, total includes them. Click a column to sort.</p>",
        '<table class="sortable marker-tree"><thead><tr><th>marker</th><th>calls</th>'
        f"<th>self</th><th>total</th></tr></thead><tbody>{body}</tbody></table>",
    ]
