"""``ncompass run``: a script or module under rewrites and a profiler, with its trace written.

Whatever the script does (returns, exits, raises, is interrupted), the profiler is stopped and
the trace written; next to it, a sidecar file records how the trace was made: the command, the
merged spec, and every marker placed (marker name → module, function, lines), which analysis
uses to map hot markers back to source.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ncompass import environment_variables
from ncompass.capture.backends import make_profiler
from ncompass.capture.backends.nvtx import INJECTION_ENV as NVTX_INJECTION_ENV
from ncompass.capture.backends.torch import TorchProfiler
from ncompass.capture.child_run import needs_child_process, run_in_child
from ncompass.capture.compiled_kernels import provenance_note
from ncompass.capture.decorator import PROFILE_ENV
from ncompass.capture.environment import scoped_environment
from ncompass.capture.gpu_timeline import GpuMonitorOptions, GpuTimeline, finish, start_monitor
from ncompass.capture.nvtx_markers import record_torch_markers_with_nvtx
from ncompass.capture.trace_files import (
    TRACE_DIR_ENV,
    claim_trace_path,
    safe_name,
    sidecar_path,
    timestamped_name,
    trace_dir,
)
from ncompass.gpu import GpuMonitor
from ncompass.importer.hook import FULL_TRACE_MARKER, disable_rewrites, enable_rewrites
from ncompass.importer.registry import REGISTRY
from ncompass.importer.script import (
    ScriptNotFoundError,
    ScriptOutcome,
    check_script,
    run_module,
    run_script,
)
from ncompass.importer.targets import unmet_requirement
from ncompass.overwrite_guard import refuse_overwriting_inputs
from ncompass.runtime.cuda_graphs import forget_captured_markers, graph_captured_markers
from ncompass.spec.merge import merge_specs
from ncompass.spec.models import RewriteConfig, TargetSpec

RUNNER_ENV = environment_variables.NCOMPASS_RUNNER


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
        trace_name: Trace file name without ``.json`` (default: ``<script>-<time>``); an
            existing file of that name is replaced.
        record_shapes / profile_memory / with_stack: torch profiler options.
        nsys: Run under ``nsys profile`` (in a child process) and convert its report;
            ``profiler`` is then ignored: markers are NVTX ranges.
        nsys_args: More options for ``nsys profile``.
        reexecuted: Internal: set in the child that ``nsys``/``nvtx-trace`` runs re-execute.
    """

    specs: Sequence[str | Path | RewriteConfig] = ()
    script: str | None = None
    module: str | None = None
    args: list[str] = field(default_factory=list)
    profiler: str = "torch"
    output_dir: str | Path | None = None
    trace_name: str | None = None
    record_shapes: bool = False
    profile_memory: bool = False
    with_stack: bool = False
    full_trace: bool = False
    gpu_monitor: GpuMonitorOptions | None = None
    nsys: bool = False
    nsys_args: Sequence[str] = ()
    reexecuted: bool = False


@dataclass
class RunResult:
    """How the run ended and what it wrote."""

    exit_code: int
    trace_path: Path | None
    sidecar_path: Path | None
    markers: list[dict[str, Any]]
    duration_s: float
    config: RewriteConfig
    gpu: GpuTimeline | None = None
    unplaced: list[TargetSpec] = field(default_factory=list)


