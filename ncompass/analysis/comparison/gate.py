"""The regression gate: does a real slowdown pass the allowed threshold?"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ncompass.analysis.comparison.noise import run_count_warnings
from ncompass.analysis.comparison.result import SLOWER, Change, Comparison
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


def parse_threshold(text: str, option: str = "--fail-if-slower") -> float:
    """``"5%"`` (or ``"5"``) -> 0.05.

    Args:
        text: The percentage as written.
        option: The option it came from, for the error message.

    Raises:
        NcompassError: The text is not a non-negative percentage.
    """
    match = _PERCENT.match(text)
    if match is None:
        raise NcompassError(f"{option} {text!r}: expected a percentage such as 5% or 2.5%")
    return float(match.group(1)) / 100.0


def check_slowdown(
    comparison: Comparison, threshold: float, marker: str | None = None
) -> GateResult:
    """Judge the whole-run time (or one marker) against the allowed slowdown.

    The gate fails when the slowdown is real (the verdict is ``slower``: the interval lies above
    1, the means and the lower quartiles moved beyond the noise band) and the ratio of the means
    exceeds ``1 + threshold``. Without an
    interval (one sample a side) nothing is real, so the gate passes, and its message says
    whether the ratio was beyond the allowed change and could not be judged.

    Args:
        comparison: The comparison.
        threshold: Allowed slowdown as a fraction.
        marker: A marker name to judge instead of the whole run.

    Returns:
        The decision.

    Raises:
        NcompassError: The marker is on neither side, or on one side only; or the sides share
            no marker, CPU operator or kernel (different programs: a gate on them means nothing).
    """
    if marker is None:
        _refuse_unrelated_sides(comparison)
    change = comparison.run_time if marker is None else _marker_change(comparison, marker)
    label = change.name if marker is None else f"marker {marker!r}"
    ratio = change.ratio if change.ratio is not None else 1.0
    allowed = max(threshold, change.noise)
    over = ratio > 1.0 + allowed
    interval = change.interval
    if interval is None:
        failed = False
        reason = (
            "one sample a side, so no interval: not judged; record several runs a side or "
            "profiler steps, or judge a marker with --marker NAME"
            if over
            else "one sample a side, so no interval; within the allowed change"
        )
    else:
        failed = over and change.verdict == SLOWER
        reason = f"interval ×{interval.low:.3f}–×{interval.high:.3f}"
    band = (
        f" (the noise band ±{change.noise:.0%} is wider; --noise sets it)"
        if change.noise > threshold
        else ""
    )
    message = (
        f"gate {'FAILED' if failed else 'passed'}: {label} {ratio - 1:+.1%} ({reason}; "
        f"{change.verdict}), allowed +{threshold:.1%}{band}"
    )
    runs = (len(comparison.before_paths), len(comparison.after_paths))
    for warning in run_count_warnings(*runs, threshold):
        message += f"\nwarning: {warning}"
    return GateResult(change, threshold, failed, message)


def _refuse_unrelated_sides(comparison: Comparison) -> None:
    """Refuse a gate on two sides that share no named work: the run time of one program
    against another's passes or fails for reasons that have nothing to do with a change.

    The markers decide when the before side has some (a few generic operators such as
    ``aten::empty`` are in almost any torch trace); else the operators and kernels do.
    """
    markers = [entry for entry in comparison.markers if entry.before is not None]
    entries = markers or [*comparison.cpu_ops, *comparison.kernels]
    if not entries or any(entry.before and entry.after for entry in entries):
        return
    what = "markers" if markers else "CPU operators or kernels"
    raise NcompassError(
        f"--fail-if-slower: the after traces ({_listed(comparison.after_paths)}) hold none of "
        f"the {what} of the before traces ({_listed(comparison.before_paths)}), so the gate "
        "would judge two different programs; check that both sides ran the same script and "
        "spec, or compare without the gate"
    )


def _listed(paths: tuple[str, ...]) -> str:
    return ", ".join(paths[:2]) + (f" and {len(paths) - 2} more" if len(paths) > 2 else "")


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
