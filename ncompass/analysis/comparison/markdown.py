"""The comparison as markdown: the whole-run answer first, then the tables."""

from __future__ import annotations

from typing import Any

from ncompass._format import format_duration
from ncompass.analysis.comparison.kernel_names import distinct_short_names

_NAME_WIDTH = 80
_KINDS = (("markers", "Markers"), ("kernels", "GPU kernels"), ("cpu_ops", "CPU operators"))
PROCESSES = ("processes", "Processes, matched by role (CPU time in their outermost markers)")


def render_comparison_markdown(comparison: dict[str, Any], *, top: int = 20) -> str:
    """Render ``Comparison.to_dict()`` as markdown.

    Args:
        comparison: The comparison's dict.
        top: Rows per table (the largest changes of time).

    Returns:
        The report, ending with a newline.
    """
    before, after = comparison["before"], comparison["after"]
    lines = [
        f"# Comparison: {_files(before)} before, {_files(after)} after",
        "",
        "## Overall",
        "",
    ]
    for change in comparison["overall"]:
        lines.append(f"- **{change['name']}**: {describe_change(change)}")
    biggest = comparison["biggest_changes"]
    lines += ["", "Biggest real changes:" if biggest else "No real change in any entry.", ""]
    for index, change in enumerate(biggest, 1):
        lines.append(
            f"{index}. {change['kind']} `{_cell(change['name'])}`: {describe_change(change)}"
        )
    if biggest:
        lines.append("")
    lines.append(reading_note(comparison))
    for warning in comparison.get("warnings", []):
        lines += ["", f"**Warning:** {warning}."]
    kinds = (PROCESSES, *_KINDS) if "processes" in comparison else _KINDS
    for key, title in kinds:
        rows = [row for row in comparison[key] if row["verdict"] not in ("new", "vanished")]
        lines += _table(title, rows[:top], len(rows), kernels=key == "kernels")
    appeared = [
        row for key, _ in kinds for row in comparison[key] if row["verdict"] in ("new", "vanished")
    ]
    if appeared:
        lines += [
            "",
            "## New and vanished",
            "",
            "| kind | name | verdict | time per run | calls per run |",
        ]
        lines.append("|---|---|---|---:|---:|")
        for row in sorted(appeared, key=lambda row: -abs(row["delta_us"]))[:top]:
            side = row["after"] or row["before"]
            lines.append(
                f"| {row['kind']} | `{_cell(row['name'])}` | {row['verdict']} | "
                f"{format_duration(side['total_us'])} | {side['calls']:g} |"
            )
    return "\n".join(lines) + "\n"


def reading_note(comparison: dict[str, Any]) -> str:
    """How to read the verdicts: the interval, the noise band, per run."""
    return (
        f"Intervals are {comparison['confidence']:.0%} bootstrap intervals of the ratio of mean "
        "times (after / before); a change is real when its interval excludes 1 and the ratios "
        f"of the means and of the lower quartiles leave the noise band ±{comparison['noise']:.0%} "
        "(run-to-run variation the calls of one run cannot show; --noise sets it). Times are "
        "per run."
    )


def describe_change(change: dict[str, Any]) -> str:
    """One line: before -> after, the change in percent, the interval and the verdict."""
    before, after = change["before"], change["after"]
    if before is None:
        return f"new, {format_duration(after['total_us'])} per run"
    if after is None:
        return f"vanished, was {format_duration(before['total_us'])} per run"
    text = f"{format_duration(before['mean_us'])} → {format_duration(after['mean_us'])}"
    if change["kind"] not in ("step", "run", "gpu_busy"):
        text += " per call"
    ratio = change["ratio"]
    if ratio is not None:
        text += f" ({ratio - 1:+.1%}"
        interval = change["interval"]
        text += f", ×{interval[0]:.3f}–×{interval[1]:.3f})" if interval else ", no interval)"
    verdict = change["verdict"]
    if verdict == "unknown":
        verdict = "unknown: one sample a side (pass several runs, or record profiler steps)"
    return f"{text}: {verdict}"


def _table(title: str, rows: list[dict[str, Any]], total: int, *, kernels: bool) -> list[str]:
    if not rows:
        return []
    names = {row["name"]: row["name"] for row in rows}
    if kernels:
        names = distinct_short_names(list(names), width=_NAME_WIDTH)
    shown = f" (the {len(rows)} largest changes of {total})" if total > len(rows) else ""
    lines = [
        "",
        f"## {title}{shown}",
        "",
        "| name | calls | before | after | change | ratio (interval) | typical call | verdict |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for row in rows:
        before, after = row["before"], row["after"]
        calls = f"{before['calls']:g}"
        if after["calls"] != before["calls"]:
            calls += f" → {after['calls']:g}"
        interval = row["interval"]
        ratio = f"{row['ratio']:.3f}" if row["ratio"] is not None else "-"
        if interval:
            ratio += f" ({interval[0]:.3f}–{interval[1]:.3f})"
        delta = ("+" if row["delta_us"] >= 0 else "−") + format_duration(abs(row["delta_us"]))
        typical = row.get("lower_quartile_ratio")
        lines.append(
            f"| `{_cell(names[row['name']], kernels)}` | {calls} | "
            f"{format_duration(before['total_us'])} | "
            f"{format_duration(after['total_us'])} | {delta} | "
            f"{ratio} | {'-' if typical is None else f'{typical:.3f}'} | {verdict_cell(row)} |"
        )
    return lines


def verdict_cell(row: dict[str, Any]) -> str:
    """The verdict, with its reason where the interval alone would suggest another one."""
    interval, verdict = row["interval"], row["verdict"]
    if verdict == "same" and interval and not interval[0] <= 1.0 <= interval[1]:
        return f"same: {row['reason']}"
    return str(verdict)


def _files(paths: list[str]) -> str:
    return "1 trace" if len(paths) == 1 else f"{len(paths)} traces"


def _cell(name: str, whole: bool = False) -> str:
    """A name in a table cell; kernel names come already shortened (and kept distinct)."""
    text = name if whole or len(name) <= _NAME_WIDTH else name[: _NAME_WIDTH - 1] + "…"
    return text.replace("|", "\\|").replace("`", "'")
