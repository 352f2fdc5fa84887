"""Runs that must start a fresh process: ``--nsys`` and ``--profiler nvtx-trace``.

An NVTX tool attaches when a process makes its first NVTX call, through
``NVTX_INJECTION64_PATH``; it cannot be attached to the process already running
``ncompass run``. So the parent re-executes the same run, ``python -m ncompass run ...`` with
the same specs, script and arguments, in a child that has the tool: ``nsys profile`` starts it,
or the parent sets the recorder's variables. The child runs the script like any run (its
markers are NVTX ranges, its sidecar is written beside the trace-to-be) and reports back
through a small JSON file: the script's exit code, or the ncompass error that stopped it. When
the child has exited, the parent turns what the tool recorded into the Chrome trace.

The script's output goes straight to the terminal, and Ctrl-C reaches the child as usual: the
parent waits for it and still writes what was recorded. A SIGTERM sent to the parent alone (a
scheduler, ``timeout``, Kubernetes) is passed on to the child, which stops as on Ctrl-C; the
parent then writes the trace too and exits 143 (:mod:`ncompass.capture.termination`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import orjson

from ncompass import errors
from ncompass._files import write_atomic
from ncompass.capture.backends.kinds import kind_of
from ncompass.capture.run_options import RunOptions, RunResult, load_specs, run_command
from ncompass.capture.sidecar import update_sidecar
from ncompass.capture.termination import Terminated, program_running
from ncompass.capture.trace_files import (
    claim_trace_path,
    release_claim,
    sidecar_path,
    timestamped_name,
    trace_dir,
)
from ncompass.errors import CaptureError, NcompassError

if TYPE_CHECKING:
    from ncompass.capture.sidecar import SidecarExtras
    from ncompass.importer.registry import MarkerRecord
    from ncompass.spec.models import RewriteConfig, TargetSpec

CHILD_REPORT_OPTION = "--child-report"
"""The hidden ``ncompass run`` option that makes a run the re-executed child."""

CHILD_PROFILER = "nvtx-trace"
"""The child's profiler: markers are NVTX ranges, an attached tool records them."""

USER_ERROR_EXIT_CODE = 2

_ERROR_TYPES: dict[str, type[NcompassError]] = {
    kind.__name__: kind
    for kind in (
        errors.CaptureError,
        errors.ContextError,
        errors.RewriteError,
        errors.SpecError,
        errors.TraceError,
    )
}


class ChildCapture(Protocol):
    """What records the child and turns its recording into a trace.

    Attributes:
        name: The profiler as the sidecar names it (``nsys``, ``nvtx-trace``).
    """

    name: str

    def command(self, child: list[str]) -> list[str]:
        """The command that starts the child (``child`` is ``python -m ncompass run ...``)."""

    def environment(self) -> dict[str, str]:
        """Variables added to the child's environment."""

    def write_trace(self, trace_path: Path) -> str:
        """Write the trace after the child exited; returns a line saying what it holds."""

    def write_window_traces(self, trace_path: Path) -> tuple[str, list[Path]]:
        """With recording windows: write each window's trace instead (a line saying what was
        recorded, and the traces)."""

    def sidecar_extras(self, trace_path: Path | None = None) -> SidecarExtras:
        """Keys added to the run's sidecar (or to the sidecar of a window's trace)."""


def needs_child_process(options: RunOptions) -> bool:
    """Whether ``options`` ask for a tool that only attaches to a fresh process."""
    return not options.reexecuted and kind_of(options.profiler, nsys=options.nsys).fresh_process


def run_in_child(options: RunOptions) -> RunResult:
    """Run ``options`` again in a child process with an NVTX tool attached; write its trace.

    Raises:
        SpecError: A spec file is invalid (checked here, before anything starts).
        ScriptNotFoundError: The script does not exist.
        CaptureError: The tool is missing (``nsys``, a C compiler), or the child could not run.
        NcompassError: Whatever stopped the run in the child (a spec that does not match the
            code, ...), raised again here with the child's message.
    """
    if options.script is not None and not os.path.isfile(options.script):
        from ncompass.importer.script import ScriptNotFoundError  # (libcst: only when needed)

        raise ScriptNotFoundError(
            f"{options.script}: no such script; check the path (or use -m MODULE)"
        )
    config = load_specs(options.specs, kind_of(options.profiler, nsys=options.nsys).marker_context)
    folder = trace_dir(options.output_dir)
    trace_path = _claim(options, folder)
    try:
        return _run_claimed(options, config, folder, trace_path)
    except BaseException:
        release_claim(trace_path)  # a run that wrote no trace leaves nothing behind
        raise


