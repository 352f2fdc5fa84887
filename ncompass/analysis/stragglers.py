"""Who makes the others wait: each collective's time split into waiting and transfer, per rank.

Ranks that meet at a collective leave it together, so wall time (or time outside
communication) cannot name the straggler: the collective equalises it, and the rank that looks
busiest there is the one *waiting*. What tells is the arrival: the same collective (its name and
its position among that name's calls on each rank) starts on every rank at the rank's own
arrival, and the last rank to arrive is the one the others wait for. Each rank's part of a
collective is then

- **waiting**: from its arrival to the last rank's (at most its whole collective), and
- **transfer**: the rest, from the last arrival to its end,

and the waiting of the others is the wait the last-arriving rank *causes*. The straggler is the
rank that causes the most of it (HTA's straggler and wait analysis and TraceLens's skew/transfer
split do the same on GPU traces).

A collective is a communication GPU event (an NCCL/RCCL kernel: its start on the GPU is when the
rank arrived) or, for a trace without one, a CPU range named like ``gloo:all_reduce`` (gloo and
MPI run collectives on CPU threads; the range covers the collective). Times are on the
traces' shared clock (a run's merged trace, or the per-rank files of one host or of hosts whose
clocks agree): a matched collective whose ranges do not overlap on every rank is not the same
collective, or the clocks disagree, and is counted as unmatched instead of being guessed at.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from typing_extensions import TypedDict

from ncompass._format import format_duration
from ncompass.traces.events import KernelClass
from ncompass.traces.link import KERNEL_CLASSES, LinkedTrace

# CPU ranges the process-group backends record around a collective they run on CPU threads.
_CPU_COLLECTIVE = re.compile(r"^(?:gloo|mpi|ucc):\w+")
_COMMUNICATION_CODE = KERNEL_CLASSES.index(KernelClass.COMMUNICATION)
_TOP_COLLECTIVES = 5  # collective names listed, most waiting first


@dataclass(frozen=True)
class Collective:
    """One collective call on one rank: its name and its absolute start and end (µs)."""

    name: str
    start: float
    end: float


def collectives_of(trace: LinkedTrace) -> tuple[Collective, ...]:
    """The collective calls of one rank's trace (or part of a run's trace), in time order.

    Communication GPU events when the trace has any, else CPU collective ranges (``gloo:...``);
    times are absolute (``origin_us`` added) so that traces read apart can be lined up.
    """
    origin = trace.origin_us
    found: list[Collective] = []
    gpu = trace.gpu
    # one pass over the class column (bytes) finds the few communication events among many
    code = _COMMUNICATION_CODE.to_bytes(1, "little")
    classes = gpu.kernel_class.tobytes()
    index = classes.find(code)
    while index != -1:
        start = gpu.start[index] + origin
        found.append(
            Collective(_short(trace.names[gpu.name[index]]), start, start + gpu.duration[index])
        )
        index = classes.find(code, index + 1)
    if not found:
        for marker in trace.markers:
            if _CPU_COLLECTIVE.match(marker.name):
                start = marker.start + origin
                found.append(Collective(marker.name, start, start + marker.duration))
    found.sort(key=lambda collective: collective.start)
    return tuple(found)


def _overlapping_groups(
    lists: list[tuple[int, list[Collective]]],
) -> list[list[tuple[int, Collective]]]:
    """The calls of one name that are one collective: on every rank, the next call that
    overlaps the first rank's call in time (each rank's calls in order, none used twice).

    Order alone would pair the wrong calls when one trace's window holds a call the other's
    missed; a collective is in progress on every rank at the last arrival, so its ranges overlap.
    """
    (_, reference), others = lists[0], lists[1:]
    pointers = [0] * len(others)
    groups: list[list[tuple[int, Collective]]] = []
    for call in reference:
        group = [(lists[0][0], call)]
        for slot, (index, calls) in enumerate(others):
            position = pointers[slot]
            while position < len(calls) and calls[position].end < call.start:
                position += 1
            pointers[slot] = position
            if position < len(calls) and calls[position].start <= call.end:
                group.append((index, calls[position]))
        if len(group) < len(lists):
            continue
        if max(item.start for _, item in group) > min(item.end for _, item in group):
            continue  # overlap with the first rank only, no instant common to all
        for slot in range(len(others)):
            pointers[slot] += 1
        groups.append(group)
    return groups


def _short(name: str) -> str:
    """A kernel's name without its argument list (``ncclKernel_AllReduce_RING_LL_Sum_float``)."""
    return name.split("(", 1)[0]


class RankWait(TypedDict):
    """One rank's collectives: their time split into waiting and transfer (µs)."""

    label: str
    rank: int
    collectives: int
    collective_us: float
    wait_us: float
    transfer_us: float
    last_arrivals: int
    wait_caused_us: float


class CollectiveWait(TypedDict):
    """One collective name over all matched calls: the time the ranks spent waiting in it."""

    name: str
    calls: int
    wait_us: float
    transfer_us: float
    most_often_last: str


class StragglerReport(TypedDict):
    """The straggler analysis of several ranks (docs/analysis.md, "Stragglers")."""

    matched: int
    unmatched: int
    straggler: str | None
    straggler_rank: int | None
    wait_caused_us: float
    last_arrivals: int
    ranks: list[RankWait]
    collectives: list[CollectiveWait]


