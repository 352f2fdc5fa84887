"""``ncompass run``: a script or module under rewrites and a profiler, with its trace written.

Whatever the script does (returns, exits, raises, is interrupted), the profiler is stopped and
the trace written; next to it, a sidecar file records how the trace was made: the command, the
merged spec, and every marker placed (marker name → module, function, lines), which analysis
uses to map hot markers back to source.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ncompass import environment_variables
from ncompass.capture import termination
from ncompass.capture.backends import make_profiler
from ncompass.capture.backends.kinds import kind_of
from ncompass.capture.backends.nvtx import INJECTION_ENV as NVTX_INJECTION_ENV
from ncompass.capture.child_run import (
    USER_ERROR_EXIT_CODE,
    needs_child_process,
    run_in_child,
    write_child_error,
    write_child_report,
)
from ncompass.capture.compiled_kernels import provenance_note
from ncompass.capture.cpu_wait import CpuWaitClock, CpuWaitRecord
from ncompass.capture.follow.tree import FollowedRun, FollowOutcome
from ncompass.capture.gpu_timeline import GpuTimeline, finish, start_monitor
from ncompass.capture.lifecycle import ProfiledRun, profiled
from ncompass.capture.nvtx_markers import record_torch_markers_with_nvtx
from ncompass.capture.run_options import RunOptions, RunResult, load_specs
from ncompass.capture.setup_spans import recorded_setup_spans, recording_setup_spans
from ncompass.capture.sidecar import CompiledKernelsRecord, Sidecar, write_sidecar
from ncompass.capture.termination import program_running
from ncompass.capture.trace_files import (
    check_trace_name,
    claim_trace_path,
    describe_os_error,
    prepare_trace_folder,
    release_claim,
    timestamped_name,
    trace_dir,
)
from ncompass.errors import CaptureError, NcompassError
from ncompass.gpu import GpuMonitor
from ncompass.importer.hook import disable_rewrites, enable_rewrites
from ncompass.importer.registry import REGISTRY, MarkerRecord
from ncompass.importer.script import (
    ScriptOutcome,
    check_script,
    run_module,
    run_script,
)
from ncompass.importer.targets import unmet_requirement
from ncompass.overwrite_guard import refuse_overwriting_inputs
from ncompass.runtime.cuda_graphs import forget_captured_markers, graph_captured_markers
from ncompass.spec.models import RewriteConfig

if TYPE_CHECKING:
    from ncompass.capture.backends.base import ProfilerBackend
    from ncompass.capture.recording_windows import RecordedSpan, RecordingWindows
    from ncompass.capture.spans import WindowRecord

RUNNER_ENV = environment_variables.NCOMPASS_RUNNER


def run(options: RunOptions) -> RunResult:
    """Run the script or module of ``options`` under rewrites and the chosen profiler.

    Raises:
        SpecError: a spec is invalid or does not match the code it targets.
        ScriptNotFoundError: the script or module does not exist.
        CaptureError: the profiler cannot start or write its trace.
    """
    if (options.script is None) == (options.module is None):
        raise ValueError("give exactly one of script or module")
    if needs_child_process(options):
        return run_in_child(options)
    if options.script is not None:
        check_script(options.script)
    folder = prepare_trace_folder(trace_dir(options.output_dir))  # absolute, checked up front
    name, trace_path = _trace_name(options, folder)
    kind = kind_of(options.profiler)
    config = _run_config(options)
    windows = _recording_windows(options, config, folder, name)  # checked before anything runs
    started = time.time()
    clock = time.perf_counter()
    cpu_wait = CpuWaitClock()
    cpu_wait.start()
    outcome = ScriptOutcome(1)
    monitor: GpuMonitor | None = None
    gpu: GpuTimeline | None = None
    profiled_run: ProfiledRun | None = None
    followed: FollowedRun | None = None

    def start_monitor_after_profiler() -> None:  # the profiler's start is slow: not timed
        nonlocal monitor
        if followed is not None:
            followed.profiler_started(profiler)
        if options.gpu_monitor is not None:
            monitor = start_monitor(options.gpu_monitor)

    forget_captured_markers()
    script_ended = False
    try:  # the trace is claimed inside the clean-up: a run that fails leaves nothing behind
        if kind.writes_trace and windows is None:  # windows claim their own
            exact, replace = bool(options.trace_name), options.force_overwrite
            trace_path = claim_trace_path(folder, name, exact=exact, replace=replace, reserve=True)
        profiler = _make_profiler(options, trace_path or Path(os.devnull))
        enable_rewrites(config)
        if options.follow:
            followed = FollowedRun.begin(config, options, trace_path, windows, folder / name)
        try:
            with (
                followed.scope() if followed is not None else contextlib.nullcontext(),
                profiled(
                    profiler,
                    config,
                    folder,
                    runner=True,
                    on_start=start_monitor_after_profiler,
                    windows=windows,
                    # the program's own torch profiler takes Kineto's one session: ours steps
                    # aside
                    yield_to_code_profiler=windows is None,
                ) as profiled_run,
            ):
                outcome = _run_entry(options)
                script_ended = True
        finally:
            if monitor is not None:
                gpu = finish(
                    monitor,
                    profiled_run.written if profiled_run else None,
                    windows=windows.time_spans() if windows is not None else (),
                )
        unplaced = [  # targets skipped for their `requires:` were warned about
            t for t in REGISTRY.unplaced(config) if not unmet_requirement(t.requires)
        ]
    except BaseException as error:
        _clean_up_failed_run(error, profiled_run.written if profiled_run else None, trace_path)
        if isinstance(error, CaptureError) and script_ended and outcome.exit_code != 0:
            error.exit_code = outcome.exit_code  # the trace failed, but the script first
        raise
    finally:
        disable_rewrites()
    written, markers = profiled_run.written, profiled_run.markers
    # the run's exit code, not the program's: 143/130 once a stop came, even one the program
    # caught and returned from, or one held while the trace was written
    outcome = dataclasses.replace(outcome, exit_code=termination.exit_code(outcome.exit_code))
    if profiled_run.yielded and trace_path is not None:
        release_claim(trace_path)  # claimed for a trace that was never written
    processes = None
    if followed is not None:
        processes = followed.finish(written, markers, outcome.exit_code, windows)
        markers, unplaced = processes.markers, processes.still_unplaced(unplaced)
    duration = time.perf_counter() - clock
    waited = cpu_wait.stop()
    sidecar = None
    if written is not None:
        kernels = _compiled_kernels(profiler, markers)
        sidecar = _write_sidecar(
            written,
            options,
            config,
            markers,
            outcome,
            started,
            duration,
            gpu,
            kernels,
            processes=processes,
            cpu_wait=waited,
        )
    if outcome.error is not None:  # a crash may have come before the imports: no guessing
        unplaced = []
    warnings = processes.warnings if processes is not None else []
    result = RunResult(
        outcome.exit_code, written, sidecar, markers, duration, config, gpu, unplaced,
        code_profiler=profiled_run.yielded, warnings=warnings,
    )  # fmt: skip
    if windows is not None:  # the sidecars written as each span ended now get the exit code
        for span in windows.spans:
            listed = processes.window_processes.get(span.trace) if processes else None
            _write_window_sidecar(span, options, config, outcome, markers, listed)
        result.window_traces = [span.trace for span in windows.spans]
        result.window_warning = windows.warning
    return result


def _trace_name(options: RunOptions, folder: Path) -> tuple[str, Path | None]:
    """The run's trace name and, given ``--trace-name``, its exact path (never an input's).

    Raises:
        OutputIsInputError: the trace would overwrite a spec or the script.
    """
    entry = options.script or options.module or "run"
    name = options.trace_name or timestamped_name(Path(entry).stem if options.script else entry)
    if not options.trace_name:
        return name, None
    trace_path = folder / f"{check_trace_name(name)}.json"
    files = [*options.specs, options.script]
    refuse_overwriting_inputs(trace_path, [item for item in files if isinstance(item, str | Path)])
    return name, trace_path


def _run_config(options: RunOptions) -> RewriteConfig:
    """The merged spec of the run; specs without a context get the profiler's.

    Raises:
        SpecError: a spec is invalid.
    """
    context = kind_of(options.profiler).marker_context
    if context == "torch" and os.environ.get(NVTX_INJECTION_ENV):
        # run under an NVTX tool (`nsys profile ncompass run ...`): show markers there too
        context = "torch+nvtx"
    config = load_specs(options.specs, context)
    if context == "nvtx":  # torch markers would record nothing: NVTX too
        record_torch_markers_with_nvtx(config)
    if options.full_trace:
        config = config.model_copy(update={"full_trace_mode": True})
    return config


def _clean_up_failed_run(
    error: BaseException, written: Path | None, trace_path: Path | None
) -> None:
    """What a run that did not end as asked leaves: its trace only if its program ran."""
    # a spec error, a `-m` typo: the run failed; a stop before the program: nothing ran
    before_program = isinstance(error, KeyboardInterrupt) and not termination.program_started()
    if written is not None and (isinstance(error, NcompassError) or before_program):
        written.unlink(missing_ok=True)
    elif trace_path is not None and written is None:
        release_claim(trace_path)


def _make_profiler(options: RunOptions, trace_path: Path) -> ProfilerBackend:
    return make_profiler(
        options.profiler,
        trace_path,
        record_shapes=options.record_shapes,
        profile_memory=options.profile_memory,
        with_stack=options.with_stack,
    )


def _recording_windows(
    options: RunOptions, config: RewriteConfig, folder: Path, name: str
) -> RecordingWindows | None:
    """The run's recording windows (None: the profiler records the whole run)."""
    if options.recording_windows is None:
        return None
    from ncompass.capture.recording_windows import windows_for_run

    return windows_for_run(
        options.recording_windows,
        options.profiler,
        config,
        folder,
        name,
        lambda trace, _number: _make_profiler(options, trace),
        lambda span: _write_window_sidecar(span, options, config, None),
    )