def _run_claimed(
    options: RunOptions, config: RewriteConfig, folder: Path, trace_path: Path
) -> RunResult:
    """:func:`run_in_child` once the trace's name is claimed."""
    with tempfile.TemporaryDirectory(prefix="ncompass-run-") as scratch_dir:
        scratch = Path(scratch_dir)
        capture = _capture(options, trace_path, scratch)
        report_file = scratch / "child.json"
        child = child_command(options, folder, trace_path.stem, report_file, scratch)
        monitor = None
        if options.gpu_monitor is not None:
            from ncompass.capture.gpu_timeline import start_monitor

            monitor = start_monitor(options.gpu_monitor)
        clock = time.perf_counter()
        with program_running():  # the child is the program: signals stop it, not the parent
            returncode = _wait(capture.command(child), {**os.environ, **capture.environment()})
        duration = time.perf_counter() - clock
        outcome = _read_report(report_file)
        if "error" in outcome:
            if monitor is not None:
                monitor.stop()
            raise _error_from_child(outcome)
        exit_code = int(outcome.get("exit_code", returncode))
        if not outcome:
            print(
                f"ncompass: the run ended before it could report (exit code {exit_code}); "
                "writing what was recorded",
                file=sys.stderr,
            )
        if options.recording_windows is not None:  # the tool recorded the windows only
            from ncompass.capture.child_windows import finish_windows

            windows, gpu = finish_windows(capture, trace_path, exit_code, monitor)
            never_imported = outcome.get("unplaced") or []
            unplaced = [t for t in config.targets if _target_key(t) in never_imported]
            result = RunResult(exit_code, None, None, [], duration, config, gpu, unplaced)
            result.window_traces = windows
            result.window_warning = outcome.get("window_warning")
            return result
        note = capture.write_trace(trace_path)
        print(f"ncompass: {note}", file=sys.stderr)
    gpu = None
    if monitor is not None:
        from ncompass.capture.gpu_timeline import finish

        gpu = finish(monitor, trace_path)  # its samples become counter tracks of the trace
    sidecar, markers = _complete_sidecar(trace_path, capture, exit_code)
    never_imported = outcome.get("unplaced") or []
    unplaced = [t for t in config.targets if _target_key(t) in never_imported]
    result = RunResult(exit_code, trace_path, sidecar, markers, duration, config, gpu, unplaced)
    return result


def write_child_report(report_file: Path, result: RunResult) -> None:
    """The child's side: tell the parent how the run ended (exit code, targets never placed)."""
    unplaced = [_target_key(target) for target in result.unplaced]
    report: dict[str, Any] = {"exit_code": result.exit_code, "unplaced": unplaced}
    if result.window_warning is not None:  # a window never opened: the parent says so
        report["window_warning"] = result.window_warning
    _write_json(report_file, report)


def write_child_error(report_file: Path, error: NcompassError) -> None:
    """The child's side: tell the parent which ncompass error stopped the run."""
    _write_json(report_file, {"error": str(error), "error_type": type(error).__name__})


def _target_key(target: TargetSpec) -> list[str]:
    """How the parent finds a target of the child's spec among its own (same spec files)."""
    return [target.label, str(target.spec_path), str(target.line)]


