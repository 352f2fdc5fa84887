"""Types of the C extension ``_sweep.c`` (the per-GPU-event sweeps of a rank's breakdown)."""

from array import array
from collections.abc import Callable

def order_by_start(start: array[float], selected: array[int]) -> bytes | None:
    """``selected`` sorted by start (stable) as bytes of longs; None when a start is NaN."""

def merge_by_class(
    start: array[float],
    duration: array[float],
    kernel_class: array[int],
    by_start: array[int],
    classes: int,
) -> tuple[tuple[bytes, bytes], list[tuple[bytes, bytes]]]:
    """The union of all GPU intervals and of each class's, as (starts, ends) bytes of doubles."""

def launch_columns(
    gpu_launch: array[int],
    gpu_start: array[float],
    gpu_duration: array[float],
    launch_start: array[float],
    launch_duration: array[float],
    selected: array[int],
) -> tuple[bytes, bytes, bytes, int]:
    """Delays, launch CPU and GPU durations of the linked events, and how many were shorter."""

def idle_gaps(
    gpu_start: array[float],
    gpu_duration: array[float],
    gpu_launch: array[int],
    launch_start: array[float],
    launch_marker: array[int],
    by_start: array[int],
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
