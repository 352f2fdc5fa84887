"""A Chrome trace written by another tool (viztracer, a hand-made trace): what it holds.

The analysis reads the torch profiler's events (markers, CPU operators, launches, GPU events);
a trace of another tool has none of them, and its report said "0 marker ranges ... nothing
stands out" of 100,000 events. Such a trace is summarised as what it is: its complete events
by name (calls, total and longest time), by thread and by process, from a second pass over the
file that runs only for these traces. A trace without any timed event says so in one line.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from typing_extensions import TypedDict

from ncompass._format import format_duration
from ncompass.analysis.printable_names import printable
from ncompass.traces.link import LinkedTrace
from ncompass.traces.reader import TraceReader

_NAME_WIDTH = 70


class ForeignName(TypedDict):
    """One event name: its calls and their time (µs, inclusive of nested events)."""

    name: str
    calls: int
    total_us: float
    max_us: float


class ForeignThread(TypedDict):
    """One thread (or one process when ``tid`` is None): its events and their time (µs)."""

    pid: str
    tid: str | None
    name: str
    events: int
    total_us: float


class ForeignEvents(TypedDict):
    """The summary of a trace without torch profiler events (docs/analysis.md)."""

    events: int
    timed_events: int
    names: list[ForeignName]
    threads: list[ForeignThread]
    processes: list[ForeignThread]


def holds_no_profiler_events(trace: LinkedTrace) -> bool:
    """Whether the linked trace has no marker, CPU operator, launch or GPU event at all."""
    return not (trace.markers or trace.cpu_operators or len(trace.launches) or len(trace.gpu))


@dataclass
class _Totals:
    calls: int = 0
    total_us: float = 0.0
    max_us: float = 0.0
    open_starts: list[float] = field(default_factory=list)  # B events awaiting their E

    def add(self, duration: float) -> None:
        self.calls += 1
        self.total_us += duration
        self.max_us = max(self.max_us, duration)


def foreign_events(path: str | Path, *, top: int = 20) -> ForeignEvents:
    """Read the trace again and total its events by name, thread and process.

    Complete events (``X``) count with their ``dur``; ``B``/``E`` pairs with the time between
    them on their thread. Names are made printable (see :mod:`.printable_names`).
    """
    names: dict[str, _Totals] = defaultdict(_Totals)
    threads: dict[tuple[str, str], _Totals] = defaultdict(_Totals)
    processes: dict[str, _Totals] = defaultdict(_Totals)
    labels: dict[tuple[str, str | None], str] = {}
    stacks: dict[tuple[str, str], list[tuple[str, float]]] = defaultdict(list)
    events = 0
    for event in TraceReader(path, progress=False):
        events += 1
        phase = event.get("ph")
        pid, tid = str(event.get("pid", "")), str(event.get("tid", ""))
        if phase == "M":
            _label(event, pid, tid, labels)
            continue
        name = printable(str(event.get("name", "")))
        if phase == "X":
            duration = _number(event.get("dur"))
        elif phase == "B":
            stacks[(pid, tid)].append((name, _number(event.get("ts"))))
            continue
        elif phase == "E" and stacks[(pid, tid)]:
            name, start = stacks[(pid, tid)].pop()
            duration = max(0.0, _number(event.get("ts")) - start)
        else:
            continue
        names[name].add(duration)
        threads[(pid, tid)].add(duration)
        processes[pid].add(duration)
    ranked = sorted(names, key=lambda key: (-names[key].total_us, key))[:top]
    return {
        "events": events,
        "timed_events": sum(totals.calls for totals in processes.values()),
        "names": [
            {
                "name": name,
                "calls": names[name].calls,
                "total_us": names[name].total_us,
                "max_us": names[name].max_us,
            }
            for name in ranked
        ],
        "threads": _rows({key: value for key, value in threads.items()}, labels, top),
        "processes": _rows({(pid, None): value for pid, value in processes.items()}, labels, top),
    }


def _label(event: Any, pid: str, tid: str, labels: dict[tuple[str, str | None], str]) -> None:
    args = event.get("args")
    label = args.get("name") if isinstance(args, dict) else None
    if not isinstance(label, str):
        return
    if event.get("name") == "thread_name":
        labels[(pid, tid)] = printable(label)
    elif event.get("name") == "process_name":
        labels[(pid, None)] = printable(label)


def _number(value: object) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def _rows(
    totals: dict[tuple[str, str | None], _Totals],
    labels: dict[tuple[str, str | None], str],
    top: int,
) -> list[ForeignThread]:
    ranked = sorted(totals, key=lambda key: (-totals[key].total_us, key[0], key[1] or ""))[:top]
    return [
        {
            "pid": pid,
            "tid": tid,
            "name": labels.get((pid, tid), ""),
            "events": totals[(pid, tid)].calls,
            "total_us": totals[(pid, tid)].total_us,
        }
        for pid, tid in ranked
    ]


def foreign_markdown(found: ForeignEvents) -> list[str]:
    """The report's section for a trace without profiler events (markdown lines)."""
    if not found["timed_events"]:
        return [
            f"This trace holds no profiler events: none of its {found['events']} events is a "
            "timed range (X, or B/E), so there is no time to report. Record it with "
            "`ncompass run` or the torch profiler.",
            "",
        ]
    lines = [
        f"This trace holds no torch profiler events (no markers, CPU operators or GPU events): "
        f"its {found['timed_events']} timed events (of {found['events']}) are another tool's, "
        "summarised by name, thread and process below. Times are inclusive: an event nested "
        "in another counts in both.",
        "",
        "## Events by name",
        "",
        "| event | calls | total | longest |",
        "|---|---:|---:|---:|",
    ]
    for row in found["names"]:
        lines.append(
            f"| {_cell(row['name'])} | {row['calls']} | {format_duration(row['total_us'])} | "
            f"{format_duration(row['max_us'])} |"
        )
    lines += ["", "## Events by thread", "", "| process | thread | events | total |"]
    lines.append("|---|---|---:|---:|")
    for thread in found["threads"]:
        label = str(thread["tid"]) + (f" ({thread['name']})" if thread["name"] else "")
        lines.append(
            f"| {thread['pid']} | {_cell(label)} | {thread['events']} | "
            f"{format_duration(thread['total_us'])} |"
        )
    lines += ["", "## Events by process", "", "| process | events | total |", "|---|---:|---:|"]
    for process in found["processes"]:
        label = process["pid"] + (f" ({process['name']})" if process["name"] else "")
        lines.append(
            f"| {_cell(label)} | {process['events']} | {format_duration(process['total_us'])} |"
        )
    return [*lines, ""]


def _cell(text: str) -> str:
    short = text if len(text) <= _NAME_WIDTH else text[: _NAME_WIDTH - 1] + "…"
    return "`" + short.replace("|", "\\|").replace("`", "'") + "`"
