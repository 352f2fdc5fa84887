"""What a run is asked to do and how it ended: ``RunOptions``, ``RunResult``, spec loading and
the ``python -m ncompass run`` command line that repeats a run in a fresh process.

The in-process runner (:mod:`ncompass.capture.runner`), the child run
(:mod:`ncompass.capture.child_run`) and the session's script runs share these; none of them
imports another for them.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ncompass.capture.backends.kinds import DEFAULT_PROFILER
from ncompass.spec.merge import merge_specs
from ncompass.spec.models import RewriteConfig, TargetSpec

if TYPE_CHECKING:
    from ncompass.capture.gpu_timeline import GpuMonitorOptions, GpuTimeline
    from ncompass.capture.triggers import RecordingWindowOptions
    from ncompass.importer.registry import MarkerRecord


@dataclass
class RunOptions:
    """What ``ncompass run`` was asked to do.

    Attributes:
        specs: Spec files or loaded specs, merged in order.
        script: The script to run (or None with ``module``).
        module: The module to run as ``-m`` (or None with ``script``).
        args: Arguments for the script.
        profiler: ``torch``, ``nvtx``, ``nvtx-trace`` (the NVTX recorder, in a child process)
            or ``none``.
        output_dir: Trace folder (default ``$NCOMPASS_TRACE_DIR`` or ``traces``).
        trace_name: Trace file name without ``.json`` (default: ``<script>-<time>``, which
            gets ``-1``, ``-2``, ... when taken); an existing file of that name is refused
            (:class:`~ncompass.capture.trace_files.TraceExistsError`) unless ``force_overwrite``.
        force_overwrite: Replace an existing trace of ``trace_name`` (and its sidecar).
        record_shapes / profile_memory / with_stack: torch profiler options.
        nsys: Run under ``nsys profile`` (in a child process) and convert its report;
            ``profiler`` is then ignored: markers are NVTX ranges.
        nsys_args: More options for ``nsys profile``.
        follow: The Python processes the script starts get the run's specs and profiler, and
            their traces are merged into the run's (``--no-follow``: only this process).
        process_hooks: Internal: per module, its options; in every followed process that
            starts its work, ``module.start_in_process(options)`` runs and what it returns is
            called when the process ends (the session's stack sampler).
        reexecuted: Internal: set in the child that ``nsys``/``nvtx-trace`` runs re-execute.
        recording_windows: Record only these windows (``--window``, ``--delay``/``--duration``,
            ``--on-demand``), one trace per span named ``<trace>-wN``.
    """

    specs: Sequence[str | Path | RewriteConfig] = ()
    script: str | None = None
    module: str | None = None
    args: list[str] = field(default_factory=list)
    profiler: str = DEFAULT_PROFILER
    output_dir: str | Path | None = None
    trace_name: str | None = None
    force_overwrite: bool = False
    record_shapes: bool = False
    profile_memory: bool = False
    with_stack: bool = False
    full_trace: bool = False
    gpu_monitor: GpuMonitorOptions | None = None
    nsys: bool = False
    nsys_args: Sequence[str] = ()
    follow: bool = True
    process_hooks: Mapping[str, Any] = field(default_factory=dict)
    reexecuted: bool = False
    recording_windows: RecordingWindowOptions | None = None


@dataclass
class RunResult:
    """How the run ended and what it wrote."""

    exit_code: int
    trace_path: Path | None
    sidecar_path: Path | None
    markers: list[MarkerRecord]
    duration_s: float
    config: RewriteConfig
    gpu: GpuTimeline | None = None
    unplaced: list[TargetSpec] = field(default_factory=list)
    window_traces: list[Path] = field(default_factory=list)
    window_warning: str | None = None
    # the program ran a torch profiler of its own: ncompass's stepped aside and wrote no trace
    code_profiler: bool = False

    warnings: list[str] = field(default_factory=list)  # e.g. a followed process left no trace


def load_specs(
    specs: Sequence[str | Path | RewriteConfig], default_context: str | None
) -> RewriteConfig:
    """Load and merge specs (files or objects). Raises SpecError naming the bad file and line."""
    configs = [
        spec if isinstance(spec, RewriteConfig) else RewriteConfig.from_yaml(spec) for spec in specs
    ]
    return merge_specs(configs, default_context)


def run_command(
    spec_files: Sequence[str | Path],
    *,
    output_dir: str | Path,
    trace_name: str,
    script: str | None = None,
    module: str | None = None,
    args: Sequence[str] = (),
    profiler: str | None = None,
    full_trace: bool = False,
    options: Sequence[str] = (),
    entry: str = "ncompass run",
    recording_windows: RecordingWindowOptions | None = None,
) -> list[str]:
    """``python -m ncompass run ...``: the command that repeats a run in a fresh process.

    Args:
        spec_files: The specs, as files the new process can read.
        output_dir / trace_name: Where the trace goes and its name.
        script / module: What runs (exactly one).
        args: The script's arguments.
        profiler: ``--profiler`` (left out: the default, ``torch``).
        full_trace: ``--full-trace``.
        options: More options, placed before the script.
        entry: The program: ``ncompass run``, or a module taking the same options
            (``ncompass.session.discovery``).
        recording_windows: The run's recording windows, asked for again.
    """
    program, _, command_name = entry.partition(" ")
    command = [sys.executable, "-m", program, *([command_name] if command_name else [])]
    if profiler is not None:
        command += ["--profiler", profiler]
    command += list(options)
    if recording_windows is not None:
        command += recording_windows.command_line()
    command += ["--output-dir", str(output_dir), "--trace-name", trace_name]
    for spec in spec_files:
        command += ["--config", str(spec)]
    if full_trace:
        command.append("--full-trace")
    if module is not None:
        command += ["-m", module]
    else:
        script = script or ""
        command.append(script if not script.startswith("-") else f".{os.sep}{script}")
    return command + list(args)


__all__ = ["RunOptions", "RunResult", "load_specs", "run_command"]
