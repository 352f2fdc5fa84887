"""What each ``--profiler`` value can do, said once.

Callers ask a :class:`BackendKind` instead of comparing the profiler's name: a new backend is
one entry here and one module beside this file. The booleans are also what the follow settings
carry into followed processes, whose stdlib-only bootstrap reads capabilities, never names.
"""

from __future__ import annotations

from dataclasses import dataclass

from ncompass.errors import CaptureError


@dataclass(frozen=True)
class BackendKind:
    """One ``--profiler`` value's capabilities.

    Attributes:
        name: The ``--profiler`` value (``nsys`` for ``--nsys``).
        marker_context: The range context whose markers this profiler records; specs that do
            not choose a context get this one.
        fresh_process: The run is re-executed in a child process the tool attaches to (the
            NVTX recorder, nsys); the parent writes the trace from the child's recording.
        records_windows: ``--window``/``--delay``/``--on-demand`` work with it.
        window_is_profiler: A window is a profiler of its own, started and stopped around it
            (torch); otherwise a window is an NVTX range (and a recorder gate) inside the run's
            one recording.
        cuts_window_traces: The parent cuts ``-wN`` traces from the tool's recording after the
            run (nvtx-trace, nsys); with ``window_is_profiler`` each window writes its own.
        per_process_traces: Every followed process writes a trace of its own, merged after the
            run (torch); otherwise the tool records every process in one recording, or nothing.
        followed_windows: Every followed process opens and closes the run's windows itself.
        gates_recorder: Windows open and close the NVTX recorder's gate (``nvtx-trace``).
        writes_trace: The run's own process writes the whole-run trace (torch): its path is
            claimed before the run starts.
        records_ops: The trace holds the program's ops and Python calls, with the compiled
            kernels attributed to their markers (torch): what a discovery run reads.
    """

    name: str
    marker_context: str
    fresh_process: bool = False
    records_windows: bool = True
    window_is_profiler: bool = False
    cuts_window_traces: bool = False
    per_process_traces: bool = False
    followed_windows: bool = False
    gates_recorder: bool = False
    writes_trace: bool = False
    records_ops: bool = False

    @property
    def writes_window_traces(self) -> bool:
        """Each window ends as a ``-wN`` trace (cut after the run or written by the window)."""
        return self.window_is_profiler or self.cuts_window_traces


KINDS: dict[str, BackendKind] = {
    kind.name: kind
    for kind in (
        BackendKind(
            "torch",
            "torch",
            window_is_profiler=True,
            per_process_traces=True,
            followed_windows=True,
            writes_trace=True,
            records_ops=True,
        ),
        BackendKind("nvtx", "nvtx"),
        BackendKind(
            "nvtx-trace",
            "nvtx",
            fresh_process=True,
            cuts_window_traces=True,
            followed_windows=True,
            gates_recorder=True,
        ),
        BackendKind("nsys", "nvtx", fresh_process=True, cuts_window_traces=True),
        BackendKind("none", "torch", records_windows=False),
    )
}
"""Every backend kind by name; ``PROFILERS`` are the ones ``--profiler`` takes."""

PROFILERS = ("torch", "nvtx", "nvtx-trace", "none")

DEFAULT_PROFILER = "torch"
"""What ``--profiler`` is when it is not given."""

WINDOW_PROFILERS = tuple(name for name in PROFILERS if KINDS[name].records_windows)
"""The ``--profiler`` values that record windows (``--window``, ``--delay``, ``--on-demand``)."""


def kind_of(profiler: str, *, nsys: bool = False) -> BackendKind:
    """The kind of ``--profiler profiler`` (``--nsys`` makes it nsys's).

    Raises:
        CaptureError: unknown profiler name.
    """
    kind = KINDS.get("nsys" if nsys else profiler)
    if kind is None:
        raise CaptureError(f"unknown profiler {profiler!r}; choose one of {', '.join(PROFILERS)}")
    return kind


__all__ = ["DEFAULT_PROFILER", "KINDS", "PROFILERS", "WINDOW_PROFILERS", "BackendKind", "kind_of"]