def _write_window_sidecar(
    span: RecordedSpan,
    options: RunOptions,
    config: RewriteConfig,
    outcome: ScriptOutcome | None,
    markers: list[MarkerRecord] | None = None,
    processes: list[dict[str, Any]] | None = None,
) -> None:
    """A span's sidecar: written when it ends (no exit code yet), again when the run ends
    (with the run's markers: the registry is emptied by then, and, for a run that followed
    its processes, the processes that recorded the window)."""
    markers = REGISTRY.manifest() if markers is None else markers
    kernels = _compiled_kernels(span.backend, markers)
    _write_sidecar(
        span.trace,
        options,
        config,
        markers,
        outcome,
        span.started_unix_s,
        span.duration_s,
        None,
        kernels,
        window=span.window,
        processes=FollowOutcome(processes=processes) if processes is not None else None,
    )


def _run_entry(options: RunOptions) -> ScriptOutcome:
    """Run the script or module of ``options`` as ``__main__``."""
    # SIGTERM and Ctrl-C stop the program, not the trace's writing; imports and model
    # construction are timed apart (setup spans, in the sidecar)
    with program_running(), recording_setup_spans():
        if options.script is not None:
            return run_script(options.script, list(options.args))
        assert options.module is not None
        return run_module(options.module, list(options.args))


