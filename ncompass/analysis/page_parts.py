"""Pieces the HTML reports share: the report style and colours, sortable tables (inline CSS and
script) and the timeline SVG."""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from typing import Any

from ncompass._format import format_duration

SORTABLE_CSS = (
    "table.sortable th{cursor:pointer;user-select:none;background:#fafafa}"
    " table.sortable th:after{content:' ⇅';color:#bbb}"
)
TIMELINE_CSS = (
    "svg text{font-family:system-ui,sans-serif;font-size:12px} .legend{color:#555;font-size:.85rem}"
)
# The breakdown, timeline and legend colours of every report.
COLOURS = {
    "lane": "#2f7ed8",
    "computation": "#2f7ed8",
    "non_compute": "#f28f43",
    "idle_host": "#c42525",
    "idle_other": "#bbbbbb",
    "cpu": "#6a51a3",
    "gpu": "#31a354",
}
# The style of the summary and rank reports (compare's page has its own, lighter one).
REPORT_CSS = " ".join(
    (
        "body{font-family:system-ui,sans-serif;margin:2rem auto;max-width:1100px;color:#222;",
        "padding:0 1rem} h1{font-size:1.5rem}",
        "h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #ddd}",
        "table{border-collapse:collapse;font-size:.85rem;width:100%}",
        "td,th{border-bottom:1px solid #eee;padding:.25rem .5rem;text-align:right}",
        "td:first-child,th:first-child{text-align:left;font-family:ui-monospace,monospace;",
        "word-break:break-all} .sev-high{color:#c42525;font-weight:600}",
        ".sev-medium{color:#d9822b;font-weight:600} .sev-low{color:#666}",
        ".evidence{color:#555;font-size:.8rem}",
        ".legend span{display:inline-block;margin-right:1rem;font-size:.85rem}",
        ".swatch{display:inline-block;width:.8rem;height:.8rem;margin-right:.3rem;",
        "vertical-align:middle} svg text{font-family:system-ui,sans-serif;font-size:12px}",
        SORTABLE_CSS,
    )
)

# Click a header to sort by it; numbers sort by their data-sort value, text by its content.
SORTABLE_SCRIPT = """
document.querySelectorAll("table.sortable th").forEach(function (header, column) {
  column = header.cellIndex;
  header.addEventListener("click", function () {
    var table = header.closest("table"), body = table.tBodies[0];
    var descending = header.dataset.order !== "desc";
    header.dataset.order = descending ? "desc" : "asc";
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = a.cells[column], y = b.cells[column];
      var p = x.dataset.sort, q = y.dataset.sort, order;
      if (p !== undefined && q !== undefined) { order = parseFloat(p) - parseFloat(q); }
      else { order = x.textContent.localeCompare(y.textContent); }
      return descending ? -order : order;
    });
    rows.forEach(function (row) { body.appendChild(row); });
  });
});
"""
_LABEL_WIDTH = 200
_PLOT_WIDTH = 780
_BUSY_HEIGHT = 60
_LANE_HEIGHT = 22


def timeline_svg(timeline: Mapping[str, Any]) -> str:
    """Busy time over the run (a step area per bin) and one lane per top-level marker name.

    Args:
        timeline: :func:`ncompass.analysis.timeline.busy_timeline`'s dict.

    Returns:
        An inline ``<svg>`` (with a caption), or a sentence when the run has no span.
    """
    busy: list[float] = timeline.get("busy") or []
    if not busy:
        return "<p>No events to draw a timeline from.</p>"
    source = timeline["source"]
    span = timeline["end_us"] - timeline["start_us"]
    step = _PLOT_WIDTH / len(busy)
    lanes: list[dict[str, Any]] = timeline.get("lanes") or []
    height = _BUSY_HEIGHT + 8 + _LANE_HEIGHT * len(lanes) + 24
    label = "GPU busy" if source == "gpu" else "CPU in markers"
    parts = [
        f'<svg class="timeline" role="img" aria-label="Timeline of the run" '
        f'viewBox="0 0 {_LABEL_WIDTH + _PLOT_WIDTH + 10} {height}" width="100%">',
        f'<text x="{_LABEL_WIDTH - 8}" y="{_BUSY_HEIGHT / 2 + 4}" text-anchor="end">{label}</text>',
        f'<rect x="{_LABEL_WIDTH}" y="0" width="{_PLOT_WIDTH}" height="{_BUSY_HEIGHT}" '
        'fill="#f4f4f4"/>',
        _area(busy, step, COLOURS[source]),
    ]
    for position, lane in enumerate(lanes):
        y = _BUSY_HEIGHT + 8 + position * _LANE_HEIGHT
        name = lane["name"]
        shown = name if len(name) <= 28 else name[:27] + "…"
        title = f"{name}: {lane['calls']} calls, {format_duration(lane['total_us'])}"
        parts.append(
            f'<text x="{_LABEL_WIDTH - 8}" y="{y + 15}" text-anchor="end">'
            f"<title>{escape(title)}</title>{escape(shown)}</text>"
        )
        parts.extend(
            f'<rect x="{_LABEL_WIDTH + first * step:.1f}" y="{y + 3}" '
            f'width="{max(1.0, (last - first) * step):.1f}" height="{_LANE_HEIGHT - 6}" '
            f'fill="{COLOURS["lane"]}"><title>{escape(title)}</title></rect>'
            for first, last in lane["ranges"]
        )
    axis = height - 6
    for tick in range(5):
        x = _LABEL_WIDTH + _PLOT_WIDTH * tick / 4
        anchor = "start" if tick == 0 else "end" if tick == 4 else "middle"
        parts.append(
            f'<text x="{x:.1f}" y="{axis}" text-anchor="{anchor}" fill="#666">'
            f"{format_duration(span * tick / 4)}</text>"
        )
    parts.append("</svg>")
    total = sum(busy) / len(busy)
    caption = (
        f'<p class="legend">{label}: {total:.1%} of the run '
        f"({format_duration(span)}, {len(busy)} bins); the lanes are the top-level markers."
        "</p>"
    )
    return "".join(parts) + caption


def _area(busy: list[float], step: float, colour: str) -> str:
    """A step area: each bin's height is its busy share."""
    base = _BUSY_HEIGHT
    commands = [f"M{_LABEL_WIDTH} {base}"]
    for index, share in enumerate(busy):
        commands.append(
            f"V{base - share * _BUSY_HEIGHT:.1f}H{_LABEL_WIDTH + (index + 1) * step:.1f}"
        )
    commands.append(f"V{base}Z")
    return f'<path d="{"".join(commands)}" fill="{colour}"/>'
