"""What a session prints: each iteration's findings, and the history side by side."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ncompass._format import format_duration
from ncompass.analysis.comparison.markdown import describe_change
from ncompass.importer import FULL_TRACE_MARKER
from ncompass.importer.registry import MarkerRecord
from ncompass.runtime.names import trace_safe_name
from ncompass.session.answer import Answer
from ncompass.session.history import IterationRecord, MarkerChange, MarkerTime, history_changes
from ncompass.session.paths import shown_path
from ncompass.session.sites import site_of

# a statement below this share of the self time is not worth naming as "the slowest"
_MIN_STATEMENT_SHARE = 0.05


def _ms(microseconds: float) -> str:
    return format_duration(microseconds, unit="ms")


def _label(marker: str) -> str:
    """A marker as people read it: the whole-run range is "the whole run"."""
    return "the whole run" if marker == FULL_TRACE_MARKER else marker


def _site(record: IterationRecord, marker: str) -> MarkerRecord | None:
    sites = [site for site in record.manifest if trace_safe_name(str(site.get("name"))) == marker]
    return site_of(sites, str(sites[0].get("name")), record) if sites else None


def where(record: IterationRecord, marker: str) -> str:
    """Where a marker of ``record`` is in the source: ``[in module:function,] lines a-b of FILE``
    (the function is left out when the marker is named after it)."""
    site = _site(record, marker)
    if site is None:
        return "the whole run" if marker == FULL_TRACE_MARKER else "unknown source"
    start, end = site.get("start_line"), site.get("end_line")
    lines = f"line {start}" if start == end else f"lines {start}-{end}"
    place = f"{lines} of {shown_path(str(site.get('file') or site.get('module')))}"
    owner = f"{site.get('module')}:{site.get('qualname')}"
    return place if marker == owner else f"in {owner}, {place}"


def hottest_statement(record: IterationRecord) -> tuple[str, MarkerTime] | None:
    """The statement (line-range or call marker) of ``record`` with the most self time, when
    it holds at least ``_MIN_STATEMENT_SHARE`` of all self time (else it says nothing)."""
    total = sum(time.cpu_self_us for time in record.markers.values())
    for name, time in record.hottest(len(record.markers)):
        site = _site(record, name)
        if site is not None and site.get("kind") in ("range", "call"):
            return (name, time) if time.cpu_self_us >= _MIN_STATEMENT_SHARE * total else None
    return None


def iteration_report(record: IterationRecord, top: int = 5) -> str:
    """The hottest markers of one iteration, by time no finer marker explains yet."""
    lines = [
        f"iteration {record.iteration}: spec v{record.spec_version:03d}, "
        f"{len(record.markers)} markers, trace {record.trace_path}"
    ]
    total = sum(time.cpu_self_us for time in record.markers.values()) or 1.0
    for name, time in record.hottest(top):
        share = 100 * time.cpu_self_us / total
        lines.append(
            f"  {share:5.1f}%  {_ms(time.cpu_self_us):>11} self  {_ms(time.cpu_total_us):>11} total"
            f"  x{time.calls:<5} {_label(name)}"
        )
    hottest = record.hottest(1)
    if hottest:
        lines.append(f"  hottest: {_hottest_text(record, hottest[0][0])}")
    answer = Answer.from_dict(record.answer) if record.answer is not None else None
    statement = hottest_statement(record)
    if statement is not None and hottest and statement[0] != hottest[0][0]:
        name, time = statement
        text = f"  slowest statement: {name} — {where(record, name)}, {_ms(time.cpu_self_us)} self"
        differs = _why_answer_differs(record, name, answer)
        lines.append(text + (f"; the answer below differs: {differs}" if differs else ""))
    lines.extend(discovery_lines(record))
    if answer is not None:
        lines.append(f"  answer ({answer.measured_by}): {answer.describe()}")
    if record.note:
        lines.append(f"  note: {record.note}")
    return "\n".join(lines)


def _why_answer_differs(record: IterationRecord, marker: str, answer: Answer | None) -> str:
    """Why the answer is not the statement marker with the most self time ("" when it is)."""
    site = _site(record, marker)
    if answer is None or site is None:
        return ""
    same_file = (
        str(site.get("file") or "")
        and Path(str(site.get("file"))).resolve() == Path(answer.file).resolve()
    )
    lines = (int(site.get("start_line", 0)), int(site.get("end_line", 0)))
    if answer.compiled_from is not None:
        return "it is inside the code torch.compile compiled, which markers do not see into"
    if same_file and lines == tuple(answer.lines):
        return ""
    if answer.measured_by == "samples":
        return (
            "it is the stack sampler's estimate of where the time is, down to the line; this "
            "line ranks the markers of this run by their own CPU time"
        )
    if answer.basis == "gpu":
        return "it ranks statements by the GPU time they launched, this line by CPU time"
    return (
        "it ranks the steady state (the first repeated call is a warm-up, a call over three "
        "times its statement's median counts as three medians), this line the whole run"
    )


def _hottest_text(record: IterationRecord, marker: str) -> str:
    if marker == FULL_TRACE_MARKER:
        return "the whole run, outside every finer marker"
    return f"{marker} — {where(record, marker)}"


def discovery_lines(record: IterationRecord, top: int = 3) -> list[str]:
    """What a discovery run saw: setup apart, and the hottest statements with their depth."""
    found = record.discovery
    if not found:
        return []
    setup = ", ".join(f"{kind} {ms:.0f} ms" for kind, ms in found["setup_ms"].items())
    lines = [
        f"  discovery: {found['steady_ms']:.0f} ms of steady-state time sampled"
        + (f"; set apart as setup: {setup}" if setup else "")
    ]
    for hot in found["hottest"][:top]:
        start, end = hot["lines"]
        where_ = f"line {start}" if start == end else f"lines {start}-{end}"
        lines.append(
            f"  {100 * hot['share']:5.1f}%  {hot['ms']:>9.2f} ms  {hot['statement'][:60]} "
            f"({hot['function']}, {where_} of {shown_path(hot['file'])}, depth {hot['depth']}"
            + (f", in process `{hot['process']}`" if hot.get("process") else "")
            + ")"
        )
    for helper in found.get("folded", []):
        lines.append(
            f"  folded: {helper['function']} ({helper['ms']:.0f} ms) is called from "
            f"{helper['callers']} statements: its time is credited to the statement calling it"
        )
    return lines


def answer_report(answer: Answer) -> str:
    """The session's answer for people: the statement, the ops and kernels under it, ties."""
    lines = [f"answer: {answer.describe()}"]
    for contender in answer.tied_with:
        lines.append(
            f"  tied with: {contender.statement} — {contender.function}, lines "
            f"{contender.lines[0]}-{contender.lines[1]} of {shown_path(contender.file)}, "
            f"{contender.self_ms:.2f} ms ({100 * contender.share:.0f}%)"
        )
    for kind, work in (("op", answer.ops), ("kernel", answer.kernels)):
        for item in work:
            lines.append(
                f"  {kind} under it: {item.name} {item.ms:.2f} ms x{item.calls} "
                f"({100 * item.share:.0f}%)"
            )
    if answer.setup_ms:
        setup = ", ".join(f"{kind} {ms:.0f} ms" for kind, ms in answer.setup_ms.items())
        lines.append(f"  set apart as setup (not the answer; --include-setup to rank it): {setup}")
    return "\n".join(lines)


