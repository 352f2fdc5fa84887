"""The regression gate: does a real slowdown pass the allowed threshold?"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ncompass.analysis.comparison.result import SLOWER, UNKNOWN, Change, Comparison
from ncompass.errors import NcompassError

_PERCENT = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*%?\s*$")


@dataclass(frozen=True)
class GateResult:
    """The gate's decision on one change.

    Attributes:
        change: The change it judged (the whole-run time, or one marker).
        threshold: The slowdown allowed, as a fraction (0.05 for 5 %).
        failed: Whether the change is a real slowdown beyond the threshold.
        message: One line saying why.
    """

    change: Change
    threshold: float
    failed: bool
    message: str


def parse_threshold(text: str) -> float:
    """``"5%"`` (or ``"5"``) -> 0.05.

    Raises:
        NcompassError: The text is not a non-negative percentage.
    """
    match = _PERCENT.match(text)
    if match is None:
        raise NcompassError(f"--fail-if-slower {text!r}: expected a percentage such as 5% or 2.5%")
    return float(match.group(1)) / 100.0


def check_slowdown(
    comparison: Comparison, threshold: float, marker: str | None = None
) -> GateResult:
    """Judge the whole-run time (or one marker) against the allowed slowdown.

    The gate fails when the change is real (its interval lies above 1) and the ratio of the
    means exceeds ``1 + threshold``. With one sample a side there is no interval: the ratio
    alone decides, and the message says so.

    Args:
        comparison: The comparison.
        threshold: Allowed slowdown as a fraction.
        marker: A marker name to judge instead of the whole run.

    Returns:
        The decision.

    Raises:
        NcompassError: The marker is on neither side, or on one side only.
    """
    change = comparison.run_time if marker is None else _marker_change(comparison, marker)
    label = change.name if marker is None else f"marker {marker!r}"
    ratio = change.ratio if change.ratio is not None else 1.0
    over = ratio > 1.0 + threshold
    if change.verdict == UNKNOWN:
        failed = over
        reason = "one sample a side, so no interval: the ratio alone decides"
    else:
        failed = over and change.verdict == SLOWER
        interval = change.interval
        reason = f"interval ×{interval.low:.3f}–×{interval.high:.3f}" if interval else ""
    verdict = "FAILED" if failed else "passed"
    message = (
        f"gate {verdict}: {label} {ratio - 1:+.1%} ({reason}; {change.verdict}), "
        f"allowed +{threshold:.1%}"
    )
    return GateResult(change, threshold, failed, message)


def _marker_change(comparison: Comparison, name: str) -> Change:
    change = comparison.marker(name)
    if change is None:
        known = ", ".join(sorted(c.name for c in comparison.markers)[:10]) or "none"
        raise NcompassError(
            f"--marker {name!r}: no marker of that name in either side's traces "
            f"(markers: {known}). Check the name in the spec or `ncompass summarize`."
        )
    if change.before is None or change.after is None:
        side = "before" if change.before is None else "after"
        raise NcompassError(
            f"--marker {name!r}: the marker is missing from the {side} traces, so there is "
            "nothing to compare; check both runs used the same spec."
        )
    return change
