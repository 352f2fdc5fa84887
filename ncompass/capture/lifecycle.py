"""The one profiled-run lifecycle: set the run's environment, start the profiler, open the
whole-run range, run the code, then close the range, stop the profiler (writing the trace) and
collect the markers placed.

``ncompass run`` (:mod:`ncompass.capture.runner`), the child a ``--nsys``/``nvtx-trace`` run
re-executes (the same runner) and :class:`~ncompass.session.session.ProfilingSession` all go
through :func:`profiled`; naming and claiming the trace file is :mod:`ncompass.capture.trace_files`.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from ncompass import environment_variables
from ncompass.capture.environment import scoped_environment
from ncompass.capture.termination import stops_deferred, stops_go_to_the_main_thread
from ncompass.errors import ProfilerTakenOverError
from ncompass.importer.hook import WholeRunRange
from ncompass.importer.registry import REGISTRY, MarkerRecord
from ncompass.spec.models import RewriteConfig

if TYPE_CHECKING:
    from ncompass.capture.backends.base import ProfilerBackend
    from ncompass.capture.recording_windows import RecordingWindows


@dataclass
class ProfiledRun:
    """One run inside :func:`profiled`; ``written`` and ``markers`` are set when it ends.

    Attributes:
        whole_run: The ``ncompass.full_trace`` range (full-trace mode), closable early.
        yielded: The profiled code started a torch profiler of its own, and ours stepped aside
            (see :func:`profiled`'s ``yield_to_code_profiler``).
        written: The trace the profiler wrote (None: nothing written here).
        markers: The markers placed during the run (the registry's manifest).
    """

    whole_run: WholeRunRange
    yielded: bool = False
    written: Path | None = None
    markers: list[MarkerRecord] = field(default_factory=list)


@contextmanager
def profiled(
    profiler: ProfilerBackend,
    config: RewriteConfig,
    trace_folder: Path,
    *,
    runner: bool = False,
    yield_to_code_profiler: bool = False,
    on_start: Callable[[], object] | None = None,
    windows: RecordingWindows | None = None,
) -> Iterator[ProfiledRun]:
    """Profile the block: the run's environment, the profiler and the whole-run range.

    On the way out, however the block ends, the range closes and the profiler stops (writing
    its trace); the markers placed are collected either way.

    Args:
        profiler: The backend to start and stop.
        config: The spec in force (its ``full_trace_mode`` and ``context``).
        trace_folder: Where ``capture_trace`` calls inside the block write their traces.
        runner: The block runs a whole script for ``ncompass run`` (set ``NCOMPASS_RUNNER``).
        yield_to_code_profiler: When the code starts a torch profiler of its own, ours stops
            first (Kineto allows one profiler) and writes nothing; a stop that fails because
            the code's profiler ended ours is not an error (any other failure to write the
            trace is).
        on_start: Called once the profiler has started, before the whole-run range opens
            (what should not slow the profiler's start, such as the GPU monitor).
        windows: Record only these recording windows: their trigger starts a profiler per
            span instead of ``profiler`` recording the whole block (``written`` stays None).
    """
    environment = {
        environment_variables.NCOMPASS_PROFILE: "1",
        environment_variables.NCOMPASS_TRACE_DIR: str(trace_folder),
    }
    if runner:
        environment[environment_variables.NCOMPASS_RUNNER] = "1"
    with scoped_environment(environment):
        # a stop while the profiler starts waits until it has started, then stops it unwritten
        with (
            stops_deferred(abandon=lambda: _abandon(profiler, windows)),
            stops_go_to_the_main_thread(),  # the threads these start never take SIGTERM
        ):
            if windows is None or windows.marks_only:
                profiler.start()
            if windows is not None:
                windows.begin()
            if on_start is not None:
                on_start()
        run = ProfiledRun(WholeRunRange(config.context, enabled=config.full_trace_mode))

        def write_before_hard_exit() -> Path | None:
            run.whole_run.close()
            written = run.written = profiler.stop()
            return written

        hard_exit = (
            trace_written_on_hard_exit(write_before_hard_exit, lambda: run.yielded)
            if runner and windows is None
            else contextlib.nullcontext()
        )
        try:
            if yield_to_code_profiler:

                def step_aside() -> None:
                    run.yielded = True
                    run.whole_run.close()

                with hard_exit, profiler.room_for_code_profiler(before_stepping_aside=step_aside):
                    yield run
            else:
                with hard_exit:
                    yield run
        finally:
            run.whole_run.close()
            try:
                try:
                    if windows is not None:
                        windows.end()
                finally:
                    stopped = run.written is not None  # by an os._exit, already
                    if (windows is None or windows.marks_only) and not run.yielded and not stopped:
                        # only the code's profiler ending ours is no failure: a trace that
                        # cannot be written (a full disk) is reported, whoever profiles
                        suppressed = (ProfilerTakenOverError,) if yield_to_code_profiler else ()
                        with contextlib.suppress(*suppressed):
                            run.written = profiler.stop()
            finally:
                run.markers = REGISTRY.manifest()


@contextmanager
def trace_written_on_hard_exit(
    write: Callable[[], Path | None], yielded: Callable[[], bool]
) -> Iterator[None]:
    """While the block runs, an ``os._exit`` in this process first writes the trace so far.

    ``os._exit`` ends the process at once, with no ``finally`` and no ``atexit``: without
    this, the run would end with no trace and no word. Only the main thread can stop the
    torch profiler (it is thread-local) and only this process holds it: a forked child's
    ``os._exit``, or another thread's, exits as it would have (with a warning in the
    latter case).
    """
    original = os._exit
    owner = os.getpid()

    def exit_after_writing(status: int) -> NoReturn:
        if os.getpid() == owner and not yielded():
            _write_or_warn(write, status)
        original(status)

    os._exit = exit_after_writing
    try:
        yield
    finally:
        if os._exit is exit_after_writing:  # not replaced again meanwhile: put it back
            os._exit = original


def _write_or_warn(write: Callable[[], Path | None], code: int) -> None:
    what = f"the program called os._exit({code})"
    if threading.current_thread() is not threading.main_thread():
        _say(f"warning: {what} from a thread other than the main one; no trace was written")
        return
    try:
        written = write()
    except BaseException as error:  # the process ends next: say why, never raise
        _say(f"warning: {what} and no trace could be written: {error}")
        return
    if written is not None:
        _say(f"warning: {what}; the trace so far was written to {written}, without its sidecar")


def _say(line: str) -> None:
    with contextlib.suppress(Exception):  # a closed stderr: nothing to say it with
        sys.stderr.flush()
        os.write(2, f"ncompass: {line}\n".encode())


def _abandon(profiler: ProfilerBackend, windows: RecordingWindows | None) -> None:
    """Stop what :func:`profiled` started, writing nothing: the run stopped before its program."""
    try:
        if windows is not None:
            windows.end()
    finally:
        if windows is None or windows.marks_only:
            profiler.stop_and_discard()


__all__ = ["ProfiledRun", "profiled", "trace_written_on_hard_exit"]
