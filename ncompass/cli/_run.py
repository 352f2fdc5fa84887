"""``ncompass run``: run a script or module under rewrites and a profiler."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ncompass.capture.backends.base import PROFILERS
from ncompass.capture.backends.kinds import DEFAULT_PROFILER
from ncompass.capture.child_run import CHILD_REPORT_OPTION
from ncompass.cli._recording_windows import recording_window_options, recording_windows
from ncompass.gpu import DeviceSpec

if TYPE_CHECKING:
    from ncompass.importer.registry import MarkerRecord


@click.command(
    "run",
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@click.option(
    "--config",
    "-c",
    "configs",
    multiple=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Target spec (YAML/JSON); repeat to merge several.",
)
@click.option(
    "--profiler",
    type=click.Choice(PROFILERS),
    default=None,
    help="torch (default): the PyTorch profiler's Chrome trace; nvtx: NVTX ranges for an "
    "attached tool; nvtx-trace: NVTX ranges recorded without Nsight into a Chrome trace; "
    "none: rewrite only.",
)
@click.option(
    "--nsys",
    is_flag=True,
    help="Run under Nsight Systems (nsys profile) and convert its report to a Chrome trace.",
)
@click.option(
    "--nsys-args",
    default="",
    metavar="ARGS",
    help='More options for nsys profile, as one string: --nsys-args "--cuda-memory-usage=true".',
)
@click.option(CHILD_REPORT_OPTION, "child_report", hidden=True, type=click.Path(path_type=Path))
@click.option(
    "--output-dir",
    "-o",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Trace folder [default: $NCOMPASS_TRACE_DIR or ./traces].",
)
@click.option(
    "--trace-name",
    default=None,
    help="Trace file name without .json [default: SCRIPT-TIME]; refused if it exists.",
)
@click.option(
    "--force-overwrite",
    is_flag=True,
    help="Replace the trace (and sidecar) of --trace-name if it exists.",
)
@click.option("--record-shapes", is_flag=True, help="Record tensor shapes (torch profiler).")
@click.option("--profile-memory", is_flag=True, help="Record allocations (torch profiler).")
@click.option("--with-stack", is_flag=True, help="Record Python stacks of ops (torch profiler).")
@click.option("--full-trace", is_flag=True, help="Wrap the whole run in one top-level range.")
@click.option(
    "--gpu-monitor",
    is_flag=True,
    help="Sample GPU utilisation during the run into the trace (host CPU where there is no GPU).",
)
@click.option("--gpu-device", default="0", show_default=True, help="GPU index, N,M or 'all'.")
@click.option("--gpu-interval", type=float, default=0.2, show_default=True, help="Seconds.")
@click.option(
    "--gpu-backend",
    type=click.Choice(["auto", "nvml", "smi", "cpu", "none"]),
    default="auto",
    show_default=True,
)
@recording_window_options
@click.option(
    "--no-follow",
    is_flag=True,
    help="Profile only this process: the Python processes the script starts run untouched.",
)
@click.option("-m", "module", default=None, metavar="MODULE", help="Run a module, like python -m.")
@click.argument("arguments", nargs=-1, type=click.UNPROCESSED)
def run_command(
    configs: tuple[Path, ...],
    profiler: str | None,
    nsys: bool,
    nsys_args: str,
    child_report: Path | None,
    output_dir: Path | None,
    trace_name: str | None,
    force_overwrite: bool,
    record_shapes: bool,
    profile_memory: bool,
    with_stack: bool,
    full_trace: bool,
    gpu_monitor: bool,
    gpu_device: str,
    gpu_interval: float,
    gpu_backend: str,
    window: str | None,
    repeat: int,
    every: int | None,
    delay: float | None,
    duration: float | None,
    on_demand: bool,
    no_follow: bool,
    module: str | None,
    arguments: tuple[str, ...],
) -> None:
    """Run SCRIPT (or -m MODULE) with ARGS under the specs' rewrites and a profiler.

    The exit code is the script's; 143 after a SIGTERM, which stops the script as Ctrl-C
    does (the trace is still written). Example:

        ncompass run --config configs/attn.yaml examples/tiny_transformer.py --steps 3
    """
    from ncompass.capture import termination
    from ncompass.capture.gpu_timeline import GpuMonitorOptions
    from ncompass.capture.run_options import RunOptions

    termination.stop_on_signals()  # SIGTERM stops the script as Ctrl-C does: the trace is written
    termination.end_hold()  # a stop held while the command loaded stops it now

    if nsys and profiler not in (None, "nvtx"):
        raise click.UsageError(
            f"--nsys records with Nsight Systems: leave out --profiler {profiler} "
            "(markers are NVTX ranges)"
        )
    if nsys_args and not nsys:
        raise click.UsageError("--nsys-args needs --nsys")
    windows = recording_windows(
        profiler or DEFAULT_PROFILER, window, repeat, every, delay, duration, on_demand, nsys
    )
    args = list(arguments)
    script: str | None = None
    if module is None:
        if not args:
            raise click.UsageError("give a SCRIPT to run (or -m MODULE)")
        script = args.pop(0)
    options = RunOptions(
        specs=list(configs),
        script=script,
        module=module,
        args=args,
        profiler=profiler or DEFAULT_PROFILER,
        output_dir=output_dir,
        trace_name=trace_name,
        force_overwrite=force_overwrite,
        record_shapes=record_shapes,
        profile_memory=profile_memory,
        with_stack=with_stack,
        full_trace=full_trace,
        gpu_monitor=GpuMonitorOptions(_device(gpu_device), gpu_interval, gpu_backend)
        if gpu_monitor
        else None,
        nsys=nsys,
        nsys_args=_split(nsys_args),
        reexecuted=child_report is not None,
        recording_windows=windows,
        follow=not no_follow,
    )
    if child_report is not None:  # the run --nsys / nvtx-trace started: report back to it
        from ncompass.capture.runner import report_to_parent

        raise SystemExit(termination.exit_code(report_to_parent(options, child_report)))
    from ncompass.capture.child_run import needs_child_process, run_in_child

    if needs_child_process(options):  # the parent of --nsys / nvtx-trace: no rewriting machinery
        result = run_in_child(options)
    else:
        from ncompass.capture.runner import run

        result = run(options)
    sys.stdout.flush()
    if result.gpu is not None:
        click.echo(result.gpu.report(), err=True)
    for target in result.unplaced:
        where = f" ({target.spec_path}:{target.line})" if target.spec_path and target.line else ""
        click.echo(
            f"ncompass: warning: the run never imported target {target.label}{where}, so it "
            "has no markers; check the module name or file path",
            err=True,
        )
    if result.window_warning is not None:
        click.echo(result.window_warning, err=True)
    for trace in result.window_traces:
        click.echo(f"ncompass: window trace written to {trace}", err=True)
    if result.code_profiler:
        click.echo(
            "ncompass: warning: the program ran a torch profiler of its own, so ncompass's "
            "stepped aside and no ncompass trace was written; use the program's own trace, or "
            "run it without its profiler",
            err=True,
        )

    for warning in result.warnings:
        click.echo(f"ncompass: warning: {warning}", err=True)
    if result.trace_path is not None:
        _warn_unrecorded_markers(result.markers, options.profiler, nsys)
        markers = len(result.markers)
        click.echo(
            f"ncompass: trace written to {result.trace_path} ({markers} marker"
            f"{'s' if markers != 1 else ''} placed, {result.duration_s:.2f} s); "
            f"see `ncompass summarize {result.trace_path}`",
            err=True,
        )
    raise SystemExit(termination.exit_code(result.exit_code))


def _warn_unrecorded_markers(markers: list[MarkerRecord], profiler: str, nsys: bool) -> None:
    """Markers that fired into NVTX, which this run's profiler does not record."""
    from ncompass.traces.unrecorded_markers import unrecorded_markers, unrecorded_markers_advice

    found = unrecorded_markers(profiler, markers, nsys=nsys)
    if found is not None:
        click.echo(f"ncompass: warning: {unrecorded_markers_advice(found)}", err=True)


def _split(text: str) -> list[str]:
    """``--nsys-args``: one string, split like a shell would."""
    try:
        return shlex.split(text)
    except ValueError as error:
        raise click.BadParameter(f"{text!r}: {error}", param_hint="--nsys-args") from None


def _device(text: str) -> DeviceSpec:
    """``--gpu-device``: ``0``, ``0,1`` or ``all``."""
    if text == "all":
        return "all"
    try:
        numbers = [int(part) for part in text.split(",")]
    except ValueError:
        raise click.BadParameter(f"{text!r}: use an index, a list like 0,1, or 'all'") from None
    return numbers[0] if len(numbers) == 1 else numbers
