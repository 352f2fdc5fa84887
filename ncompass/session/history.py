"""What each iteration of a session recorded, and how iterations compare."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ncompass.analysis.comparison import Comparison, compare_samples
from ncompass.analysis.comparison.result import UNKNOWN
from ncompass.analysis.comparison.samples import SideSamples, read_side
from ncompass.errors import NcompassError
from ncompass.importer.registry import MarkerRecord


@dataclass
class MarkerTime:
    """One marker's cost in one iteration."""

    calls: int
    cpu_total_us: float
    cpu_self_us: float
    gpu_total_us: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {
            "calls": self.calls,
            "cpu_total_us": self.cpu_total_us,
            "cpu_self_us": self.cpu_self_us,
            "gpu_total_us": self.gpu_total_us,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MarkerTime:
        """The inverse of :meth:`to_dict`."""
        return cls(
            int(data.get("calls", 0)),
            float(data.get("cpu_total_us", 0.0)),
            float(data.get("cpu_self_us", 0.0)),
            float(data.get("gpu_total_us", 0.0)),
        )


@dataclass
class IterationRecord:
    """One profiled run of a session.

    Attributes:
        iteration: 1, 2, ... (never reused, even after ``reset()``).
        spec_version: The spec version that was applied (0: no markers).
        spec_path: Its file.
        trace_path: The trace of the run.
        summary_path: The cached summary of that trace, once computed.
        markers: Marker name → its time.
        manifest: The markers placed (name → module, function, lines).
        feedback: The feedback that led to this iteration's spec, if any.
        exit_code: How the profiled code ended (0 unless it raised).
        note: Anything the user should know (e.g. an external profiler's trace was used).
        stacks_path: The sampled stacks of a discovery run (None for a markers-only run).
        discovery: What the discovery run saw: setup time apart, the hottest statements.
        answer: The statement that holds the time, as of this iteration
            (:class:`ncompass.session.answer.Answer` as a dict).
        sites_ran: Per marker name placed at several sites (``self.c_attn`` called on two
            lines), the first and last line of the site that ran, as the discovery run's
            samples show it: the trace names both sites alike.
    """

    iteration: int
    spec_version: int
    spec_path: str | None
    trace_path: str
    summary_path: str | None = None
    markers: dict[str, MarkerTime] = field(default_factory=dict)
    manifest: list[MarkerRecord] = field(default_factory=list)
    feedback: dict[str, Any] | None = None
    exit_code: int = 0
    note: str | None = None
    stacks_path: str | None = None
    discovery: dict[str, Any] | None = None
    answer: dict[str, Any] | None = None
    sites_ran: dict[str, list[int]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {
            "iteration": self.iteration,
            "spec_version": self.spec_version,
            "spec_path": self.spec_path,
            "trace_path": self.trace_path,
            "summary_path": self.summary_path,
            "markers": {name: time.to_dict() for name, time in self.markers.items()},
            "manifest": self.manifest,
            "feedback": self.feedback,
            "exit_code": self.exit_code,
            "note": self.note,
            "stacks_path": self.stacks_path,
            "discovery": self.discovery,
            "answer": self.answer,
            "sites_ran": self.sites_ran,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> IterationRecord:
        """The inverse of :meth:`to_dict`."""
        return cls(
            iteration=int(data["iteration"]),
            spec_version=int(data.get("spec_version", 0)),
            spec_path=data.get("spec_path"),
            trace_path=str(data["trace_path"]),
            summary_path=data.get("summary_path"),
            markers={n: MarkerTime.from_dict(t) for n, t in (data.get("markers") or {}).items()},
            manifest=list(data.get("manifest") or []),
            feedback=data.get("feedback"),
            exit_code=int(data.get("exit_code", 0)),
            note=data.get("note"),
            stacks_path=data.get("stacks_path"),
            discovery=data.get("discovery"),
            answer=data.get("answer"),
            sites_ran={k: list(v) for k, v in (data.get("sites_ran") or {}).items()},
        )

    def hottest(self, limit: int = 5) -> list[tuple[str, MarkerTime]]:
        """Markers by the time no finer marker explains yet (self time), largest first."""
        ranked = sorted(self.markers.items(), key=lambda item: -item[1].cpu_self_us)
        return ranked[:limit]


@dataclass(frozen=True)
class MarkerChange:
    """How one marker's mean time per call moved between two iterations.

    Attributes:
        name: The marker.
        before_us, after_us: Its mean time per call in each iteration.
        verdict: ``ncompass compare``'s verdict (``faster``/``slower``/``same``, see
            ``Change.verdict``), ``unknown`` when a trace is gone or holds too few calls.
        interval: The 95 % interval of ``after / before`` (None when unknown).
    """

    name: str
    before_us: float
    after_us: float
    verdict: str = UNKNOWN
    interval: tuple[float, float] | None = None

    @property
    def ratio(self) -> float:
        """after / before (inf when it was free before)."""
        return self.after_us / self.before_us if self.before_us else float("inf")

    def to_dict(self) -> dict[str, Any]:
        """The ``session history --json`` shape of one change."""
        return {
            "marker": self.name,
            "before_us": self.before_us,
            "after_us": self.after_us,
            "verdict": self.verdict,
            "interval": list(self.interval) if self.interval else None,
        }


def compare_iterations(before: IterationRecord, after: IterationRecord) -> Comparison | None:
    """``ncompass.analysis.compare`` of two iterations' traces (None when one cannot be read)."""
    sides = _TraceSides()
    return sides.compare(before, after)


def compare(before: IterationRecord, after: IterationRecord) -> list[MarkerChange]:
    """Markers present in both iterations, by mean time per call, biggest change first.

    The verdict and interval come from :func:`ncompass.analysis.compare` on the two traces
    (per-call samples, bootstrap interval of the ratio); without both traces it is unknown.
    """
    return marker_changes(before, after, compare_iterations(before, after))


def history_changes(records: list[IterationRecord]) -> list[list[MarkerChange]]:
    """The changes of each iteration from the one before (none for the first); each trace is
    read once."""
    sides = _TraceSides()
    result: list[list[MarkerChange]] = []
    for index, record in enumerate(records):
        if not index:
            result.append([])
            continue
        previous = records[index - 1]
        result.append(marker_changes(previous, record, sides.compare(previous, record)))
    return result


def marker_changes(
    before: IterationRecord, after: IterationRecord, comparison: Comparison | None
) -> list[MarkerChange]:
    """The shared markers' changes, with the verdicts of ``comparison`` where it has them."""
    tested = {change.name: change for change in comparison.markers} if comparison else {}
    changes: list[MarkerChange] = []
    for name, old in before.markers.items():
        new = after.markers.get(name)
        if new is None or not old.calls or not new.calls:
            continue
        change = tested.get(name)
        if change is None or change.before is None or change.after is None:
            changes.append(
                MarkerChange(name, old.cpu_total_us / old.calls, new.cpu_total_us / new.calls)
            )
            continue
        interval = change.interval
        changes.append(
            MarkerChange(
                name,
                change.before.mean_us,
                change.after.mean_us,
                change.verdict,
                (interval.low, interval.high) if interval else None,
            )
        )
    return sorted(changes, key=lambda change: -abs(change.after_us - change.before_us))


class _TraceSides:
    """Each iteration's trace read once (None when it is gone or unreadable)."""

    def __init__(self) -> None:
        self._read: dict[str, SideSamples | None] = {}

    def compare(self, before: IterationRecord, after: IterationRecord) -> Comparison | None:
        old, new = self._side(before.trace_path), self._side(after.trace_path)
        return compare_samples(old, new) if old is not None and new is not None else None

    def _side(self, path: str) -> SideSamples | None:
        if path not in self._read:
            try:
                self._read[path] = read_side([path], progress=False)
            except NcompassError:
                self._read[path] = None
        return self._read[path]


__all__ = [
    "IterationRecord",
    "MarkerChange",
    "MarkerTime",
    "compare",
    "compare_iterations",
    "history_changes",
    "marker_changes",
]