def straggler_report(
    labels: Sequence[str], ranks: Sequence[int], per_rank: Sequence[Sequence[Collective]]
) -> StragglerReport | None:
    """Match the ranks' collectives and split each into waiting and transfer.

    Args:
        labels: Each rank's column label.
        ranks: Each rank's number.
        per_rank: Each rank's collectives in time order (:func:`collectives_of`).

    Returns:
        The report, or None when fewer than two ranks hold collectives or none match.
    """
    if len(per_rank) < 2 or sum(1 for calls in per_rank if calls) < 2:
        return None
    by_name: list[dict[str, list[Collective]]] = []
    for calls in per_rank:
        named: dict[str, list[Collective]] = {}
        for call in calls:
            named.setdefault(call.name, []).append(call)
        by_name.append(named)
    count = len(per_rank)
    wait = [0.0] * count
    transfer = [0.0] * count
    total = [0.0] * count
    calls_of = [0] * count
    last_arrivals = [0] * count
    caused = [0.0] * count
    per_name: dict[str, list[float]] = {}  # name -> [calls, wait, transfer]
    last_by_name: dict[str, list[int]] = {}
    matched = 0
    names = sorted(set().union(*(named.keys() for named in by_name)))
    for name in names:
        lists = [named.get(name, []) for named in by_name]
        present = [index for index in range(count) if lists[index]]
        if len(present) < 2:
            continue
        for group in _overlapping_groups([(index, lists[index]) for index in present]):
            last_start = max(call.start for _, call in group)
            matched += 1
            last = max(group, key=lambda item: (item[1].start, -item[0]))[0]
            last_arrivals[last] += 1
            last_by_name.setdefault(name, [0] * count)[last] += 1
            entry = per_name.setdefault(name, [0.0, 0.0, 0.0])
            entry[0] += 1
            for index, call in group:
                length = call.end - call.start
                waited = min(last_start - call.start, length)
                total[index] += length
                wait[index] += waited
                transfer[index] += length - waited
                calls_of[index] += 1
                caused[last] += waited
                entry[1] += waited
                entry[2] += length - waited
    unmatched = sum(len(calls) for calls in per_rank) - sum(calls_of)
    if not matched:
        return None
    rows: list[RankWait] = [
        {
            "label": labels[index],
            "rank": ranks[index],
            "collectives": calls_of[index],
            "collective_us": total[index],
            "wait_us": wait[index],
            "transfer_us": transfer[index],
            "last_arrivals": last_arrivals[index],
            "wait_caused_us": caused[index],
        }
        for index in range(count)
    ]
    worst = max(range(count), key=lambda index: (caused[index], -index))
    named_rows = [
        _collective_row(name, per_name[name], labels, last_by_name[name])
        for name in sorted(per_name, key=lambda name: (-per_name[name][1], name))
    ][:_TOP_COLLECTIVES]
    has_straggler = caused[worst] > 0
    return {
        "matched": matched,
        "unmatched": unmatched,
        "straggler": labels[worst] if has_straggler else None,
        "straggler_rank": ranks[worst] if has_straggler else None,
        "wait_caused_us": caused[worst],
        "last_arrivals": last_arrivals[worst],
        "ranks": rows,
        "collectives": named_rows,
    }


def _collective_row(
    name: str, totals: list[float], labels: Sequence[str], last: list[int]
) -> CollectiveWait:
    """One collective name's row: its calls, waiting, transfer and the rank most often last."""
    most = max(range(len(labels)), key=lambda index: (last[index], -index))
    return {
        "name": name,
        "calls": int(totals[0]),
        "wait_us": totals[1],
        "transfer_us": totals[2],
        "most_often_last": labels[most],
    }


def straggler_sentence(report: StragglerReport) -> str:
    """The several-rank report's first line when the ranks meet at collectives (markdown)."""
    matched = report["matched"]
    if report["straggler"] is None:
        return (
            f"No straggler: the ranks arrive together at their {matched} matched collectives "
            "(no rank waits for another)."
        )
    waiting = [row for row in report["ranks"] if row["label"] != report["straggler"]]
    others = ", ".join(
        f"rank {row['label']} waits {format_duration(row['wait_us'])} of its "
        f"{format_duration(row['collective_us'])} in collectives"
        for row in waiting
    )
    name = report["collectives"][0]["name"] if report["collectives"] else "collectives"
    return (
        f"Straggler: **rank {report['straggler']}**, the last to arrive at "
        f"{report['last_arrivals']} of {matched} collectives (most waiting in `{name}`); "
        f"it makes the others wait {format_duration(report['wait_caused_us'])} ({others})."
    )


def straggler_table(report: StragglerReport, *, heading: str) -> list[str]:
    """Each rank's collective time split into waiting and transfer (markdown lines)."""
    lines = [
        f"{heading} Collectives: waiting and transfer",
        "",
        "Each collective is matched across ranks by name and overlap in time; a rank waits "
        "from its arrival to the last rank's, then transfers. Waiting caused: the others' "
        "waiting at the collectives this rank arrived at last.",
        "",
        "| rank | collectives | in collectives | waiting | transfer | arrived last "
        "| waiting caused |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in report["ranks"]:
        lines.append(
            f"| {row['label']} | {row['collectives']} | {format_duration(row['collective_us'])} "
            f"| {format_duration(row['wait_us'])} | {format_duration(row['transfer_us'])} "
            f"| {row['last_arrivals']} | {format_duration(row['wait_caused_us'])} |"
        )
    if report["unmatched"]:
        lines += [
            "",
            f"{report['unmatched']} collective calls could not be matched on every rank (a "
            "different count per rank, or ranges that never overlap: traces of different "
            "windows or clocks that disagree) and are left out.",
        ]
    return [*lines, ""]
