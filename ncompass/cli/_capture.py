"""``ncompass capture PID``: ask a running ``ncompass run --on-demand`` to record now."""

from __future__ import annotations

import click


@click.command("capture")
@click.argument("pid", type=click.IntRange(min=1))
@click.option(
    "--duration",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    metavar="SECONDS",
    help="Record for this long [default: until Ctrl-C].",
)
def capture_command(pid: int, duration: float | None) -> None:
    """Record the run PID (started with --on-demand) now; print the trace's path.

    Each capture writes a trace of its own, numbered: <trace>-w1, <trace>-w2, ...
    """
    from ncompass.capture.control_folder import CaptureRequest

    request = CaptureRequest(pid, duration)
    try:  # from the request on, Ctrl-C means "stop now", never "give up"
        number = request.send()
        until = f"for {duration:g} s" if duration is not None else "until Ctrl-C"
        click.echo(f"ncompass: recording window {number} of run {pid} {until}", err=True)
        trace = request.wait_written()
    except KeyboardInterrupt:
        if not request.sent:
            raise
        request.stop()
        trace = request.wait_written()
    click.echo(str(trace))