def load_specs(
    specs: Sequence[str | Path | RewriteConfig], default_context: str | None
) -> RewriteConfig:
    """Load and merge specs (files or objects). Raises SpecError naming the bad file and line."""
    configs = [
        spec if isinstance(spec, RewriteConfig) else RewriteConfig.from_yaml(spec) for spec in specs
    ]
    return merge_specs(configs, default_context)


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
    folder = trace_dir(options.output_dir)
    entry = options.script or options.module or "run"
    name = options.trace_name or timestamped_name(Path(entry).stem if options.script else entry)
    trace_path = folder / f"{safe_name(name)}.json" if options.trace_name else None
    if trace_path is not None:
        files = [*options.specs, options.script]
        inputs = [item for item in files if isinstance(item, str | Path)]
        refuse_overwriting_inputs(trace_path, inputs)
    probe = make_profiler(options.profiler, Path(os.devnull))
    default_context = probe.marker_context
    if default_context == "torch" and os.environ.get(NVTX_INJECTION_ENV):
        # run under an NVTX tool (`nsys profile ncompass run ...`): show markers there too
        default_context = "torch+nvtx"
    config = load_specs(options.specs, default_context)
    if probe.marker_context == "nvtx":  # torch markers would record nothing: NVTX too
        record_torch_markers_with_nvtx(config)
    if options.full_trace:
        config = config.model_copy(update={"full_trace_mode": True})
    if trace_path is None and options.profiler == "torch":
        trace_path = claim_trace_path(folder, name)
    profiler = make_profiler(
        options.profiler,
        trace_path or Path(os.devnull),
        record_shapes=options.record_shapes,
        profile_memory=options.profile_memory,
        with_stack=options.with_stack,
    )
    written: Path | None = None
    started = time.time()
    clock = time.perf_counter()
    outcome = ScriptOutcome(1)
    monitor: GpuMonitor | None = None
    gpu: GpuTimeline | None = None
    with scoped_environment({PROFILE_ENV: "1", TRACE_DIR_ENV: str(folder), RUNNER_ENV: "1"}):
        forget_captured_markers()
        enable_rewrites(config)
        try:
            profiler.start()
            try:
                if options.gpu_monitor is not None:  # after the profiler's slow start
                    monitor = start_monitor(options.gpu_monitor)
                with _full_trace_range(config):
                    if options.script is not None:
                        outcome = run_script(options.script, list(options.args))
                    else:
                        assert options.module is not None
                        outcome = run_module(options.module, list(options.args))
            finally:
                written = profiler.stop()
                markers = REGISTRY.manifest()
                unplaced = [  # targets skipped for their `requires:` were warned about
                    t for t in REGISTRY.unplaced(config) if not unmet_requirement(t.requires)
                ]
                if monitor is not None:
                    gpu = finish(monitor, written)
        except BaseException as error:
            if isinstance(error, ScriptNotFoundError) and written is not None:
                written.unlink(missing_ok=True)  # `-m` typo: the trace holds nothing
            elif trace_path is not None and written is None and _is_empty(trace_path):
                trace_path.unlink()
            raise
        finally:
            disable_rewrites()
    duration = time.perf_counter() - clock
    sidecar = None
    if written is not None:
        kernels = _compiled_kernels(profiler, markers)
        sidecar = _write_sidecar(
            written, options, config, markers, outcome, started, duration, gpu, kernels
        )
    if outcome.error is not None:  # a crash may have come before the imports: no guessing
        unplaced = []
    return RunResult(outcome.exit_code, written, sidecar, markers, duration, config, gpu, unplaced)


@contextmanager
def _full_trace_range(config: RewriteConfig) -> Iterator[None]:
    if not config.full_trace_mode:
        yield
        return
    from ncompass.runtime.sites import bind

    enter, leave = bind(config.context, FULL_TRACE_MARKER, async_safe=True)
    handle = enter()
    try:
        yield
    finally:
        leave(handle)


def _is_empty(path: Path) -> bool:
    try:
        return path.stat().st_size == 0
    except OSError:
        return False


def _compiled_kernels(profiler: object, markers: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The sidecar's record of the Inductor kernels compiled during the run and their markers."""
    if not isinstance(profiler, TorchProfiler):
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
    markers: list[dict[str, Any]],
    outcome: ScriptOutcome,
    started: float,
    duration: float,
    gpu: GpuTimeline | None,
    compiled_kernels: dict[str, Any] | None,
) -> Path:
    path = sidecar_path(trace)
    command = ["-m", options.module] if options.module else [options.script or ""]
    document = {
        "trace": trace.name,
        "command": [*command, *options.args],
        "python": sys.executable,
        "profiler": options.profiler,
        "exit_code": outcome.exit_code,
        "started_unix_s": started,
        "duration_s": duration,
        "spec": config.to_dict(),
        "markers": markers,
    }
    if compiled_kernels is not None:
        document["compiled_kernels"] = compiled_kernels
    if gpu is not None:
        document["gpu"] = {
            "summaries": [summary.to_dict() for summary in gpu.summaries],
            "low_utilisation": gpu.low_utilisation,
            "counter_events": gpu.counter_events,
        }
    captured = graph_captured_markers()
    if captured:  # they recorded nothing: their code replays as a CUDA graph (docs/compile.md)
        document["cuda_graph_markers"] = captured
    path.write_bytes(orjson.dumps(document, option=orjson.OPT_INDENT_2))
    return path


__all__ = ["RUNNER_ENV", "RunOptions", "RunResult", "load_specs", "run"]
