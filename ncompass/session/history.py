"""What each iteration of a session recorded, and how iterations compare."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# A marker's time changes "for real" only beyond this share and this many microseconds.
_RELATIVE_CHANGE = 0.10
_ABSOLUTE_CHANGE_US = 50.0


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
    """

    iteration: int
    spec_version: int
    spec_path: str | None
    trace_path: str
    summary_path: str | None = None
    markers: dict[str, MarkerTime] = field(default_factory=dict)
    manifest: list[dict[str, Any]] = field(default_factory=list)
    feedback: dict[str, Any] | None = None
    exit_code: int = 0
    note: str | None = None
    stacks_path: str | None = None
    discovery: dict[str, Any] | None = None
    answer: dict[str, Any] | None = None

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
        )

    def hottest(self, limit: int = 5) -> list[tuple[str, MarkerTime]]:
        """Markers by the time no finer marker explains yet (self time), largest first."""
        ranked = sorted(self.markers.items(), key=lambda item: -item[1].cpu_self_us)
        return ranked[:limit]


@dataclass(frozen=True)
class MarkerChange:
    """How one marker's time moved between two iterations."""

    name: str
    before_us: float
    after_us: float

    @property
    def ratio(self) -> float:
        """after / before (inf when it was free before)."""
        return self.after_us / self.before_us if self.before_us else float("inf")

    @property
    def verdict(self) -> str:
        """ "faster", "slower" or "same"."""
        delta = self.after_us - self.before_us
        if abs(delta) < max(_ABSOLUTE_CHANGE_US, _RELATIVE_CHANGE * self.before_us):
            return "same"
        return "faster" if delta < 0 else "slower"


def compare(before: IterationRecord, after: IterationRecord) -> list[MarkerChange]:
    """Markers present in both iterations, by mean time per call, biggest change first."""
    changes: list[MarkerChange] = []
    for name, old in before.markers.items():
        new = after.markers.get(name)
        if new is None or not old.calls or not new.calls:
            continue
        changes.append(
            MarkerChange(name, old.cpu_total_us / old.calls, new.cpu_total_us / new.calls)
        )
    return sorted(changes, key=lambda change: -abs(change.after_us - change.before_us))


__all__ = ["IterationRecord", "MarkerChange", "MarkerTime", "compare"]
