"""The typed rows of the several-rank report and of a run's per-process report.

Kept apart from :mod:`ncompass.analysis.ranks` so that :mod:`~ncompass.analysis.summary_types`
can name them without importing the analysis.
"""

from __future__ import annotations

from typing import Literal

# typing_extensions' TypedDict, as in summary_types (pydantic validates only it before 3.12)
from typing_extensions import NotRequired, TypedDict

from ncompass.analysis.stragglers import StragglerReport


class RankRow(TypedDict):
    """One trace of a several-trace summary: its column label and its totals (microseconds)."""

    label: str
    rank: int
    path: str
    cpu_wall_us: float
    gpu_events: int
    kernel_span_us: float
    compute_us: float
    non_compute_us: float
    communication_us: float
    idle_us: float
    host_bound_idle_us: float
    outside_communication_us: float
    findings: list[str]
    processes: NotRequired[list[str]]  # the roles of a run's processes under this rank


class SlowestRank(TypedDict):
    """The straggler: the trace with the most of ``measure``, against the median over traces."""

    label: str
    rank: int
    path: str
    measure: Literal["outside_communication_us", "cpu_wall_us", "wait_caused_us"]
    value_us: float
    median_us: float
    over_median: float


# "class" is a keyword: the functional form is the only way to spell this key.
SpreadRow = TypedDict(
    "SpreadRow",
    {
        "name": str,
        "class": NotRequired[str],  # kernels only
        "calls": int,
        "total_us": float,
        "by_rank_us": dict[str, float],
        "median_us": float,
        "max_us": float,
        "slowest": str,
        "over_median": float,
    },
)
SpreadRow.__doc__ = """A marker or kernel name: its time on each trace, by column label."""


class RanksStructured(TypedDict):
    """The ``structured`` part of a several-trace summary (docs/analysis.md, "Several traces")."""

    label: Literal["rank", "run"]
    ranks: list[RankRow]
    slowest: SlowestRank
    markers: list[SpreadRow]
    kernels: list[SpreadRow]
    stragglers: NotRequired[StragglerReport]  # ranks that meet at collectives


class TopMarker(TypedDict):
    """One of a process's most expensive markers."""

    name: str
    calls: int
    cpu_total_us: float


class ProcessRow(TypedDict):
    """One process of a run's merged trace (docs/analysis.md, "Every process of a run").

    ``rank`` is the rank the process states; ``under_rank`` the rank it is reported under (its
    own, else its nearest ancestor's: a DataLoader worker of rank 1 is under rank 1).
    """

    pid: int
    ppid: int | None
    role: str
    rank: int | None
    under_rank: int | None
    command: str
    exit_code: int | None
    trace_file: str | None
    wall_us: float
    marker_cpu_us: float
    markers: int
    launches: int
    gpu_events: int
    gpu_busy_us: float
    top_markers: list[TopMarker]


class RunReport(TypedDict):
    """The per-process and per-rank part of the summary of a run's merged trace."""

    processes: list[ProcessRow]
    ranks: NotRequired[RanksStructured]
    program_span_us: NotRequired[float]  # the union of the processes' marker/launch spans


__all__ = [
    "ProcessRow",
    "RankRow",
    "RanksStructured",
    "RunReport",
    "SlowestRank",
    "SpreadRow",
    "TopMarker",
]
