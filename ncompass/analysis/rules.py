"""Bottleneck rules: explicit checks over the numbers, each naming what it is about.

Every rule returns zero or more :class:`Bottleneck` with its evidence (the numbers it fired on)
and one recommendation. Thresholds are module constants so the docs can quote them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from ncompass.analysis.breakdown import RankBreakdown
from ncompass.analysis.call_spread import call_spread
from ncompass.analysis.markers import MarkerStats
from ncompass.analysis.operations import KernelStats
from ncompass.analysis.setup_time import WHOLE_RUN_MARKERS, SetupTime, setup_time
from ncompass.analysis.summary_types import BottleneckRow
from ncompass.traces.link import NO_LINK, LinkedTrace, marker_group

IDLE_FRACTION = 0.2  # GPU idle share of the kernel span worth reporting
HOST_BOUND_FRACTION = 0.5  # share of idle time that must be host-bound to blame the host
TINY_KERNEL_MIN_COUNT = 50
TINY_KERNEL_FRACTION = 0.5  # share of kernels shorter than their own launch call
PAGEABLE_MIN_COUNT = 1
SYNC_SHARE_LOW = 0.01  # share of a marker's CPU time spent synchronizing: low / medium / high
SYNC_SHARE_MEDIUM = 0.1
SYNC_SHARE_HIGH = 0.3
DOMINANT_MARKER_SHARE = 0.5
DOMINANT_KERNEL_SHARE = 0.4
EXPOSED_COMMUNICATION_FRACTION = 0.1
_PROFILER_STEPS = "ProfilerStep#*"
_DOMINANT_KERNEL_ADVICE = {
    "computation": (
        "Optimise '{name}' first: check its shapes and dtypes (tensor cores need "
        "fp16/bf16/tf32 and aligned sizes), or swap in a tuned implementation (a spec `replace` "
        "with an autotuned Triton kernel)."
    ),
    "memory": (
        "Most GPU time goes to '{name}': keep tensors on the GPU between steps, avoid repeated "
        ".to(device)/.cpu() round trips, and pin host memory and copy with non_blocking=True so "
        "copies overlap computation."
    ),
    "communication": (
        "Most GPU time is the collective '{name}': communicate less (gradient bucketing, "
        "compression or lower-precision communication hooks) and overlap it with computation."
    ),
}
_SEVERITY_ORDER = {"high": 0, "medium": 1, "low": 2}


@dataclass(frozen=True)
class Bottleneck:
    """One finding.

    Attributes:
        rule: Stable id of the rule that fired (``gpu-idle-host-bound``, ...).
        severity: ``high``, ``medium`` or ``low``.
        subject_kind: ``marker``, ``kernel`` or ``trace``.
        subject: The marker or kernel name it is about (the trace path for ``trace``).
        title: One sentence saying what is wrong, with the key number.
        evidence: The numbers the rule fired on.
        recommendation: What to try.
    """

    rule: str
    severity: str
    subject_kind: str
    subject: str
    title: str
    evidence: dict[str, Any] = field(default_factory=dict)
    recommendation: str = ""

    def to_dict(self) -> BottleneckRow:
        """JSON-ready dict."""
        return {
            "rule": self.rule,
            "severity": self.severity,
            "subject_kind": self.subject_kind,
            "subject": self.subject,
            "title": self.title,
            "evidence": dict(self.evidence),
            "recommendation": self.recommendation,
        }


@dataclass(frozen=True)
class RuleInput:
    """Everything the rules look at, computed once."""

    trace: LinkedTrace
    breakdown: RankBreakdown
    markers: dict[str, MarkerStats]
    kernels: Mapping[str, KernelStats]

    @cached_property
    def setup(self) -> SetupTime:
        """torch.compile's time and the markers' coverage (see :mod:`.setup_time`)."""
        return setup_time(self.trace)


Rule = Callable[[RuleInput], list[Bottleneck]]


def find_bottlenecks(facts: RuleInput) -> list[Bottleneck]:
    """Run every rule; return the findings, most severe first.

    Args:
        facts: The analysed trace.

    Returns:
        Findings ordered by severity, then by rule order.
    """
    found = [finding for rule in RULES for finding in rule(facts)]
    return sorted(found, key=lambda finding: _SEVERITY_ORDER[finding.severity])


def gpu_idle_host_bound(facts: RuleInput) -> list[Bottleneck]:
    """The GPU sits idle waiting for the host to launch work."""
    rank = facts.breakdown
    gaps = rank.idle_gaps
    span = rank.kernel_span_us
    if span <= 0 or rank.idle_us / span < IDLE_FRACTION or rank.idle_us <= 0:
        return []
    if gaps.host_bound_us / rank.idle_us < HOST_BOUND_FRACTION:
        return []
    subject_kind, subject = _heaviest_marker(gaps.host_bound_us_by_marker, facts)
    idle_fraction = rank.idle_us / span
    return [
        Bottleneck(
            rule="gpu-idle-host-bound",
            severity="high" if idle_fraction >= 0.5 else "medium",
            subject_kind=subject_kind,
            subject=subject,
            title=(
                f"GPU idle {idle_fraction:.0%} of its span, mostly waiting for the host to "
                f"launch work (in {subject})"
            ),
            evidence={
                "kernel_span_us": span,
                "idle_us": rank.idle_us,
                "idle_fraction": idle_fraction,
                "host_bound_idle_us": gaps.host_bound_us,
                "host_bound_gaps": gaps.host_bound_count,
                "host_bound_idle_us_in_subject": gaps.host_bound_us_by_marker.get(subject, 0.0),
                "median_gpu_duration_us": rank.launches.gpu_duration_us.median,
                "median_launch_cpu_us": rank.launches.launch_cpu_us.median,
            },
            recommendation=(
                f"Keep the GPU fed in '{subject}': move host work (Python logic, data "
                "preparation, .item()/.cpu() calls) out of the launch path, and issue fewer, "
                "larger kernels (fuse ops with torch.compile, capture the loop in a CUDA graph)."
            ),
        )
    ]


def tiny_kernels(facts: RuleInput) -> list[Bottleneck]:
    """Many GPU events finish faster than the host takes to launch them."""
    launches = facts.breakdown.launches
    span = facts.breakdown.kernel_span_us
    # Short kernels only cost throughput when the GPU ends up waiting for them.
    if span <= 0 or facts.breakdown.idle_us / span < IDLE_FRACTION:
        return []
    if launches.linked < TINY_KERNEL_MIN_COUNT:
        return []
    fraction = launches.shorter_than_launch / launches.linked
    if fraction < TINY_KERNEL_FRACTION:
        return []
    trace = facts.trace
    by_marker: dict[str, float] = {}
    gpu = trace.gpu
    for index in range(len(gpu)):
        launch = gpu.launch[index]
        if launch == NO_LINK or gpu.duration[index] >= trace.launches.duration[launch]:
            continue
        owner = trace.launches.marker[launch]
        if owner != NO_LINK:
            name = marker_group(trace.markers[owner].name)
            by_marker[name] = by_marker.get(name, 0.0) + 1
    subject_kind, subject = _heaviest_marker(by_marker, facts)
    return [
        Bottleneck(
            rule="launch-bound-tiny-kernels",
            severity="high" if fraction >= 0.8 else "medium",
            subject_kind=subject_kind,
            subject=subject,
            title=(
                f"{launches.shorter_than_launch} of {launches.linked} GPU events "
                f"({fraction:.0%}) run shorter than their CPU launch call (most in {subject})"
            ),
            evidence={
                "kernels_shorter_than_launch": launches.shorter_than_launch,
                "linked_kernels": launches.linked,
                "fraction": fraction,
                "in_subject": int(by_marker.get(subject, 0)),
                "median_gpu_duration_us": launches.gpu_duration_us.median,
                "median_launch_cpu_us": launches.launch_cpu_us.median,
            },
            recommendation=(
                f"Launch overhead dominates in '{subject}': fuse the small kernels "
                "(torch.compile), batch the work into larger tensors, or replay the region as "
                "a CUDA graph."
            ),
        )
    ]


def pageable_memcpy(facts: RuleInput) -> list[Bottleneck]:
    """Host-device copies from pageable (unpinned) memory."""
    pageable = [entry for name, entry in facts.kernels.items() if "pageable" in name.lower()]
    count = sum(entry.calls for entry in pageable)
    if count < PAGEABLE_MIN_COUNT:
        return []
    total = sum(entry.total_us for entry in pageable)
    size = sum(entry.bytes for entry in pageable)
    trace = facts.trace
    by_marker: dict[str, float] = {}
    gpu = trace.gpu
    pageable_ids = {index for index, name in enumerate(trace.names) if "pageable" in name.lower()}
    for index in range(len(gpu)):
        if gpu.name[index] in pageable_ids:
            owner = trace.marker_of_gpu_event(index)
            if owner != NO_LINK:
                name = marker_group(trace.markers[owner].name)
                by_marker[name] = by_marker.get(name, 0.0) + gpu.duration[index]
    subject_kind, subject = _heaviest_marker(by_marker, facts)
    if subject_kind == "trace":
        subject_kind, subject = "kernel", max(pageable, key=lambda entry: entry.total_us).name
    span = facts.breakdown.kernel_span_us
    share = total / span if span > 0 else 0.0
    return [
        Bottleneck(
            rule="pageable-memcpy",
            severity="medium" if share >= 0.05 else "low",
            subject_kind=subject_kind,
            subject=subject,
            title=f"{count} copies to or from pageable host memory took {total:.0f} µs "
            f"({size} bytes), most in {subject}",
            evidence={
                "copies": count,
                "total_us": total,
                "bytes": size,
                "share_of_kernel_span": share,
                "in_subject_us": by_marker.get(subject, total),
            },
            recommendation=(
                f"Pin the host tensors copied in '{subject}' (tensor.pin_memory(), "
                "DataLoader(pin_memory=True)) and copy with non_blocking=True, so copies run "
                "asynchronously at full bandwidth."
            ),
        )
    ]


def synchronization_in_marker(facts: RuleInput) -> list[Bottleneck]:
    """Runtime calls that wait for the GPU inside a marked region."""
    findings: list[Bottleneck] = []
    candidates = [
        stats
        for stats in facts.markers.values()
        if stats.sync_calls and stats.cpu_total_us > 0 and stats.name != _PROFILER_STEPS
    ]
    # The innermost markers carry the most precise blame; report those with the largest share.
    candidates.sort(key=lambda stats: -stats.sync_us / stats.cpu_total_us)
    for stats in candidates[:3]:
        share = stats.sync_us / stats.cpu_total_us
        if share < SYNC_SHARE_LOW:
            continue
        severity = "high" if share >= SYNC_SHARE_HIGH else "medium"
        severity = severity if share >= SYNC_SHARE_MEDIUM else "low"
        findings.append(
            Bottleneck(
                rule="sync-in-marker",
                severity=severity,
                subject_kind="marker",
                subject=stats.name,
                title=(
                    f"'{stats.name}' spends {share:.0%} of its CPU time in {stats.sync_calls} "
                    "synchronizing calls"
                ),
                evidence={
                    "sync_calls": stats.sync_calls,
                    "sync_us": stats.sync_us,
                    "marker_cpu_total_us": stats.cpu_total_us,
                    "share_of_marker": share,
                    "marker_calls": stats.calls,
                },
                recommendation=(
                    f"Remove host-GPU synchronization from '{stats.name}': avoid .item(), "
                    ".cpu(), .tolist(), printing CUDA tensors and torch.cuda.synchronize() "
                    "inside it; keep values on the GPU and synchronize once after the loop."
                ),
            )
        )
    return findings


def dominant_marker(facts: RuleInput) -> list[Bottleneck]:
    """One marker takes most of the time: the place to add finer markers.

    The whole-run ranges are the run itself, never a finding. Times are steady-state times:
    setup (torch.compile's compilation, the program's imports and model construction, reported
    apart) is taken out of the markers that hold it and out of the reference.
    """
    setup = facts.setup
    steady = {
        stats.name: setup.steady_us(stats.name, stats.cpu_total_us)
        for stats in facts.markers.values()
        if stats.name not in WHOLE_RUN_MARKERS
    }
    if not steady:
        return []
    steps = facts.markers.get(_PROFILER_STEPS)
    if steps is not None:
        whole = setup.steady_us(steps.name, steps.cpu_total_us)
    else:
        whole = setup.steady_state_us
    if whole <= 0:
        return []
    name = max(steady, key=lambda key: steady[key])
    top = facts.markers[name]
    share = steady[name] / whole
    if share < DOMINANT_MARKER_SHARE:
        return []
    unexplained = top.cpu_self_us / top.cpu_total_us if top.cpu_total_us else 0.0
    reference = "ProfilerStep time" if steps is not None else "trace CPU wall time"
    evidence = {
        "marker_cpu_total_us": top.cpu_total_us,
        "reference_us": whole,
        "reference": reference + _less_setup(setup),
        "share": min(share, 1.0),
        "unexplained_by_nested_markers": unexplained,
        "gpu_total_us": top.gpu_total_us,
        "calls": top.calls,
    }
    if setup.compile_us:
        evidence["compile_inside_us"] = top.cpu_total_us - steady[name]
    # the denominator named, so that it is not read as the marker table's share of the wall
    of = "the profiler steps' time" if steps is not None else "the steady state"
    if steps is None and setup.setup_us > 0:
        of += " (CPU wall time less setup)"
    title = f"'{top.name}' takes {share:.0%} of {of}"
    if share > 1.0:  # ranges on several threads at once add up to more than the reference
        title = (
            f"'{top.name}' adds up to {share:.1f}x {of} (its ranges, on {top.threads} "
            "threads, overlap each other or run outside it)"
        )
    severity = "medium"
    advice = (
        f"Drill into '{top.name}': {unexplained:.0%} of its time is not covered by "
        "finer markers yet; add markers to the functions, calls or line ranges it runs."
    )
    spread = call_spread(
        [marker.duration for marker in facts.trace.markers if marker_group(marker.name) == name]
    )
    if spread is not None:
        evidence.update(
            median_call_us=spread.median_us,
            longest_call_us=spread.max_us,
            calls_holding_half=spread.carriers,
        )
        if spread.few_carry_it:  # an outlier call, not the marker's typical cost
            severity = "low"
            title += f", but {spread.carriers_sentence()}"
            advice = (
                f"Look at the longest calls of '{top.name}' before its typical one: one slow "
                "call (a warm-up, a first-call compilation, the machine busy with another "
                "process) is not what every call costs. Re-run to see whether it recurs, or "
                "record the steady state only (--window)."
            )
        else:
            title += f" ({spread.sentence()})"
    return [
        Bottleneck(
            rule="dominant-marker",
            severity=severity,
            subject_kind="marker",
            subject=top.name,
            title=title,
            evidence=evidence,
            recommendation=advice,
        )
    ]


def _less_setup(setup: SetupTime) -> str:
    if setup.setup_us > setup.compile_us:  # imports or model construction were measured
        return " less setup"
    return " less compilation" if setup.compile_us else ""


def dominant_kernel(facts: RuleInput) -> list[Bottleneck]:
    """One GPU kernel takes most of the GPU time."""
    busy = sum(entry.total_us for entry in facts.kernels.values())
    if busy <= 0:
        return []
    top = next(iter(facts.kernels.values()))
    share = top.total_us / busy
    if share < DOMINANT_KERNEL_SHARE:
        return []
    return [
        Bottleneck(
            rule="dominant-kernel",
            severity="medium",
            subject_kind="kernel",
            subject=top.name,
            title=f"'{_short(top.name)}' takes {share:.0%} of all GPU time ({top.calls} calls)",
            evidence={
                "kernel_total_us": top.total_us,
                "gpu_busy_us": busy,
                "share": share,
                "calls": top.calls,
                "mean_us": top.mean_us,
                "class": top.kernel_class,
            },
            recommendation=_DOMINANT_KERNEL_ADVICE[top.kernel_class].format(name=_short(top.name)),
        )
    ]


def exposed_communication(facts: RuleInput) -> list[Bottleneck]:
    """Communication kernels that do not overlap computation."""
    rank = facts.breakdown
    span = rank.kernel_span_us
    exposed = rank.communication_us - rank.communication_overlapped_us
    if span <= 0 or rank.communication_us <= 0 or exposed / span < EXPOSED_COMMUNICATION_FRACTION:
        return []
    communication = [
        entry for entry in facts.kernels.values() if entry.kernel_class == "communication"
    ]
    subject = communication[0].name if communication else str(facts.trace.path)
    fraction = exposed / span
    return [
        Bottleneck(
            rule="exposed-communication",
            severity="high" if fraction >= 0.3 else "medium",
            subject_kind="kernel" if communication else "trace",
            subject=subject,
            title=(
                f"Communication not overlapped with computation for {fraction:.0%} of the GPU "
                f"span (largest: {_short(subject)})"
            ),
            evidence={
                "communication_us": rank.communication_us,
                "overlapped_with_computation_us": rank.communication_overlapped_us,
                "exposed_us": exposed,
                "kernel_span_us": span,
                "exposed_fraction": fraction,
            },
            recommendation=(
                "Overlap collectives with computation: let DDP/FSDP bucket and prefetch "
                "(bucket_cap_mb, forward/backward prefetch), launch collectives asynchronously "
                "(async_op=True) and wait only where the result is needed."
            ),
        )
    ]


def empty_trace(facts: RuleInput) -> list[Bottleneck]:
    """A trace without any event: there is nothing to analyse."""
    trace = facts.trace
    if len(trace.gpu) or trace.event_counts:
        # a CPU-only trace is said once, in the report's first line: no advice to move to a GPU
        return []
    title = "The trace holds no events: there is nothing to analyse"
    advice = (
        "Check that the profiler was running while the code of interest ran (for "
        "torch.profiler with a schedule, that enough steps were taken to reach the active "
        "ones) and that the trace was exported after it stopped."
    )
    return [
        Bottleneck("empty-trace", "low", "trace", str(trace.path), title, {"events": 0}, advice)
    ]


RULES: tuple[Rule, ...] = (
    gpu_idle_host_bound,
    tiny_kernels,
    exposed_communication,
    synchronization_in_marker,
    pageable_memcpy,
    dominant_marker,
    dominant_kernel,
    empty_trace,
)
"""Every rule, in the order findings of equal severity are listed."""


def _heaviest_marker(weights: dict[str, float], facts: RuleInput) -> tuple[str, str]:
    """The marker carrying the most weight, preferring real markers over profiler steps."""
    named = {name: weight for name, weight in weights.items() if name != _PROFILER_STEPS}
    pool = named or weights
    if not pool:
        return "trace", str(facts.trace.path)
    return "marker", max(pool.items(), key=lambda item: item[1])[0]


def _short(name: str, width: int = 60) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"
