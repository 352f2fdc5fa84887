"""What a session concludes from one run: the discovery run's call tree and estimate, or the
markers' exact measurement, as an :class:`Answer`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ncompass.errors import TraceError
from ncompass.session.answer import Answer, answer_from_markers
from ncompass.session.callstacks import StackProfile, stack_profile
from ncompass.session.history import IterationRecord
from ncompass.session.hotpath import (
    HotStatement,
    answer_from_samples,
    candidates,
    hot_statements,
    plan_hot_paths,
)
from ncompass.session.planner import MarkerPlanner
from ncompass.session.proposal import Proposal
from ncompass.session.sampler import StackSamples

_SHOWN = 5
# a folded helper is named when it held at least this share of the steady-state time
_FOLDED_SHOWN = 0.05


@dataclass
class Discovery:
    """A discovery run read back: its profile and its hottest statements."""

    profile: StackProfile
    statements: list[HotStatement]

    def summary(self) -> dict[str, Any]:
        """JSON-ready: setup apart, steady time, the hottest statements, and the helpers whose
        time was credited to the statements calling them (``folded``)."""
        total = self.profile.total_us or 1.0
        return {
            "basis": "gpu" if self.profile.gpu else "cpu",
            "steady_ms": round(self.profile.steady_us / 1000, 3),
            "setup_ms": {k: round(v / 1000, 3) for k, v in self.profile.setup_us.items()},
            "hottest": [
                {
                    "file": s.file,
                    "lines": [s.start, s.end],
                    "statement": s.text,
                    "function": f"{s.module}:{s.qualname}",
                    "ms": round(self.profile.basis_us(s.time) / 1000, 3),
                    "share": round(self.profile.basis_us(s.time) / total, 4),
                    "depth": len(s.path.frames),
                    "process": self.profile.process_of(s.leaves),
                }
                for s in self.statements[:_SHOWN]
            ],
            "folded": [
                {
                    "function": f"{function.module}:{function.qualname}",
                    "file": function.file,
                    "ms": round(us / 1000, 3),
                    "callers": len(
                        {
                            line
                            for line, callees in self.profile.callees.items()
                            if function in callees
                        }
                    ),
                }
                for function, us in sorted(self.profile.folded.items(), key=lambda i: -i[1])[
                    :_SHOWN
                ]
                if us >= _FOLDED_SHOWN * (self.profile.steady_us or 1.0)
            ],
        }


def read_discovery(
    record: IterationRecord, script: str, planner: MarkerPlanner, include_setup: bool
) -> Discovery | None:
    """The call tree of a discovery run (None when it recorded no stacks)."""
    if record.stacks_path is None or not Path(record.stacks_path).is_file():
        return None
    samples = StackSamples.read(Path(record.stacks_path))
    profile = stack_profile(
        samples, script, include_setup=include_setup, gpu_launches_us=gpu_launches(record)
    )
    return Discovery(profile, hot_statements(planner, profile))


def gpu_launches(record: IterationRecord) -> list[tuple[float, float, Any]]:
    """``(Unix µs of the launching CPU call, GPU µs, the launching process's pid)`` of every GPU
    event of a run's trace."""
    from ncompass.traces.link import NO_LINK, link_trace

    try:
        trace = link_trace(record.trace_path, progress=False)
    except TraceError:
        return []
    if not len(trace.gpu):
        return []
    base = float(trace.metadata.get("baseTimeNanoseconds", 0)) / 1000
    found = []
    for index in range(len(trace.gpu)):
        launch = trace.gpu.launch[index]
        if launch != NO_LINK:
            at = trace.origin_us + trace.launches.start[launch] + base
            pid = trace.threads[trace.launches.thread[launch]][0]
            found.append((at, trace.gpu.duration[index], _as_pid(pid)))
    found.sort(key=lambda launch: launch[:2])
    return found


def _as_pid(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def hot_path_proposal(
    discovery: Discovery, planner: MarkerPlanner
) -> tuple[Proposal, list[HotStatement]]:
    """Markers down the paths to the hottest statements, and those statements."""
    chosen = candidates(discovery.statements, discovery.profile)
    if not chosen:
        return Proposal(), []
    return plan_hot_paths(planner, discovery.profile, chosen), chosen


def discovery_answer(discovery: Discovery, runs: int) -> Answer | None:
    """The discovery run's own estimate."""
    return answer_from_samples(discovery.profile, discovery.statements, runs)


def measured_answer(
    record: IterationRecord,
    runs: int,
    predicted: list[dict[str, Any]],
    setup_ms: dict[str, float],
    include_setup: bool = False,
) -> Answer | None:
    """The markers' answer; ``confirmed`` says whether it is the discovery run's estimate."""
    try:
        answer = answer_from_markers(record, runs, include_setup=include_setup)
    except TraceError:
        return None
    if answer is None:
        return None
    answer.setup_ms = dict(setup_ms)
    if predicted:
        first = predicted[0]
        answer.confirmed = Path(first["file"]).resolve() == Path(answer.file).resolve() and list(
            first["lines"]
        ) == list(answer.lines)
    return answer


__all__ = [
    "Discovery",
    "discovery_answer",
    "gpu_launches",
    "hot_path_proposal",
    "measured_answer",
    "read_discovery",
]
