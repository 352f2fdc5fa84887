"""``compare``: match two sides' markers, CPU operators and kernels and test each change."""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path

from ncompass.analysis.comparison.interval import ratio_interval
from ncompass.analysis.comparison.kernel_names import normalize_kernel_name
from ncompass.analysis.comparison.noise import contention_warnings, run_count_warnings
from ncompass.analysis.comparison.result import (
    FEWEST_CALLS,
    NEGLIGIBLE_US,
    NOISE,
    Change,
    Comparison,
    SideTimes,
)
from ncompass.analysis.comparison.samples import STEP_MARKER, SideSamples, read_side
from ncompass.errors import NcompassError

Samples = dict[str, "array[float]"]


def compare(
    before: Iterable[str | Path],
    after: Iterable[str | Path],
    *,
    noise: float = NOISE,
    progress: bool | None = None,
) -> Comparison:
    """Compare traces recorded before and after a change.

    Each side may hold several traces (ranks, or repeated runs); their samples are pooled and
    times are reported per run. A run's merged trace is one run: its processes are matched by
    role (``rank 0`` to ``rank 0``) in ``processes``. Every trace is read once, streaming.

    Args:
        before: Trace files of the first side.
        after: Trace files of the second side.
        noise: The practical-equivalence band (0.10: a change within ±10 % is ``same``
            whatever its interval; see docs/compare.md).
        progress: Progress bar on stderr (None: only on a terminal, for large files).

    Returns:
        The comparison: whole-run measures first, then one change per marker, CPU operator and
        kernel, each with its ratio, bootstrap interval and verdict.

    Raises:
        NcompassError: A side has no trace.
        TraceError: A file is missing, truncated or not a trace.
    """
    before_paths, after_paths = list(before), list(after)
    if not before_paths or not after_paths:
        raise NcompassError("compare needs at least one trace on each side: BEFORE... -- AFTER...")
    return compare_samples(
        read_side(before_paths, progress=progress),
        read_side(after_paths, progress=progress),
        noise=noise,
    )


def compare_samples(before: SideSamples, after: SideSamples, *, noise: float = NOISE) -> Comparison:
    """Compare two sides already read (see :func:`~.samples.read_side`).

    Args:
        before: The first side's samples.
        after: The second side's samples.
        noise: The practical-equivalence band (see :func:`compare`).

    Returns:
        The comparison.
    """
    if noise < 0:
        raise NcompassError(f"noise {noise!r}: the band must be a fraction >= 0, such as 0.05")
    negligible_us = NEGLIGIBLE_US

    def judged(changes: tuple[Change, ...], floor: float, fewest: int = 0) -> tuple[Change, ...]:
        return tuple(
            replace(change, noise=noise, negligible_us=floor, fewest_calls=fewest)
            for change in changes
        )

    markers = judged(_by_name("marker", "markers", before, after), negligible_us, FEWEST_CALLS)
    cpu_ops = judged(_by_name("cpu_op", "cpu_ops", before, after), negligible_us, FEWEST_CALLS)
    warnings = [
        *run_count_warnings(before.runs, after.runs, None),
        *contention_warnings([*markers, *cpu_ops]),
    ]
    return Comparison(
        before_paths=tuple(str(path) for path in before.paths),
        after_paths=tuple(str(path) for path in after.paths),
        overall=judged(_overall(before, after), 0.0),
        markers=markers,
        cpu_ops=cpu_ops,
        kernels=judged(_kernels(before, after), negligible_us, FEWEST_CALLS),
        processes=judged(_by_name("process", "processes", before, after), negligible_us),
        timelines=(before.timeline, after.timeline),
        noise=noise,
        negligible_us=negligible_us,
        warnings=tuple(warnings),
    )


def _overall(before: SideSamples, after: SideSamples) -> tuple[Change, ...]:
    """The whole-run measures: per profiler step when both sides have steps, else per run."""
    steps_before = before.markers.get(STEP_MARKER)
    steps_after = after.markers.get(STEP_MARKER)
    with_gpu = before.has_gpu or after.has_gpu
    if not (steps_before and steps_after):
        # one sample a run: each is a run, whose spread the verdict weighs (interval.within)
        each_run = (list(range(len(before.spans))), list(range(len(after.spans))))
        run_time = _change("run", "run time", before.spans, after.spans, 1, 1, starts=each_run)
        if not with_gpu:
            return (run_time,)
        busy = _change(
            "gpu_busy", "GPU busy time", before.gpu_busy, after.gpu_busy, 1, 1, starts=each_run
        )
        return run_time, busy
    runs = (before.runs, after.runs)
    run_time = _change(
        "step",
        "step time",
        steps_before,
        steps_after,
        *runs,
        starts=(before.starts("markers", STEP_MARKER), after.starts("markers", STEP_MARKER)),
    )
    if not with_gpu:
        return (run_time,)
    busy = _change(
        "gpu_busy", "GPU busy time per step", before.step_gpu_busy, after.step_gpu_busy, *runs
    )
    return run_time, busy