def child_command(
    options: RunOptions, folder: Path, trace_name: str, report_file: Path, scratch: Path
) -> list[str]:
    """``python -m ncompass run ...``: the same run, as the child that an NVTX tool records.

    Args:
        options: The run.
        folder: The trace folder (the child's ``capture_trace`` files go there too).
        trace_name: The name the parent claimed; the child writes the sidecar for it.
        report_file: Where the child reports how the run ended.
        scratch: Where specs given as objects are written for the child to load.
    """
    spec_files = [
        spec if isinstance(spec, (str, Path)) else _spec_file(spec, scratch / f"spec-{index}.json")
        for index, spec in enumerate(options.specs)
    ]
    return run_command(
        spec_files,
        output_dir=folder.resolve(),
        trace_name=trace_name,
        script=options.script,
        module=options.module,
        args=options.args,
        profiler=CHILD_PROFILER,
        full_trace=options.full_trace,
        options=[CHILD_REPORT_OPTION, str(report_file)]
        + ([] if options.follow else ["--no-follow"]),
        recording_windows=options.recording_windows,
    )


def _capture(options: RunOptions, trace_path: Path, scratch: Path) -> ChildCapture:
    windows = options.recording_windows
    if options.nsys:
        from ncompass.capture.nsys_run import NsysCapture

        return NsysCapture.create(trace_path, list(options.nsys_args), windows, scratch)
    from ncompass.capture.backends.nvtx_trace import RecorderCapture

    return RecorderCapture.create(scratch, windows=windows is not None)


def _claim(options: RunOptions, folder: Path) -> Path:
    """The trace path, reserved as the torch profiler's runs reserve theirs."""
    if options.trace_name:
        return claim_trace_path(
            folder, options.trace_name, exact=True, replace=options.force_overwrite
        )
    entry = options.script or options.module or "run"
    return claim_trace_path(folder, timestamped_name(Path(entry).stem if options.script else entry))


def _wait(command: list[str], env: dict[str, str]) -> int:
    """Run the child to its end; its exit code.

    Ctrl-C reaches the child too (the terminal signals the whole group); a SIGTERM may have
    been sent to this process alone, so it is passed on. Either way the child stops, writes
    what it has and reports, and the parent waits for it.
    """
    try:
        process = subprocess.Popen(command, env=env)
    except OSError as error:
        raise CaptureError(f"cannot start {command[0]}: {error}") from None
    while True:
        try:
            returncode = process.wait()
            break
        except Terminated:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        except KeyboardInterrupt:
            continue  # the child got the same signal: let it finish and report
    return 128 - returncode if returncode < 0 else returncode


def _read_report(report_file: Path) -> dict[str, Any]:
    try:
        outcome = orjson.loads(report_file.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}  # the child died before reporting (killed): its exit code tells the rest
    return outcome if isinstance(outcome, dict) else {}


def _error_from_child(outcome: dict[str, Any]) -> NcompassError:
    """The child's error, of the same class when it is one of ncompass' own."""
    kind = _ERROR_TYPES.get(str(outcome.get("error_type")), NcompassError)
    if outcome.get("error_type") == "ScriptNotFoundError":
        from ncompass.importer.script import ScriptNotFoundError

        kind = ScriptNotFoundError
    return kind(str(outcome["error"]))


def _complete_sidecar(
    trace_path: Path, capture: ChildCapture, exit_code: int
) -> tuple[Path | None, list[MarkerRecord]]:
    """Name the real profiler in the sidecar the child wrote; returns it and its markers."""
    changes = {"profiler": capture.name, "exit_code": exit_code, **capture.sidecar_extras()}
    document = update_sidecar(trace_path, changes)
    if document is None:
        return None, []
    markers = document.get("markers")
    return sidecar_path(trace_path), markers if isinstance(markers, list) else []


def _spec_file(config: RewriteConfig, path: Path) -> Path:
    """Write a spec object where the child can load it; relative target files made absolute."""
    document = config.to_dict()
    for target in document.get("targets", []):
        file = target.get("file")
        if file and not os.path.isabs(file):
            target["file"] = os.path.abspath(file)
    _write_json(path, document)
    return path


def _write_json(path: Path, document: dict[str, Any]) -> None:
    write_atomic(path, orjson.dumps(document))  # the parent may read it as the child dies


__all__ = [
    "CHILD_PROFILER",
    "CHILD_REPORT_OPTION",
    "USER_ERROR_EXIT_CODE",
    "ChildCapture",
    "child_command",
    "needs_child_process",
    "run_in_child",
    "write_child_error",
    "write_child_report",
]
