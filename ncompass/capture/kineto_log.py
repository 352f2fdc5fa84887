"""Kineto's own log lines on stderr (``USDT:... profiler_start``), kept out of what users read.

Kineto, the torch profiler's C++ core, writes a ``USDT:`` line to file descriptor 2 each time a
profiler starts or stops. They say nothing to the user, and an ``ncompass run`` printing them
around the program's own output reads as noise. :func:`quiet_kineto_log` holds what is written
to descriptor 2 while the profiler starts or stops, and writes back every other line;
:func:`is_kineto_log_line` is the same test for output captured from a child process.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator

_PREFIXES = ("USDT:",)


def is_kineto_log_line(line: str | bytes) -> bool:
    """Whether ``line`` is one of Kineto's start/stop log lines."""
    text = line.decode("utf-8", "replace") if isinstance(line, bytes) else line
    return text.startswith(_PREFIXES)


@contextlib.contextmanager
def quiet_kineto_log() -> Iterator[None]:
    """Run the block with descriptor 2 held; then write back all but Kineto's lines.

    Nothing else is lost: other lines written meanwhile (a warning, another thread's output)
    appear when the block ends, in their order. Where descriptor 2 cannot be duplicated (closed),
    the block runs as it is.
    """
    try:
        saved = os.dup(2)
    except OSError:
        yield
        return
    with contextlib.ExitStack() as cleanup:
        cleanup.callback(os.close, saved)
        held = cleanup.enter_context(tempfile.TemporaryFile())
        _flush_stderr()
        os.dup2(held.fileno(), 2)
        try:
            yield
        finally:
            _flush_stderr()
            os.dup2(saved, 2)
            held.seek(0)
            kept = [line for line in held.read().splitlines(True) if not is_kineto_log_line(line)]
            if kept:
                os.write(2, b"".join(kept))


def _flush_stderr() -> None:
    with contextlib.suppress(Exception):  # a replaced or closed sys.stderr
        sys.stderr.flush()


__all__ = ["is_kineto_log_line", "quiet_kineto_log"]
