"""The summary's shape, as types: what ``summarize_trace`` returns and every provider answers.

These are ``TypedDict``\\ s, so a summary stays the plain JSON-ready dict of the seed SDK at run
time (``{"markdown", "structured"}``) while mypy checks every key a consumer reads. Keys marked
``NotRequired`` are written only by some producers (the LLM provider's narrative) or are absent
from summaries of older versions; a consumer must read them with ``.get``.
"""

from __future__ import annotations

from typing import Any, Literal

# typing_extensions' TypedDict: pydantic validates only it on Python < 3.12 (tests use that)
from typing_extensions import NotRequired, TypedDict

from ncompass.analysis.foreign_events import ForeignEvents
from ncompass.analysis.marker_tree import MarkerTreeRow
from ncompass.analysis.ranks_types import RunReport
from ncompass.traces.unrecorded_markers import UnrecordedMarkers


class CompiledKernelRow(TypedDict):
    """One Inductor kernel generated from a marker's code: its calls and their total time."""

    name: str
    calls: int
    total_us: float


class EfficiencyRow(TypedDict):
    """How far a marker, op or kernel is from the limit (``analysis/roofline.py``).

    ``flops`` counts every op (FlopCounterMode's formulas for matrix products, convolutions
    and attention, ``tensor_flops``, plus a documented count for the rest); ``bytes`` is the
    ops' input and output sizes, a lower bound on traffic. ``bound``/``of_peak`` are None when
    the device has no known peaks."""

    flops: float
    tensor_flops: float
    bytes: float
    flops_per_s: float | None
    bytes_per_s: float | None
    intensity: float | None
    bound: Literal["compute", "memory", "overhead"] | None
    of_peak: float | None
    time_left_us: float | None  # time × (1 − of_peak)
    estimated: NotRequired[bool]  # a kernel's share of work its op launched with others
    gpu_idle_share: NotRequired[float]  # on GPU traces: CPU time with no kernel of it running


class MarkerRow(TypedDict):
    """One marker name's statistics (``MarkerStats.to_dict``); times in microseconds."""

    name: str
    calls: int
    cpu_total_us: float
    cpu_self_us: float
    cpu_min_us: float
    cpu_max_us: float
    cpu_mean_us: float
    gpu_total_us: float
    gpu_self_us: float
    gpu_events: int
    launches: int
    sync_calls: int
    sync_us: float
    threads: int
    compiled_kernels: list[CompiledKernelRow]
    efficiency: NotRequired[EfficiencyRow | None]  # None: the trace has no shapes


class MarkerOperation(MarkerRow):
    """An ``operations`` row of kind ``marker``: its statistics and its shares."""

    kind: Literal["marker"]
    share_of_cpu_time: float
    share_of_gpu_time: float


# "class" is a keyword: the functional form is the only way to spell this key.
KernelOperation = TypedDict(
    "KernelOperation",
    {
        "kind": Literal["kernel"],
        "name": str,
        "class": str,
        "calls": int,
        "total_us": float,
        "mean_us": float,
        "max_us": float,
        "bytes": int,
        "share_of_gpu_time": float,
        "efficiency": NotRequired[EfficiencyRow | None],
    },
)
KernelOperation.__doc__ = """An ``operations`` row of kind ``kernel``: one GPU event name."""


class CpuOperation(TypedDict):
    """An ``operations`` row of kind ``cpu_op``: one CPU operator name."""

    kind: Literal["cpu_op"]
    name: str
    calls: int
    total_us: float
    mean_us: float
    max_us: float
    share_of_cpu_time: float
    efficiency: NotRequired[EfficiencyRow | None]


Operation = MarkerOperation | KernelOperation | CpuOperation
"""One ``operations`` row; ``kind`` tells which."""


class BottleneckRow(TypedDict):
    """One finding of the bottleneck rules (``Bottleneck.to_dict``)."""

    rule: str
    severity: str
    subject_kind: str
    subject: str
    title: str
    evidence: dict[str, Any]
    recommendation: str


class RankBreakdownRow(TypedDict):
    """One rank's GPU time breakdown (``RankBreakdown.to_dict``); times in microseconds."""

    kernel_span_us: float
    idle_us: float
    compute_us: float
    non_compute_us: float
    gpu_events: int
    path: str
    window: str
    computation_us: float
    communication_us: float
    memory_us: float
    communication_overlapped_us: float
    launches: dict[str, Any]
    idle_gaps: dict[str, Any]


class BreakdownRow(RankBreakdownRow):
    """The summary's ``breakdown``: the rank's breakdown and the rank."""

    rank: int


class CompilePhases(TypedDict):
    """torch.compile's own phase ranges in the trace: how many and their total time."""

    ranges: int
    total_us: float