def history_report(records: list[IterationRecord], top: int = 3) -> str:
    """Every iteration with its hottest markers, and what got faster or slower since the last
    (real changes only, in ``ncompass compare``'s words and by its rule)."""
    if not records:
        return "no iterations yet"
    lines: list[str] = []
    for index, (record, changes) in enumerate(zip(records, history_changes(records), strict=True)):
        lines.append(iteration_report(record, top))
        if index:
            lines.extend(change_lines(records[index - 1], changes, top))
    return "\n".join(lines)


def change_lines(previous: IterationRecord, changes: list[MarkerChange], top: int = 3) -> list[str]:
    """The real changes of the shared markers since ``previous``, as ``ncompass compare``
    words them (``slower``/``faster``; the others are no news)."""
    moved = [change for change in changes if change.verdict in ("faster", "slower")][:top]
    return [
        f"  since iteration {previous.iteration}: {_label(change.name)}: "
        + describe_change(_compare_row(change))
        for change in moved
    ]


def _compare_row(change: MarkerChange) -> dict[str, Any]:
    """A marker change in the shape :func:`describe_change` reads (``Change.to_dict()``)."""
    return {
        "kind": "marker",
        "before": {"mean_us": change.before_us},
        "after": {"mean_us": change.after_us},
        "ratio": change.ratio,
        "interval": list(change.interval) if change.interval else None,
        "verdict": change.verdict,
    }


def history_json(records: list[IterationRecord]) -> list[dict[str, Any]]:
    """The history as JSON: each iteration and its changes from the one before."""
    result: list[dict[str, Any]] = []
    for index, (record, changes) in enumerate(zip(records, history_changes(records), strict=True)):
        entry = record.to_dict()
        entry.pop("manifest", None)
        if index:
            entry["changes"] = [change.to_dict() for change in changes]
        result.append(entry)
    return result


def finding(record: IterationRecord) -> str:
    """The conclusion of a session without an answer: the marker holding the most time no
    finer marker explains (the whole run when the markers explain little of it)."""
    hottest = record.hottest(1)
    if not hottest:
        return "no markers were recorded"
    name, time = hottest[0]
    if name == FULL_TRACE_MARKER:
        found = (
            f"most time is outside every marker: the whole run has {_ms(time.cpu_self_us)} "
            "of its own time"
        )
    else:
        found = (
            f"slowest marker so far: {name} — {where(record, name)}, "
            f"{_ms(time.cpu_self_us)} of its own time"
        )
    statement = hottest_statement(record)
    if statement is not None and statement[0] != name:
        found += (
            f"\nslowest statement: {statement[0]} — {where(record, statement[0])}, "
            f"{_ms(statement[1].cpu_self_us)} of its own time"
        )
    return found


__all__ = [
    "MarkerTime",
    "answer_report",
    "change_lines",
    "discovery_lines",
    "finding",
    "history_json",
    "history_report",
    "hottest_statement",
    "iteration_report",
    "where",
]
