"""``ncompass monitor [OPTIONS] -- CMD ...``: GPU utilisation while a command runs."""

from __future__ import annotations

import json
import signal
import subprocess
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from types import FrameType

import click

from ncompass.errors import NcompassError
from ncompass.gpu import GpuBackendError, GpuMonitor
from ncompass.gpu._backends import BACKEND_NAMES
from ncompass.gpu._backends.selection import ADVICE
from ncompass.gpu._sample import DeviceSpec

# The start of the error ``auto`` raises when neither NVML nor nvidia-smi works.
_NO_GPU = "no GPU monitoring backend works here"


class MonitoredCommandError(NcompassError):
    """The command to monitor cannot be started."""


@click.command(
    "monitor",
    context_settings={
        "ignore_unknown_options": True,
        "allow_interspersed_args": False,
        "help_option_names": ["-h", "--help"],
    },
)
@click.option(
    "--device",
    default="0",
    show_default=True,
    metavar="N|N,M|all",
    help="GPU index, comma-separated indices, or 'all' (NVML / nvidia-smi numbering).",
)
@click.option(
    "--interval",
    "interval_s",
    type=click.FloatRange(min=0.001),
    default=0.2,
    show_default=True,
    metavar="S",
    help="Sampling period in seconds.",
)
@click.option(
    "--backend",
    type=click.Choice(BACKEND_NAMES),
    default="auto",
    show_default=True,
    help="auto = NVML, else nvidia-smi, else (no GPU) the host CPU. cpu watches the host CPU.",
)
@click.option(
    "--warmup",
    "warmup_s",
    type=click.FloatRange(min=0.0),
    default=0.0,
    metavar="S",
    help="Leave the first S seconds out of the statistics.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON on stdout.")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@click.pass_context
def monitor_command(
    ctx: click.Context,
    device: str,
    interval_s: float,
    backend: str,
    warmup_s: float,
    as_json: bool,
    command: tuple[str, ...],
) -> None:
    """Run CMD and summarise GPU utilisation, memory, power and temperature while it ran
    (on a machine without a GPU: the host CPU utilisation and memory of CMD's process tree).

    CMD's output passes through untouched; the summary goes to stderr (with --json: one JSON
    object on the last line of stdout). The exit code is CMD's (128+N when a signal N killed it).

    \b
    Example:
      ncompass monitor --device all -- python train.py --epochs 1
    """
    devices = _parse_device(device)
    monitor = GpuMonitor(device=devices, interval_s=interval_s, backend=backend, warmup_s=warmup_s)
    try:
        monitor.start()
    except GpuBackendError as error:
        if backend != "auto" or not str(error).startswith(_NO_GPU):
            raise GpuBackendError(_worded_for_the_cli(error), error.attempts) from None
        # No GPU here: the host CPU of the command, as the README promises, said in one line.
        monitor = GpuMonitor(
            device=devices, interval_s=interval_s, backend="cpu", warmup_s=warmup_s
        )
        monitor.start()
        tried = "; ".join(f"{name}: {reason}" for name, reason in error.attempts)
        click.echo(
            f"ncompass monitor: no GPU here ({tried}); watching the host CPU of the command "
            "instead (--backend none runs it without sampling)",
            err=True,
        )
    try:
        exit_code = run_command(command)
    finally:
        monitor.stop()
    if as_json:
        report = {
            "command": list(command),
            "exit_code": exit_code,
            "backend": monitor.backend_used,
            "devices": [summary.to_dict() for summary in monitor.summaries],
        }
        click.echo(json.dumps(report))
    else:
        for summary in monitor.summaries:
            click.echo(summary.format(), err=True)
    ctx.exit(exit_code)


def run_command(command: Sequence[str]) -> int:
    """Runs ``command`` to completion and returns its exit code in shell convention.

    Ctrl-C reaches the command too (same process group), so it is waited for, not abandoned;
    a SIGTERM sent to ncompass is passed on to it.

    Raises:
        MonitoredCommandError: The command does not exist or cannot be executed.
    """
    try:
        process = subprocess.Popen(list(command))
    except FileNotFoundError as error:
        raise MonitoredCommandError(f"command not found: {command[0]}") from error
    except PermissionError as error:
        raise MonitoredCommandError(f"cannot execute {command[0]}: permission denied") from error
    except OSError as error:
        raise MonitoredCommandError(f"cannot run {command[0]}: {error}") from error
    with _forward_sigterm(process):
        while True:
            try:
                return_code = process.wait()
                break
            except KeyboardInterrupt:
                continue
    return 128 - return_code if return_code < 0 else return_code


@contextmanager
def _forward_sigterm(process: subprocess.Popen[bytes]) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be set from the main thread
        return

    def forward(signum: int, frame: FrameType | None) -> None:
        process.send_signal(signum)

    previous = signal.signal(signal.SIGTERM, forward)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _worded_for_the_cli(error: GpuBackendError) -> str:
    text = str(error)
    if not text.endswith(ADVICE):
        return text
    return text.removesuffix(ADVICE) + (
        "Use --backend cpu to watch the host CPU of the command instead, "
        "or --backend none to run it without sampling."
    )


def _parse_device(text: str) -> DeviceSpec:
    if text.strip() == "all":
        return "all"
    try:
        indices = [int(part) for part in text.split(",")]
    except ValueError:
        indices = []
    if not indices or any(index < 0 for index in indices):
        raise click.BadParameter(
            f"{text!r} is not a GPU index, a comma-separated list of indices or 'all'",
            param_hint="'--device'",
        )
    return indices[0] if len(indices) == 1 else indices