def _by_name(kind: str, column: str, before: SideSamples, after: SideSamples) -> tuple[Change, ...]:
    old: Samples = getattr(before, column)
    new: Samples = getattr(after, column)
    changes = [
        _change(
            kind,
            name,
            old.get(name),
            new.get(name),
            before.runs,
            after.runs,
            starts=(before.starts(column, name), after.starts(column, name)),
        )
        for name in dict.fromkeys([*old, *new])
    ]
    return _largest_first(changes)


def _kernels(before: SideSamples, after: SideSamples) -> tuple[Change, ...]:
    """Kernels matched by exact name, then the rest by normalised name."""
    runs = (before.runs, after.runs)
    changes = [
        _change(
            "kernel",
            name,
            before.kernels[name],
            after.kernels[name],
            *runs,
            starts=(before.starts("kernels", name), after.starts("kernels", name)),
        )
        for name in before.kernels
        if name in after.kernels
    ]
    only_before = _group_by_normalized(n for n in before.kernels if n not in after.kernels)
    only_after = _group_by_normalized(n for n in after.kernels if n not in before.kernels)
    for key, names_before in only_before.items():
        names_after = only_after.pop(key, None)
        if names_after is None:
            changes.extend(
                _change("kernel", name, before.kernels[name], None, *runs) for name in names_before
            )
            continue
        change = _change(
            "kernel",
            key,
            _pooled(before.kernels, names_before),
            _pooled(after.kernels, names_after),
            *runs,
            matched_by="normalized name",
        )
        changes.append(
            replace(change, names_before=tuple(names_before), names_after=tuple(names_after))
        )
    for names_after in only_after.values():
        changes.extend(
            _change("kernel", name, None, after.kernels[name], *runs) for name in names_after
        )
    return _largest_first(changes)


def _group_by_normalized(names: Iterable[str]) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for name in names:
        groups.setdefault(normalize_kernel_name(name), []).append(name)
    return groups


def _pooled(samples: Samples, names: Sequence[str]) -> array[float]:
    pooled = array("d")
    for name in names:
        pooled.extend(samples[name])
    return pooled


def _change(
    kind: str,
    name: str,
    before: array[float] | None,
    after: array[float] | None,
    runs_before: int,
    runs_after: int,
    *,
    matched_by: str = "name",
    starts: tuple[Sequence[int], Sequence[int]] = ((), ()),
) -> Change:
    before_times = _side_times(before, runs_before)
    after_times = _side_times(after, runs_after)
    ratio = None
    interval = None
    if before_times and after_times and before is not None and after is not None:
        if before_times.mean_us > 0:
            ratio = after_times.mean_us / before_times.mean_us
        interval = ratio_interval(before, after, before_runs=starts[0], after_runs=starts[1])
    return Change(
        kind=kind,
        name=name,
        before=before_times,
        after=after_times,
        ratio=ratio,
        interval=interval,
        matched_by=matched_by if before_times and after_times else "",
    )


def _side_times(samples: array[float] | None, runs: int) -> SideTimes | None:
    if not samples:
        return None
    total = sum(samples)
    return SideTimes(
        calls=len(samples) / runs,
        total_us=total / runs,
        mean_us=total / len(samples),
        samples=len(samples),
        lower_quartile_us=_lower_quartile(samples),
    )


def _lower_quartile(samples: array[float]) -> float:
    ordered = sorted(samples)
    return ordered[(len(ordered) - 1) // 4]


def _largest_first(changes: list[Change]) -> tuple[Change, ...]:
    """The largest change of time first; among equal changes, the most time first."""

    def size(change: Change) -> tuple[float, float]:
        times = [side.total_us for side in (change.before, change.after) if side is not None]
        return -abs(change.delta_us), -max(times)

    return tuple(sorted(changes, key=size))
