"""The session's answer: the statement that holds the time, how much, and how sure.

From a run with markers down the hot path, every statement range's own time is exact: CPU time
not covered by finer markers, or, when the trace has GPU work, the GPU time of the kernels it
launched (linked through ``args.correlation``). The run is cut into *repeats* (the occurrences
of the outermost marker that recurs, e.g. each ``model(ids)`` call; else three equal slices of
time), the statements are ranked in each, and the spread of the winner's share across repeats
says how stable the ranking is. When the runner-up is within noise of the winner, the answer is
a tie and names both. When the machine was busy (the program waited for a CPU a good share of
the run, see :mod:`ncompass.capture.cpu_wait`), no answer is ``high`` confidence, and it says why.
"""

from __future__ import annotations

import bisect
import linecache
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from itertools import accumulate
from typing import Any

from ncompass.capture.cpu_wait import CONTENDED_WAIT_SHARE, waited_share
from ncompass.importer.registry import MarkerRecord
from ncompass.session.answer_bound import bound_phrase, marker_efficiency
from ncompass.session.history import IterationRecord
from ncompass.session.paths import shown_path
from ncompass.session.sites import name_pattern, site_of
from ncompass.traces.link import NO_LINK, LinkedTrace, Marker, link_trace

# the runner-up is a tie when this close to the winner (share of the winner's time) ...
_TIE_SHARE = 0.10
# ... or when the gap is under this many standard errors of the per-repeat gaps
_TIE_ERRORS = 2.0
# never a tie when the winner beats the runner-up by this share of its own time in every repeat:
# with two or three repeats the spread of the gaps says nothing (one preempted repeat makes it
# as large as the gap), and no noise makes one statement twice another's in every repeat
_CLEAR_SHARE = 0.5
_TOP_OPS = 5
# an occurrence above this many times its statement's median is clipped to it (an outlier)
_OUTLIER = 3.0


@dataclass
class WorkTime:
    """A C++ op or GPU kernel under the answer, with its time and share of the answer's."""

    name: str
    ms: float
    calls: int
    share: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return asdict(self)


@dataclass
class Contender:
    """A statement within noise of the answer (a tie names both)."""

    file: str
    lines: tuple[int, int]
    statement: str
    function: str
    self_ms: float
    share: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {**asdict(self), "lines": list(self.lines)}


