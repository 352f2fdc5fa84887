"""The breakdown as text: one row per rank, the kernel types over ranks, each rank's launches.

``ncompass breakdown`` prints it, and so does ``ncompass submit`` / ``jobs fetch`` for the
ranks of a job.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ncompass._format import format_duration
from ncompass.analysis.breakdown import Breakdown, ProcessBreakdown, RankBreakdown, RunBreakdown

NO_GPU_ACTIVITY = (
    "no GPU activity (CPU-only trace): nothing to break down; "
    "`ncompass summarize TRACE` shows its CPU time"
)


def breakdown_lines(result: Breakdown) -> list[str]:
    """The lines of the breakdown table (without line ends).

    Ranks without GPU events get one line saying so instead of a row of zeros.
    """
    if any(not rank.gpu_events for rank in result.ranks):
        return _lines_without_cpu_only_ranks(result)
    lines = _table("rank", [(str(rank.rank), rank) for rank in result.ranks])
    lines.append(
        "kernel types over ranks: "
        f"computation {format_duration(result.computation_us)}, "
        f"communication {format_duration(result.communication_us)}, "
        f"memory {format_duration(result.memory_us)}"
    )
    for rank in result.ranks:
        launches = rank.launches
        if launches.linked:
            lines.append(
                f"rank {rank.rank} launches: {launches.linked}/{launches.gpu_events} linked, "
                f"median delay {format_duration(launches.launch_delay_us.median)}, "
                f"median CPU launch {format_duration(launches.launch_cpu_us.median)}, "
                f"median GPU {format_duration(launches.gpu_duration_us.median)}, "
                f"{launches.shorter_than_launch} shorter than their launch"
            )
    for rank in result.ranks:
        if rank.run is not None:
            lines += _run_lines(rank.run, Path(rank.path).name)
    return lines


def _lines_without_cpu_only_ranks(result: Breakdown) -> list[str]:
    """The table of the ranks with GPU events, then a line per rank without any (once if all)."""
    with_gpu = tuple(rank for rank in result.ranks if rank.gpu_events)
    cpu_only = [rank for rank in result.ranks if not rank.gpu_events]
    if not with_gpu:
        lines = [NO_GPU_ACTIVITY]
    else:
        lines = breakdown_lines(replace(result, ranks=with_gpu))
        lines += [f"rank {rank.rank}: {NO_GPU_ACTIVITY}" for rank in cpu_only]
    for rank in cpu_only:  # a run's merged trace: its processes' CPU time still tells
        if rank.run is not None:
            lines += _run_lines(rank.run, Path(rank.path).name)
    return lines


def _run_lines(run: RunBreakdown, name: str) -> list[str]:
    """A run's merged trace: a table of its processes, then one of its ranks."""
    width = max(len("process"), *(len(_role(process)) for process in run.processes))
    if not any(process.breakdown.gpu_events for process in run.processes):
        # CPU only: GPU columns would be zeros, and the ranks' table would hold nothing else
        lines = ["", f"processes of {name}: CPU time only (no GPU events)"]
        lines.append(f"{'process':>{width}} {'CPU span':>11} {'CPU in markers':>14}")
        for process in run.processes:
            cpu = format_duration(process.marker_cpu_us)
            lines.append(
                f"{_role(process):>{width}} {format_duration(process.wall_us):>11} {cpu:>14}"
            )
        return lines
    lines = ["", f"processes of {name}:"]
    table = _table(
        "process", [(_role(process), process.breakdown) for process in run.processes], width
    )
    lines.append(f"{table[0]} {'CPU span':>11} {'CPU in markers':>14}")
    for line, process in zip(table[1:], run.processes, strict=True):
        cpu = format_duration(process.marker_cpu_us)
        lines.append(f"{line} {format_duration(process.wall_us):>11} {cpu:>14}")
    if run.ranks:
        lines += ["", f"ranks of {name} (workers counted with their rank):"]
        lines += _table("rank", [(str(rank.rank), rank) for rank in run.ranks])
    return lines


def _role(process: ProcessBreakdown) -> str:
    role = process.role if len(process.role) <= 40 else process.role[:39] + "…"
    return f"{role} ({process.pid})"


def _table(label: str, rows: list[tuple[str, RankBreakdown]], width: int = 5) -> list[str]:
    """Header and one line per row: span, compute, non-compute, idle, host-bound idle."""
    header = f"{label:>{width}} {'span':>11} {'compute':>18} {'non-compute':>18} {'idle':>18} "
    lines = [header + f"{'host-bound idle':>18} {'GPU events':>10}"]
    for name, rank in rows:
        span = rank.kernel_span_us

        def cell(value: float, span: float = span) -> str:
            share = f"{value / span:6.1%}" if span > 0 else "     -"
            return f"{format_duration(value):>11} {share}"

        lines.append(
            f"{name:>{width}} {format_duration(span):>11} {cell(rank.compute_us)} "
            f"{cell(rank.non_compute_us)} {cell(rank.idle_us)} "
            f"{cell(rank.idle_gaps.host_bound_us)} {rank.gpu_events:>10}"
        )
    return lines


__all__ = ["breakdown_lines"]
