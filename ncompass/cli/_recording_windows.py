"""The options of ``ncompass run`` (and ``session run``) that choose recording windows."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from ncompass.capture.triggers import RecordingWindowOptions

_Command = TypeVar("_Command", bound=Callable[..., Any])

_OPTIONS = (
    click.option(
        "--window",
        default=None,
        metavar="MARKER:FIRST:COUNT",
        help="Record only calls FIRST to FIRST+COUNT-1 of the marker MARKER (counted per "
        "process from 1) and everything between them.",
    ),
    click.option(
        "--repeat",
        type=click.IntRange(min=1),
        default=1,
        show_default=True,
        help="With --window: this many windows, one trace each (-w1, -w2, ...).",
    ),
    click.option(
        "--every",
        type=click.IntRange(min=1),
        default=None,
        metavar="K",
        help="With --repeat: windows start K calls of the marker apart.",
    ),
    click.option(
        "--delay",
        type=click.FloatRange(min=0),
        default=None,
        metavar="SECONDS",
        help="Start recording this long after the program starts (like nsys).",
    ),
    click.option(
        "--duration",
        type=click.FloatRange(min=0, min_open=True),
        default=None,
        metavar="SECONDS",
        help="Record for this long (with --delay; alone: from the start).",
    ),
    click.option(
        "--on-demand",
        is_flag=True,
        help="Record nothing until `ncompass capture PID` asks (PID is printed at start).",
    ),
)


def recording_window_options(command: _Command) -> _Command:
    """Adds ``--window``, ``--repeat``, ``--every``, ``--delay``, ``--duration`` and
    ``--on-demand`` to a click command."""
    for option in reversed(_OPTIONS):
        command = option(command)
    return command


def recording_windows(
    profiler: str,
    window: str | None,
    repeat: int,
    every: int | None,
    delay: float | None,
    duration: float | None,
    on_demand: bool,
    nsys: bool = False,
) -> RecordingWindowOptions | None:
    """The windows the options ask for (None: record the whole run).

    Raises:
        click.UsageError: malformed, contradictory, or with a profiler that records nothing.
    """
    from ncompass.capture.backends.kinds import WINDOW_PROFILERS, kind_of
    from ncompass.capture.triggers import RecordingWindowOptions, parse_window
    from ncompass.errors import CaptureError

    ways = [
        name
        for name, given in (
            ("--window", window is not None),
            ("--delay/--duration", delay is not None or duration is not None),
            ("--on-demand", on_demand),
        )
        if given
    ]
    if (repeat != 1 or every is not None) and window is None:
        raise click.UsageError("--repeat and --every go with --window MARKER:FIRST:COUNT")
    if not ways:
        return None
    if len(ways) > 1:
        raise click.UsageError(f"choose one way of choosing windows, not {' and '.join(ways)}")
    try:
        kind = kind_of(profiler, nsys=nsys)  # --nsys: nsys' capture ranges
    except CaptureError as error:
        raise click.UsageError(str(error)) from None
    if not kind.records_windows:
        raise click.UsageError(
            f"{ways[0]} chooses what to record, but --profiler {profiler} records nothing; "
            f"use --profiler {' or '.join(WINDOW_PROFILERS)}"
        )
    if window is None:
        return RecordingWindowOptions(delay=delay, duration=duration, on_demand=on_demand)
    try:
        marker, first, count = parse_window(window)
    except CaptureError as error:
        raise click.UsageError(str(error)) from None
    if repeat > 1 and every is None:
        raise click.UsageError("--repeat needs --every K: how many calls apart windows start")
    if every is not None and every < count:
        raise click.UsageError(
            f"--every {every} is less than the window's COUNT {count}: windows would overlap"
        )
    return RecordingWindowOptions(marker, first, count, repeat, every)
