"""The one exception (and warning) hierarchy of ncompass.

Every error a user can cause (a wrong spec, a missing file, a corrupt trace, a service that is
down) is an :class:`NcompassError` whose message names the file (and line) and says what to do.
The CLI prints that message and exits with code 2; tracebacks only appear with ``--debug``.
"""

from __future__ import annotations

from pathlib import Path


class NcompassError(Exception):
    """Base class of every error ncompass raises on purpose."""


class SpecError(NcompassError):
    """A target spec is malformed or does not match the code it targets.

    Args:
        message: What is wrong and what to do about it.
        path: The spec file, when the spec came from a file.
        line: The 1-based line in that file the problem is on, when known.
    """

    def __init__(self, message: str, path: str | Path | None = None, line: int | None = None):
        self.path = str(path) if path is not None else None
        self.line = line
        self.detail = message
        super().__init__(self._render())

    def _render(self) -> str:
        if self.path is None:
            return self.detail
        where = self.path if self.line is None else f"{self.path}:{self.line}"
        return f"{where}: {self.detail}"


class RewriteError(NcompassError):
    """A target module cannot be rewritten as the spec asks (it would change its meaning)."""


class ContextError(NcompassError):
    """A range context named in a spec cannot be loaded or used."""


class CaptureError(NcompassError):
    """A profiler cannot be started, stopped or its trace written.

    Attributes:
        exit_code: The script's own exit code when it had failed before its trace could not be
            written: the CLI exits with it rather than 2, so the script's failure is not hidden.
    """

    exit_code: int | None = None


class ProfilerTakenOverError(CaptureError):
    """The profiled code's own profiler ended ncompass's: no ncompass trace, and no failure."""


class TraceError(NcompassError):
    """A trace file is missing, truncated, corrupt or not a Chrome/Kineto trace."""


class NcompassWarning(UserWarning):
    """Base class of every warning ncompass issues: filter them all with this one class."""


__all__ = [
    "CaptureError",
    "ContextError",
    "NcompassError",
    "NcompassWarning",
    "ProfilerTakenOverError",
    "RewriteError",
    "SpecError",
    "TraceError",
]
