"""Types of the C extension ``_sweep.c`` (the per-GPU-event sweeps of a rank's breakdown)."""

from array import array
from collections.abc import Callable

def order_by_start(start: array[float], selected: array[int]) -> array[int] | None:
    """Sort ``selected`` by start in place (stable) and return it; None when a start is NaN."""

def in_start_order(start: array[float]) -> bool:
    """Whether the events are in order of start already (False with a NaN start)."""

def merge_union(
    start: array[float],
    duration: array[float],
    kernel_class: array[int],
    by_start: array[int] | None,
    classes: int,
    code: int,
    starts: array[float] | None,
    ends: array[float] | None,
) -> tuple[int, float, float, float]:
    """How many intervals the union of one class's (or, with code -1, all) GPU intervals has,
    their total length, first start and last end; written into ``starts`` and ``ends`` (of
    exactly that length) unless they are None."""

def union_coverage(
    start: array[float],
    duration: array[float],
    kernel_class: array[int],
    by_start: array[int] | None,
    classes: int,
    code: int,
    begin: float,
    scale: float,
    columns: int,
) -> list[float] | None:
    """The share of each bin the union covers (timeline's coverage, before the cap at 1.0);
    None when a bin position is not finite."""

def launch_column(
    gpu_launch: array[int],
    gpu_start: array[float],
    gpu_duration: array[float],
    launch_start: array[float],
    launch_duration: array[float],
    selected: array[int] | None,
    which: int,
    out: array[float] | None,
) -> tuple[int, int]:
    """(linked events, those shorter than their launch); their delays (``which`` 0), launch CPU
    durations (1) or GPU durations (2) written into ``out`` unless it is None."""

def sort_doubles(values: array[float]) -> bool:
    """Sort in place; False (untouched) when a value is NaN or a negative zero."""

def idle_gaps(
    gpu_start: array[float],
    gpu_duration: array[float],
    gpu_launch: array[int],
    launch_start: array[float],
    launch_marker: array[int],
    by_start: array[int] | None,
    group_of: Callable[[int], int],
    kept: int,
) -> tuple[
    tuple[int, float],
    tuple[int, float],
    tuple[int, float],
    bytes,
    list[tuple[float, int, float]],
]:
    """Counts and totals of host-bound, not host-bound and unknown gaps, host-bound time per
    marker group id, and the ``kept`` largest gaps, largest first."""