def report_to_parent(options: RunOptions, report_file: Path) -> int:
    """The child's side of a re-executed run: run here, then tell the parent how it ended.

    Returns the exit code (2 when an ncompass error stopped the run).
    """
    try:
        result = run(options)
    except NcompassError as error:
        write_child_error(report_file, error)
        return USER_ERROR_EXIT_CODE
    write_child_report(report_file, result)
    return result.exit_code


def _compiled_kernels(
    profiler: ProfilerBackend, markers: list[MarkerRecord]
) -> CompiledKernelsRecord | None:
    """The sidecar's record of the Inductor kernels compiled during the run and their markers."""
    if not profiler.kind.records_ops:
        return None
    from ncompass.capture.kernel_markers import kernel_records

    note = provenance_note()
    if not profiler.compiled_kernels and note is None:
        return None
    return {"kernels": kernel_records(profiler.compiled_kernels, markers), "note": note}


def _write_sidecar(
    trace: Path,
    options: RunOptions,
    config: RewriteConfig,
    markers: list[MarkerRecord],
    outcome: ScriptOutcome | None,
    started: float,
    duration: float,
    gpu: GpuTimeline | None,
    compiled_kernels: CompiledKernelsRecord | None,
    *,
    window: WindowRecord | None = None,
    processes: FollowOutcome | None = None,
    cpu_wait: CpuWaitRecord | None = None,
) -> Path:
    command = ["-m", options.module] if options.module else [options.script or ""]
    document: Sidecar = {
        "trace": trace.name,
        "command": [*command, *options.args],
        "python": sys.executable,
        "profiler": options.profiler,
        "exit_code": outcome.exit_code if outcome is not None else None,
        "started_unix_s": started,
        "duration_s": duration,
        "spec": config.to_dict(),
        "markers": markers,
    }
    if window is not None:
        document["window"] = window
    if compiled_kernels is not None:
        document["compiled_kernels"] = compiled_kernels
    if gpu is not None:
        document["gpu"] = {
            "summaries": [summary.to_dict() for summary in gpu.summaries],
            "low_utilisation": gpu.low_utilisation,
            "counter_events": gpu.counter_events,
        }
    if processes is not None and len(processes.processes) > 1:
        document["processes"] = processes.processes
    if cpu_wait is not None:
        document["cpu_wait"] = cpu_wait
    # the program's imports and model constructions (capture/setup_spans.py)
    document["setup_spans"] = recorded_setup_spans()
    captured = graph_captured_markers()
    if captured:  # they recorded nothing: their code replays as a CUDA graph (docs/compile.md)
        document["cuda_graph_markers"] = captured
    try:
        return write_sidecar(trace, document)
    except OSError as error:
        raise CaptureError(
            f"could not write the sidecar of {trace}: {describe_os_error(error)}; the trace "
            "itself is written"
        ) from None


__all__ = [
    "RUNNER_ENV",
    "RunOptions",
    "RunResult",
    "load_specs",
    "report_to_parent",
    "run",
]
