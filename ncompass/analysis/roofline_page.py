"""The HTML page's "Efficiency" section: a roofline plot of markers and top operators (an
inline SVG, log-log: arithmetic intensity against achieved FLOP/s, under the device's roofs)
and the efficiency columns, drawn by the page itself."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from ncompass.analysis.efficiency_text import efficiency_lines

_WIDTH, _HEIGHT, _LEFT, _BOTTOM = 900, 360, 70, 40
_KIND_COLOURS = {"marker": "#4c78a8", "cpu_op": "#f58518", "kernel": "#54a24b"}


def roofline_section(structured: Mapping[str, Any], top: int = 20) -> list[str]:
    """The section's HTML parts ([] for a summary made without efficiency figures)."""
    if "device" not in structured:
        return []
    parts = ["<h2>Efficiency</h2>"]
    parts += [f"<p>{escape(line)}</p>" for line in efficiency_lines(structured)[2:] if line]
    rows = [
        op
        for op in structured.get("operations", [])
        if (op.get("efficiency") or {}).get("flops_per_s") and op["efficiency"].get("intensity")
    ]
    device = structured.get("device")
    if device is not None and rows:
        parts.append(_plot(device, rows[: 3 * top]))
    if rows:
        parts.append(_table(rows[: 3 * top]))
    return parts


def _plot(device: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> str:
    peak = max(device["peak_flops_per_s"].values())
    bandwidth = device["peak_bytes_per_s"]
    intensities = [row["efficiency"]["intensity"] for row in rows]
    rates = [row["efficiency"]["flops_per_s"] for row in rows]
    x_low = math.floor(math.log10(min([*intensities, peak / bandwidth / 100])))
    x_high = math.ceil(math.log10(max([*intensities, peak / bandwidth * 100])))
    y_low = math.floor(math.log10(max(1.0, min(rates))))
    y_high = math.ceil(math.log10(peak * 2))

    def at(intensity: float, rate: float) -> tuple[float, float]:
        x = _LEFT + (math.log10(intensity) - x_low) / (x_high - x_low) * (_WIDTH - _LEFT - 10)
        y = (_HEIGHT - _BOTTOM) * (1 - (math.log10(max(rate, 1.0)) - y_low) / (y_high - y_low))
        return x, y

    ridge = peak / bandwidth
    roof = [at(10.0**x_low, bandwidth * 10.0**x_low), at(ridge, peak), at(10.0**x_high, peak)]
    shapes = [
        '<polyline fill="none" stroke="#333" stroke-width="2" points="'
        + " ".join(f"{x:.1f},{y:.1f}" for x, y in roof)
        + '"><title>roofline: memory roof up to the ridge, then the compute roof</title>'
        "</polyline>"
    ]
    for exponent in range(x_low, x_high + 1):
        x, _ = at(10.0**exponent, 1.0)
        shapes.append(
            f'<text x="{x:.1f}" y="{_HEIGHT - _BOTTOM + 16}" text-anchor="middle">'
            f"1e{exponent}</text>"
        )
    for exponent in range(y_low, y_high + 1):
        _, y = at(1.0, 10.0**exponent)
        shapes.append(
            f'<text x="{_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">1e{exponent}</text>'
        )
    for row in rows:
        efficiency = row["efficiency"]
        x, y = at(efficiency["intensity"], efficiency["flops_per_s"])
        share = efficiency.get("of_peak")
        label = (
            f"{row['kind']} {row['name']}: {efficiency['flops_per_s']:.3g} FLOP/s, intensity "
            f"{efficiency['intensity']:.3g} FLOP/B, {efficiency.get('bound')}"
            + ("" if share is None else f", {share:.0%} of the roofline")
        )
        shapes.append(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="5" fill="{_KIND_COLOURS[row["kind"]]}" '
            f'fill-opacity="0.7"><title>{escape(label)}</title></circle>'
        )
    legend = "".join(
        f'<span><i class="swatch" style="background:{colour}"></i>{kind}</span>'
        for kind, colour in _KIND_COLOURS.items()
    )
    return (
        f'<svg role="img" aria-label="Roofline" viewBox="0 0 {_WIDTH} {_HEIGHT}" width="100%">'
        f"{''.join(shapes)}"
        f'<text x="{_WIDTH / 2}" y="{_HEIGHT - 4}" text-anchor="middle">arithmetic intensity '
        "(FLOP/byte)</text>"
        f'<text x="12" y="{(_HEIGHT - _BOTTOM) / 2}" transform="rotate(-90 12 '
        f'{(_HEIGHT - _BOTTOM) / 2})" text-anchor="middle">achieved FLOP/s</text></svg>'
        f'<p class="legend">{legend}</p>'
    )


def _table(rows: Sequence[Mapping[str, Any]]) -> str:
    body = []
    for row in rows:
        efficiency = row["efficiency"]
        share = efficiency.get("of_peak")
        body.append(
            f"<tr><td>{escape(row['kind'])}</td><td>{escape(row['name'])}</td>"
            f"<td>{efficiency['flops']:.3g}</td><td>{efficiency['bytes']:.3g}</td>"
            f"<td>{efficiency['flops_per_s']:.3g}</td><td>{efficiency['bytes_per_s']:.3g}</td>"
            f"<td>{efficiency['intensity']:.3g}</td><td>{escape(str(efficiency.get('bound')))}</td>"
            f"<td>{'' if share is None else f'{share:.1%}'}</td></tr>"
        )
    return (
        '<table class="sortable"><thead><tr><th>kind</th><th>name</th><th>FLOPs</th>'
        "<th>bytes</th><th>FLOP/s</th><th>bytes/s</th><th>FLOP/byte</th><th>bound</th>"
        f"<th>of peak</th></tr></thead><tbody>{''.join(body)}</tbody></table>"
    )


__all__ = ["roofline_section"]