@dataclass
class Answer:
    """Where the time goes, as precisely as the session got it.

    Attributes:
        file, lines, statement, function: The statement (file, first and last line, its first
            line of text, ``module:Class.method``).
        self_ms: Its own time (GPU time when the run had GPU work, else CPU) over the run.
        share: Its share of the steady-state time (0..1).
        runs: Runs the session used to get here.
        confidence: ``high`` (it won every repeat by more than the noise), ``medium``, ``low``
            (one repeat only) or ``tie`` (see ``tied_with``).
        spread: Standard deviation of its share across repeats (0..1).
        repeats: How many repeats the run was cut into.
        basis: ``gpu`` or ``cpu``.
        measured_by: ``markers`` (exact) or ``samples`` (the discovery run's estimate).
        ops: The C++ ops under it, by time.
        kernels: The GPU kernels it launched, by time.
        tied_with: Statements within noise of it.
        setup_ms: Time spent once (imports, model construction, compilation), set apart.
        confirmed: Whether the markers confirmed the discovery run's estimate (None: no estimate
            to confirm).
        compiled_from: When the time is in code ``torch.compile`` compiled, the statement that
            calls the compiled code (the answer is then the compiled source line whose kernels
            hold the most time, ``measured_by`` is ``compiled kernels``).
        compiled_kernels_share: When the answer stays at a call into compiled code because
            Inductor's generated kernels hold less than half its time: their share of it.
        process: The process it ran in, by role (``SpawnProcess-1``, ``DataLoader worker 0``,
            ``rank 1``), when that is not the run's own process (None: the run's own).
        extern_kernels: Then, the ops the compiled code called instead (``aten::mm``,
            ``aten::addmm``, ``aten::convolution``: Inductor's extern kernels), with their share
            of the answer's time.
        cpu_waited_share: The share of the run the program's main thread waited for a CPU
            that other work held (None: not measured). From
            :data:`~ncompass.capture.cpu_wait.CONTENDED_WAIT_SHARE` on, the timings are the
            machine's as much as the code's: confidence is at most ``medium``.
    """

    file: str
    lines: tuple[int, int]
    statement: str
    function: str
    self_ms: float
    share: float
    runs: int
    confidence: str
    spread: float = 0.0
    repeats: int = 1
    basis: str = "cpu"
    measured_by: str = "markers"
    ops: list[WorkTime] = field(default_factory=list)
    kernels: list[WorkTime] = field(default_factory=list)
    tied_with: list[Contender] = field(default_factory=list)
    setup_ms: dict[str, float] = field(default_factory=dict)
    confirmed: bool | None = None
    compiled_from: Contender | None = None
    compiled_kernels_share: float | None = None
    extern_kernels: list[WorkTime] = field(default_factory=list)
    process: str | None = None
    cpu_waited_share: float | None = None
    efficiency: dict[str, Any] | None = None  # its marker's bound and share of peak (shapes)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (the ``answer`` of ``session run --json``)."""
        return {
            "file": self.file,
            "lines": list(self.lines),
            "statement": self.statement,
            "function": self.function,
            "self_ms": round(self.self_ms, 3),
            "share": round(self.share, 4),
            "runs": self.runs,
            "confidence": self.confidence,
            "spread": round(self.spread, 4),
            "repeats": self.repeats,
            "basis": self.basis,
            "measured_by": self.measured_by,
            "ops": [o.to_dict() for o in self.ops],
            "kernels": [k.to_dict() for k in self.kernels],
            "tied_with": [c.to_dict() for c in self.tied_with],
            "setup_ms": {k: round(v, 3) for k, v in self.setup_ms.items()},
            "confirmed": self.confirmed,
            "compiled_from": self.compiled_from.to_dict() if self.compiled_from else None,
            "compiled_kernels_share": (
                round(self.compiled_kernels_share, 4)
                if self.compiled_kernels_share is not None
                else None
            ),
            "extern_kernels": [k.to_dict() for k in self.extern_kernels],
            "process": self.process,
            "cpu_waited_share": (
                round(self.cpu_waited_share, 4) if self.cpu_waited_share is not None else None
            ),
            "efficiency": self.efficiency,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Answer:
        """The inverse of :meth:`to_dict`."""
        lines = data.get("lines") or [0, 0]
        return cls(
            file=str(data["file"]),
            lines=(int(lines[0]), int(lines[-1])),
            statement=str(data.get("statement", "")),
            function=str(data.get("function", "")),
            self_ms=float(data.get("self_ms", 0.0)),
            share=float(data.get("share", 0.0)),
            runs=int(data.get("runs", 1)),
            confidence=str(data.get("confidence", "low")),
            spread=float(data.get("spread", 0.0)),
            repeats=int(data.get("repeats", 1)),
            basis=str(data.get("basis", "cpu")),
            measured_by=str(data.get("measured_by", "markers")),
            ops=[WorkTime(**o) for o in data.get("ops") or []],
            kernels=[WorkTime(**k) for k in data.get("kernels") or []],
            tied_with=[_contender(c) for c in data.get("tied_with") or []],
            setup_ms=dict(data.get("setup_ms") or {}),
            confirmed=data.get("confirmed"),
            compiled_from=_contender(data["compiled_from"]) if data.get("compiled_from") else None,
            compiled_kernels_share=data.get("compiled_kernels_share"),
            extern_kernels=[WorkTime(**k) for k in data.get("extern_kernels") or []],
            process=data.get("process"),
            cpu_waited_share=data.get("cpu_waited_share"),
            efficiency=data.get("efficiency"),
        )

    def describe(self) -> str:
        """One line for people."""
        lines = (
            f"line {self.lines[0]}"
            if self.lines[0] == self.lines[1]
            else f"lines {self.lines[0]}-{self.lines[1]}"
        )
        text = (
            f"{self.statement} — {self.function}, {lines} of {shown_path(self.file)}"
            + (f" in process `{self.process}`" if self.process else "")
            + ": "
            f"{self.self_ms:.2f} ms {self.basis.upper()} ({100 * self.share:.0f}%), "
            f"{self.runs} run{'s' if self.runs != 1 else ''}, confidence {self.confidence}"
        )
        text += bound_phrase(self.efficiency)
        if self.compiled_from is not None:
            text += f"; compiled, called from {self.compiled_from.statement}"
        if self.compiled_kernels_share is not None:
            extern = ", ".join(
                f"{kernel.name} {100 * kernel.share:.0f}%" for kernel in self.extern_kernels
            )
            text += (
                f"; it calls compiled code whose generated kernels hold only "
                f"{100 * self.compiled_kernels_share:.1f}% of its time, so the answer stays at "
                "the call" + (f" (the rest is in extern kernels: {extern})" if extern else "")
            )
        if self.repeats > 1:
            text += f" (spread ±{100 * self.spread:.1f} points over {self.repeats} repeats)"
        if self.contended:
            text += (
                f"; the machine was busy: the program waited for a CPU "
                f"{100 * (self.cpu_waited_share or 0):.0f}% of the run, which stretches every "
                "timing by chance, so confidence is at most medium (run it on a quiet machine)"
            )
        return text

    @property
    def contended(self) -> bool:
        """The run's timings were disturbed by other work on the machine."""
        share = self.cpu_waited_share
        return share is not None and share >= CONTENDED_WAIT_SHARE

    def under_contention(self, sidecar: Mapping[str, Any] | None) -> Answer:
        """This answer with the run's CPU waits (the sidecar's ``cpu_wait``) taken into account:
        on a contended machine no timing is clear enough for ``high`` confidence."""
        share = waited_share((sidecar or {}).get("cpu_wait"))
        answer = replace(self, cpu_waited_share=share)
        if answer.contended and answer.confidence == "high":
            answer.confidence = "medium"
        return answer


def _contender(data: dict[str, Any]) -> Contender:
    return Contender(**{**data, "lines": tuple(data["lines"])})


@dataclass
class Ranking:
    """Statements with their time per repeat, as both kinds of run produce them."""

    names: dict[str, dict[str, Any]]  # statement key -> its site (file, lines, statement, ...)
    per_repeat: dict[str, list[float]]  # statement key -> its time (µs) in each repeat
    repeat_totals: list[float]  # steady-state time (µs) of each repeat
    calls: bool = False  # the repeats are repeated calls (the first one warms up)


def decide(ranking: Ranking, runs: int, basis: str, measured_by: str) -> Answer | None:
    """The winner of a ranking, how stable it is, and its ties.

    When the repeats are repeated calls and there are three or more, the first is a warm-up
    (first calls allocate, fill caches): it counts in the times but not in the ranking or its
    stability.
    """
    if not ranking.per_repeat:
        return None
    count = len(ranking.repeat_totals)
    judged = slice(1, None) if count >= 3 and ranking.calls else slice(None)
    steady = {key: sum(times[judged]) for key, times in ranking.per_repeat.items()}
    totals = {key: sum(times) for key, times in ranking.per_repeat.items()}
    order = sorted(steady, key=lambda key: (-steady[key], -totals[key]))
    top = order[0]
    if totals[top] <= 0:
        return None
    whole = sum(ranking.repeat_totals[judged]) or 1.0  # shares are of the steady state
    top_times = ranking.per_repeat[top][judged]
    shares = [
        t / r if r else 0.0 for t, r in zip(top_times, ranking.repeat_totals[judged], strict=True)
    ]
    spread = statistics.pstdev(shares) if len(shares) > 1 else 0.0
    top_mean = statistics.fmean(top_times)
    tied: list[str] = []
    clear_everywhere = True
    for other in order[1:3]:
        gaps = [a - b for a, b in zip(top_times, ranking.per_repeat[other][judged], strict=True)]
        mean_gap = statistics.fmean(gaps)
        noise = _TIE_ERRORS * statistics.stdev(gaps) / len(gaps) ** 0.5 if len(gaps) > 1 else 0.0
        wins = sum(1 for gap in gaps if gap > 0)
        clear = all(gap > _CLEAR_SHARE * time for gap, time in zip(gaps, top_times, strict=True))
        if not clear and (mean_gap <= max(noise, _TIE_SHARE * top_mean) or 2 * wins <= len(gaps)):
            tied.append(other)
        if wins < len(gaps):
            clear_everywhere = False
    if tied:
        confidence = "tie"
    elif count < 2:
        confidence = "low"
    else:
        confidence = "high" if clear_everywhere else "medium"
    site = ranking.names[top]
    return Answer(
        file=site["file"],
        lines=site["lines"],
        statement=site["statement"],
        function=site["function"],
        self_ms=totals[top] / 1000,
        share=steady[top] / whole,
        runs=runs,
        confidence=confidence,
        spread=spread,
        repeats=count,
        basis=basis,
        measured_by=measured_by,
        tied_with=[
            Contender(
                ranking.names[key]["file"],
                ranking.names[key]["lines"],
                ranking.names[key]["statement"],
                ranking.names[key]["function"],
                totals[key] / 1000,
                steady[key] / whole,
            )
            for key in tied
        ],
    )


def answer_from_markers(
    record: IterationRecord, runs: int, *, include_setup: bool = False
) -> Answer | None:
    """The statement range of a marker run with the most own time (GPU time when the trace has
    GPU work), with the ops and kernels under it; None when the run marked no statement.

    Only time inside the repeats counts (the imports before the first ``model(ids)`` do not),
    unless ``include_setup``: then the whole run is one repeat.
    """
    statements = [s for s in record.manifest if s.get("kind") in ("range", "call")]
    if not statements:
        return None
    trace = link_trace(record.trace_path, progress=False)
    patterns = [(site, name_pattern(site)) for site in statements]
    site_of_name: dict[str, MarkerRecord | None] = {}
    gpu = len(trace.gpu) > 0
    gpu_self = [0.0] * len(trace.markers)
    if gpu:
        for index in range(len(trace.gpu)):
            owner = trace.marker_of_gpu_event(index)
            if owner != NO_LINK:
                gpu_self[owner] += trace.gpu.duration[index]
    windows, calls = _repeats(trace)
    if include_setup and trace.markers:
        windows = [(min(m.start for m in trace.markers), max(m.end for m in trace.markers), None)]
        calls = False
    per_repeat: dict[str, list[float]] = {}
    names: dict[str, dict[str, Any]] = {}
    occurrences: dict[str, list[int]] = defaultdict(list)
    totals = [0.0] * len(windows)
    repeats = _WindowIndex(windows)
    for position, marker in enumerate(trace.markers):
        own = gpu_self[position] if gpu else max(0.0, marker.duration - marker.nested_us)
        slot = repeats.slot(marker.start, _pid_of(trace, marker))
        if slot is None:
            continue
        totals[slot] += own
        if marker.name not in site_of_name:
            matching = [site for site, pattern in patterns if pattern.fullmatch(marker.name)]
            same = [site for site in matching if site.get("name") == matching[0].get("name")]
            site_of_name[marker.name] = (
                site_of(same, str(same[0].get("name")), record) if same else None
            )
        site = site_of_name[marker.name]
        if site is None:
            continue
        key = str(site.get("name"))
        if key not in names:
            names[key] = _site_summary(site)
            per_repeat[key] = [0.0] * len(windows)
        per_repeat[key][slot] += own
        occurrences[key].append(position)
    _clip_outliers(trace, per_repeat, occurrences, gpu_self if gpu else None, windows)
    ranking = Ranking(names, per_repeat, totals, calls)
    answer = decide(ranking, runs, "gpu" if gpu else "cpu", "markers")
    if answer is None:
        return None
    top = next(
        k for k, v in names.items() if v["lines"] == answer.lines and v["file"] == answer.file
    )
    answer.ops, answer.kernels = _work_under(trace, occurrences[top], answer.self_ms * 1000, gpu)
    answer.process = _process_of(trace, occurrences[top])
    answer.efficiency = marker_efficiency(
        record.trace_path, {trace.markers[position].name for position in occurrences[top]}
    )
    return answer


def _process_of(trace: LinkedTrace, markers: list[int]) -> str | None:
    """The process whose markers hold most of these markers' time, by role, when it is not the
    run's own (the merged trace's ``ncompass_processes`` lists the run's own first)."""
    processes = trace.metadata.get("ncompass_processes") or []
    if len(processes) < 2 or not markers:
        return None
    spent: dict[Any, float] = defaultdict(float)
    for position in markers:
        marker = trace.markers[position]
        spent[trace.threads[marker.thread][0]] += marker.duration
    pid = max(spent, key=lambda p: spent[p])
    roles = {str(p.get("pid")): p.get("role") for p in processes}
    if str(pid) == str(processes[0].get("pid")):
        return None
    return str(roles.get(str(pid)) or f"pid {pid}")


def _clip_outliers(
    trace: LinkedTrace,
    per_repeat: dict[str, list[float]],
    occurrences: dict[str, list[int]],
    gpu_self: list[float] | None,
    windows: list[Window],
) -> None:
    """Each occurrence counted at most ``_OUTLIER`` times its statement's median: one call
    stretched by the machine (the process preempted, a page-fault storm) must not decide the
    ranking."""
    index = _WindowIndex(windows)
    for key, positions in occurrences.items():
        own = [
            gpu_self[p]
            if gpu_self is not None
            else max(0.0, trace.markers[p].duration - trace.markers[p].nested_us)
            for p in positions
        ]
        cap = _OUTLIER * statistics.median(own)
        clipped = [0.0] * len(windows)
        for position, value in zip(positions, own, strict=True):
            marker = trace.markers[position]
            slot = index.slot(marker.start, _pid_of(trace, marker))
            if slot is not None:
                clipped[slot] += min(value, cap)
        per_repeat[key] = clipped


def _site_summary(site: MarkerRecord) -> dict[str, Any]:
    start, end = int(site.get("start_line", 0)), int(site.get("end_line", 0))
    name = str(site.get("name", ""))
    file = str(site.get("file") or "")
    statement = linecache.getline(file, start).strip() if file else ""
    if not statement:
        statement = name.split(" ", 1)[1] if " " in name else name
    return {
        "file": str(site.get("file") or site.get("module")),
        "lines": (start, end),
        "statement": statement,
        "function": f"{site.get('module')}:{site.get('qualname')}",
    }


Window = tuple[float, float, Any]
"""A repeat: its start, its end, and the process it is cut from (None: any process)."""


def _repeats(trace: LinkedTrace) -> tuple[list[Window], bool]:
    """The run cut into repeats: the occurrences of the outermost marker that recurs (e.g. each
    ``model(ids)`` of a loop), or three equal slices of the markers' span; and whether they are
    repeated calls.

    When the markers are in several processes (a parent and its workers), each repeat belongs
    to the process it was cut from and holds only that process's markers, and the recurring
    marker chosen is the one whose repeats hold the most marked time: a parent waiting for its
    workers (``DataLoader``'s ``__next__``) recurs too, but what it waits for runs elsewhere.
    """
    markers = trace.markers
    several = len({_pid_of(trace, marker) for marker in markers}) > 1

    def recurrence(marker: Marker) -> tuple[str, Any]:
        # in several processes, a marker recurs when it recurs in one process (each rank
        # calling ``train()`` once is not a repeat)
        return (marker.name, _pid_of(trace, marker) if several else None)

    counts: dict[tuple[str, Any], int] = defaultdict(int)
    for marker in markers:
        counts[recurrence(marker)] += 1
    spans: dict[str, list[Window]] = defaultdict(list)
    for marker in markers:
        if counts[recurrence(marker)] < 2:
            continue
        parent = marker.parent
        while parent != NO_LINK and counts[recurrence(markers[parent])] < 2:
            parent = markers[parent].parent
        if parent == NO_LINK:  # no recurring marker around it
            owner = _pid_of(trace, marker) if several else None
            spans[marker.name].append((marker.start, marker.end, owner))
    recurring = {name: found for name, found in spans.items() if len(found) >= 2}
    if recurring:

        def span(name: str) -> float:
            return sum(end - start for start, end, _ in recurring[name])

        def held(name: str) -> float:
            index = _WindowIndex(sorted(recurring[name], key=lambda w: (w[0], w[1])))
            return sum(
                m.duration
                for m in markers
                if m.name != name and index.slot(m.start, _pid_of(trace, m)) is not None
            )

        chosen = max(recurring, key=(lambda n: (held(n), span(n))) if several else span)
        return sorted(recurring[chosen], key=lambda w: (w[0], w[1])), True
    if not markers:
        return [], False
    first = min(m.start for m in markers)
    last = max(m.end for m in markers)
    step = (last - first) / 3 or 1.0
    return [(first + i * step, first + (i + 1) * step, None) for i in range(3)], False


def _pid_of(trace: LinkedTrace, marker: Marker) -> Any:
    return trace.threads[marker.thread][0]


class _WindowIndex:
    """Which repeat a time falls in, in O(log repeats): a run of a loop's statement has as
    many repeats as turns (200,000), and every marker is looked up.

    The answer is the first repeat, in the order given (by start), that holds the time and
    belongs to the marker's process (or to any), else the last repeat when the time is its end.
    """

    def __init__(self, windows: list[Window]) -> None:
        self.windows = windows
        by_owner: dict[Any, list[int]] = defaultdict(list)
        for position, (_, _, owner) in enumerate(windows):
            by_owner[owner].append(position)
        # per owner: positions by start, their starts, and the latest end up to each one
        self._owners: dict[Any, tuple[list[int], list[float], list[float]]] = {}
        for owner, positions in by_owner.items():
            positions.sort(key=lambda p: (windows[p][0], p))
            starts = [windows[p][0] for p in positions]
            reach = list(accumulate((windows[p][1] for p in positions), max))
            self._owners[owner] = (positions, starts, reach)

    def slot(self, time: float, pid: Any = None) -> int | None:
        """The position of the repeat ``time`` falls in, for a marker of process ``pid``."""
        found: int | None = None
        for owner in (None,) if pid is None else (None, pid):
            group = self._owners.get(owner)
            if group is None:
                continue
            positions, starts, reach = group
            last = bisect.bisect_right(starts, time)  # repeats starting at or before the time
            # the first of them still open at the time: the latest end so far passes it there
            first = bisect.bisect_right(reach, time, 0, last)
            if first < last and (found is None or positions[first] < found):
                found = positions[first]
        if found is None and self.windows:
            _, end, owner = self.windows[-1]
            if time == end and (owner is None or owner == pid):
                found = len(self.windows) - 1
        return found


def _work_under(
    trace: LinkedTrace, markers: list[int], own_us: float, gpu: bool
) -> tuple[list[WorkTime], list[WorkTime]]:
    """The outermost C++ ops inside the given marker ranges (not inside a finer marker), and
    the kernels those ranges launched."""
    from ncompass.traces.reader import TraceReader

    chosen = set(markers)
    kernels: dict[str, list[float]] = defaultdict(list)
    if gpu:
        for index in range(len(trace.gpu)):
            if trace.marker_of_gpu_event(index) in chosen:
                kernels[trace.names[trace.gpu.name[index]]].append(trace.gpu.duration[index])
    spans = _Spans((trace.markers[m] for m in chosen), trace)
    inner = _Spans((m for m in trace.markers if m.parent in chosen), trace)
    ops: dict[str, list[float]] = defaultdict(list)
    covered_until: dict[Any, float] = {}
    events = []
    for event in TraceReader(trace.path, progress=False):
        if event.get("ph") == "X" and event.get("cat") == "cpu_op":
            events.append(event)
    events.sort(key=lambda e: float(e.get("ts", 0)))
    for event in events:
        start = float(event["ts"]) - trace.origin_us
        duration = float(event.get("dur", 0.0))
        thread = (event.get("pid"), event.get("tid"))
        if start < covered_until.get(thread, float("-inf")):
            continue  # inside an op already counted
        if not spans.holds(thread, start) or inner.holds(thread, start):
            continue
        covered_until[thread] = start + duration
        ops[str(event.get("name"))].append(duration)
    own_gpu = sum(sum(d) for d in kernels.values()) or 1.0
    own_cpu = own_us or 1.0
    return _top(ops, own_cpu), _top(kernels, own_gpu)


class _Spans:
    """Marker ranges per thread, to ask quickly whether a time falls inside one."""

    def __init__(self, markers: Iterable[Marker], trace: LinkedTrace) -> None:
        by_thread: dict[Any, list[tuple[float, float]]] = defaultdict(list)
        for marker in markers:
            by_thread[trace.threads[marker.thread]].append((marker.start, marker.end))
        self._starts = {t: [s for s, _ in sorted(v)] for t, v in by_thread.items()}
        self._ends = {t: [e for _, e in sorted(v)] for t, v in by_thread.items()}

    def holds(self, thread: Any, time: float) -> bool:
        starts = self._starts.get(thread)
        if not starts:
            return False
        position = bisect.bisect_right(starts, time) - 1
        return position >= 0 and time < self._ends[thread][position]


def _top(times: dict[str, list[float]], whole: float) -> list[WorkTime]:
    ranked = sorted(times.items(), key=lambda item: -sum(item[1]))[:_TOP_OPS]
    return [
        WorkTime(name, round(sum(d) / 1000, 3), len(d), round(sum(d) / whole, 4))
        for name, d in ranked
    ]


__all__ = ["Answer", "Contender", "Ranking", "WorkTime", "answer_from_markers", "decide"]
