"""Kernel-launch statistics: how long launches take on the CPU and wait before the GPU runs them."""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ncompass.analysis import _native
from ncompass.analysis.distribution import Distribution
from ncompass.traces.link import NO_LINK, LinkedTrace


@dataclass(frozen=True)
class LaunchStatistics:
    """How the GPU events of one rank relate to their CPU launches.

    Attributes:
        gpu_events: GPU events considered.
        linked: Those whose launch was found through ``args.correlation``.
        launch_delay_us: GPU start minus launch start, over linked events.
        launch_cpu_us: CPU duration of the launch calls, over linked events.
        gpu_duration_us: GPU duration of the linked events.
        shorter_than_launch: Linked GPU events that ran for less time than their launch call took
            on the CPU: the GPU finishes them faster than the host can issue them.
    """

    gpu_events: int
    linked: int
    launch_delay_us: Distribution
    launch_cpu_us: Distribution
    gpu_duration_us: Distribution
    shorter_than_launch: int

    @property
    def unlinked(self) -> int:
        """GPU events with no CPU launch in the trace."""
        return self.gpu_events - self.linked

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {
            "gpu_events": self.gpu_events,
            "linked": self.linked,
            "unlinked": self.unlinked,
            "shorter_than_launch": self.shorter_than_launch,
            "launch_delay_us": self.launch_delay_us.to_dict(),
            "launch_cpu_us": self.launch_cpu_us.to_dict(),
            "gpu_duration_us": self.gpu_duration_us.to_dict(),
        }


def launch_statistics(trace: LinkedTrace, selected: Sequence[int]) -> LaunchStatistics:
    """Compute launch statistics over some GPU events of a trace.

    Args:
        trace: The linked trace.
        selected: Indices of the GPU events to consider.

    Returns:
        The statistics.
    """
    sweep, (usable, column) = _native.sweep, _native.sweep_order(selected, len(trace.gpu))
    if sweep is not None and usable:
        # one column at a time, at its exact length, sorted in place: 8 bytes a linked event
        gpu, launches = trace.gpu, trace.launches
        arguments = (gpu.launch, gpu.start, gpu.duration, launches.start, launches.duration, column)
        linked, shorter = sweep.launch_column(*arguments, 0, None)
        distributions = []
        for which in range(3):
            values = array("d", [0.0]) * linked
            sweep.launch_column(*arguments, which, values)
            distributions.append(Distribution.of_column(values))
            del values
        launch_delay_us, launch_cpu_us, gpu_duration_us = distributions
    else:
        delays, cpu_durations, gpu_durations, shorter = _launch_columns(trace, selected)
        linked = len(delays)
        # One distribution at a time, each column freed after it: sorting builds a list of floats.
        launch_delay_us = Distribution.of(delays)
        del delays
        launch_cpu_us = Distribution.of(cpu_durations)
        del cpu_durations
        gpu_duration_us = Distribution.of(gpu_durations)
    return LaunchStatistics(
        gpu_events=len(selected),
        linked=linked,
        launch_delay_us=launch_delay_us,
        launch_cpu_us=launch_cpu_us,
        gpu_duration_us=gpu_duration_us,
        shorter_than_launch=shorter,
    )


def _launch_columns(
    trace: LinkedTrace, selected: Sequence[int]
) -> tuple[array[float], array[float], array[float], int]:
    """Delays, launch CPU durations and GPU durations of the linked events among ``selected``,
    and how many of them were shorter on the GPU than their launch on the CPU."""
    gpu_launch, gpu_start, gpu_duration = trace.gpu.launch, trace.gpu.start, trace.gpu.duration
    launch_start, launch_duration = trace.launches.start, trace.launches.duration
    # Compact columns: a trace can hold millions of launches.
    delays = array("d")
    cpu_durations = array("d")
    gpu_durations = array("d")
    shorter = 0
    for index in selected:
        launch = gpu_launch[index]
        if launch == NO_LINK:
            continue
        gpu_duration_us = gpu_duration[index]
        cpu_duration_us = launch_duration[launch]
        delays.append(gpu_start[index] - launch_start[launch])
        cpu_durations.append(cpu_duration_us)
        gpu_durations.append(gpu_duration_us)
        if gpu_duration_us < cpu_duration_us:
            shorter += 1
    return delays, cpu_durations, gpu_durations, shorter