class SetupLabelRow(TypedDict):
    """One package imported, or one class constructed, during setup: its time and spans."""

    label: str
    us: float
    count: int


class SetupRow(TypedDict):
    """Time spent once, apart from the steady state (``analysis/setup_time.py``), in µs."""

    compile_us: float
    compilations: int
    in_markers_us: float
    outside_markers_us: float
    compile_in_marker_us: dict[str, float]
    # the program's imports and model construction, from the run's sidecar (setup spans)
    setup_spans_recorded: bool  # False: no sidecar, or one from a run older than setup spans
    imports_us: float
    construction_us: float
    imports_top: list[SetupLabelRow]  # per top-level package, largest first
    construction_top: list[SetupLabelRow]  # per class, largest first
    setup_us: float  # imports, construction and compilation together
    steady_us: float  # the CPU wall time outside them
    setup_outside_markers_us: float  # the part of outside_markers_us that is setup
    other_outside_markers_us: float  # the rest


class TraceInfo(TypedDict):
    """The summary's ``trace``: which file, which rank, and how much was in it."""

    path: str
    rank: int
    cpu_wall_us: float
    gpu_events: int
    markers: int
    launches: int
    event_counts: dict[str, int]
    compile_phases: CompilePhases
    setup: SetupRow
    # markers placed with `context: nvtx` under `--profiler torch` (from the run's sidecar)
    unrecorded_markers: NotRequired[UnrecordedMarkers]
    cpu_waited_share: NotRequired[float]  # from the sidecar: the main thread's wait for a CPU
    program_span_us: NotRequired[float]  # a run's merged trace: when its processes ran code


class UncreditedRow(TypedDict):
    """Time in compiled code that no marker is credited with, under one event name."""

    name: str
    calls: int
    total_us: float


class CompiledRegionRow(TypedDict):
    """The summary's ``compiled_code``: the ``torch.compile``d regions' time (GPU time of what
    they launched, else CPU time), the part the markers' Inductor kernels hold, and the rest."""

    source: Literal["gpu", "cpu"]
    regions: int
    total_us: float
    credited_us: float
    uncredited_us: float
    uncredited: list[UncreditedRow]


class Focus(TypedDict, total=False):
    """The summary's ``focus``: what the user asked about (empty when nothing was asked)."""

    feedback_text: str
    target_module: str
    markers: list[str]


class TimelineLane(TypedDict):
    """One top-level marker name on the timeline, its ranges in bins."""

    name: str
    calls: int
    total_us: float
    ranges: list[list[float]]


class Timeline(TypedDict):
    """GPU (or marker CPU) busy fraction per bin of the run, and the top-level markers."""

    source: Literal["gpu", "cpu"]
    start_us: float
    end_us: float
    columns: int
    busy: list[float]
    lanes: list[TimelineLane]


class Narrative(TypedDict):
    """The LLM provider's checked narrative."""

    model: str
    text: str


class StructuredSummary(TypedDict):
    """The summary's ``structured`` part: the numbers behind the markdown."""

    operations: list[Operation]
    bottlenecks: list[BottleneckRow]
    recommendations: list[str]
    markers: list[MarkerRow]
    breakdown: BreakdownRow
    trace: TraceInfo
    focus: Focus
    timeline: NotRequired[Timeline]
    narrative: NotRequired[Narrative]
    compiled_code: NotRequired[CompiledRegionRow]
    run: NotRequired[RunReport]  # a run's merged trace of several processes
    # efficiency (analysis/roofline.py): None when the trace has no shapes
    device: NotRequired[dict[str, Any] | None]
    model_flops: NotRequired[float | None]
    mfu: NotRequired[dict[str, Any] | None]
    efficiency_note: NotRequired[str]  # why there are no figures
    foreign: NotRequired[ForeignEvents]  # a trace without torch profiler events
    marker_tree: NotRequired[list[MarkerTreeRow]]  # each marker under its enclosing one


class Summary(TypedDict):
    """A trace's summary, the seed SDK's shape: a markdown report and its numbers."""

    markdown: str
    structured: StructuredSummary


__all__ = [
    "BottleneckRow",
    "BreakdownRow",
    "CompilePhases",
    "CompiledKernelRow",
    "CpuOperation",
    "EfficiencyRow",
    "Focus",
    "KernelOperation",
    "MarkerOperation",
    "MarkerRow",
    "Narrative",
    "Operation",
    "RankBreakdownRow",
    "SetupLabelRow",
    "SetupRow",
    "StructuredSummary",
    "Summary",
    "Timeline",
    "TimelineLane",
    "TraceInfo",
]
