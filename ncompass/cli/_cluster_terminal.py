"""What ``ncompass submit`` and ``ncompass jobs`` share: their common options, and the reporter
that prints on the terminal."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ncompass.remote.fetch import ChunkProgress

ADDRESS = click.option(
    "--address",
    metavar="URL",
    default=None,
    help="The cluster's dashboard, http://HEAD:8265 [default: $RAY_ADDRESS, else the "
    "address saved by `ncompass jobs connect`].",
)
OUTPUT_DIR = click.option(
    "--output-dir",
    "-o",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Local trace folder; the job's traces go to DIR/JOB_ID/ [default: $NCOMPASS_TRACE_DIR "
    "or ./traces].",
)
TOP = click.option(
    "--top", type=click.IntRange(min=1), default=10, show_default=True, help="Rows per summary."
)


class TerminalReporter:
    """Job output on stdout; ncompass's lines, and fetch progress on a terminal, on stderr."""

    def __init__(self) -> None:
        self._progress_shown = False
        self._chunks = 0
        self._bytes = 0

    def status(self, message: str) -> None:
        self._end_progress()
        click.echo(message, err=True)

    def output(self, text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()

    def progress(self, event: ChunkProgress) -> None:
        self._chunks += 1
        self._bytes += event.size
        if sys.stderr.isatty():
            from ncompass._format import format_size

            click.echo(
                f"\rncompass: fetching {event.path} chunk {event.index + 1}/{event.chunks} "
                f"({format_size(self._bytes)} so far)\033[K",
                err=True,
                nl=False,
            )
            self._progress_shown = True

    def _end_progress(self) -> None:
        if self._progress_shown:
            click.echo("", err=True)
            self._progress_shown = False


__all__ = ["ADDRESS", "OUTPUT_DIR", "TOP", "TerminalReporter"]
