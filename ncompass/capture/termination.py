"""How ``ncompass run`` ends when it is told to stop: SIGTERM and Ctrl-C.

Schedulers, ``timeout``, Kubernetes and ``ray job stop`` end a process with SIGTERM, whose
default action kills Python at once: the trace being recorded is lost. Under
:func:`stop_on_signals`, SIGTERM instead raises :class:`Terminated`, a ``KeyboardInterrupt``,
so the program unwinds exactly as it does on Ctrl-C and the run writes its trace and sidecar;
the process then exits with 143 (128 + SIGTERM), as a killed process would.

Only the first stop signal (Ctrl-C's SIGINT or SIGTERM) counts. Stops come more than once: a
signal sent to a process group and the same one passed on by a parent (``--nsys``,
``nvtx-trace``), or ``ray job stop``'s SIGTERM followed by the launcher's SIGINT, arrive
together, and a second ``KeyboardInterrupt`` raised while the trace is being written would
lose it. So after the first, both are ignored by the system itself (``SIG_IGN``, which also
holds while Python shuts down and C exit handlers such as the NVTX recorder's write their
output); SIGKILL (or Ctrl-\\) still ends the process at once. What the first one does depends
on where the run is:

- before the program starts: it stops the run at once (nothing is left behind: see the
  runner's clean-up); the command line says so in one line, exit code 130 (a Ctrl-C is
  :class:`Interrupted` then) or 143. Two short moments hold it until they end: while the
  command loads (``stop_on_signals(hold=True)``, where click would answer "Aborted!"), and
  while the profiler starts (:func:`stops_deferred`), where a ``KeyboardInterrupt`` raised
  half-way through Kineto's start-up left a session behind that crashed the process as it
  exited (exit 139); the profiler is then stopped unwritten and the run ends;
- while the program runs (:func:`program_running`): Ctrl-C raises ``KeyboardInterrupt`` as
  usual, SIGTERM raises :class:`Terminated`;
- once the program has ended, while the trace and sidecar are written: it waits, and the exit
  code still says it came (:func:`exit_code`). The program's own SIGCHLD handler is put aside
  then too: the same group-wide stop ends its worker processes, and a handler that raises as
  each exits (torch's ``DataLoader``) aborted the trace's writing.

Standard library only: the rank of a remote job (:mod:`ncompass.remote.rank`) installs the
same handling before anything else.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

TERMINATED_EXIT_CODE = 128 + signal.SIGTERM
INTERRUPTED_EXIT_CODE = 128 + signal.SIGINT


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived: the run stops as on Ctrl-C, writes what it has, and exits 143."""

    exit_code = TERMINATED_EXIT_CODE

    def __str__(self) -> str:
        return "stopped by SIGTERM"


class Interrupted(KeyboardInterrupt):
    """Ctrl-C before the program started: the run stops and exits 130.

    A subclass, because Python ends a process by SIGINT, whatever its exit code, once a bare
    ``KeyboardInterrupt`` has come out of code run by ``exec`` (a dataclass being made while
    a module imports), even though it was caught.
    """

    exit_code = INTERRUPTED_EXIT_CODE


class _State:
    """Where the run is, as the handlers see it (one run per process)."""

    phase = "starting"  # starting -> running -> finishing
    stopping = False  # the first stop signal came
    terminated = False  # the first stop signal was SIGTERM
    deferred_interrupt = False  # the first was a Ctrl-C that came while the results were written
    deferring = 0  # inside stops_deferred (nested sections count) or the command line's hold
    holding = False  # stop_on_signals(hold=True): held until the profiler has started
    held = False  # a stop came while deferring; raised when that ends


def _on_stop(signum: int, frame: FrameType | None) -> None:
    """The first SIGINT or SIGTERM: the run ends; any later one is ignored (module docstring)."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _State.stopping = True
    _State.terminated = signum == signal.SIGTERM
    if _State.phase == "finishing":
        _State.deferred_interrupt = not _State.terminated
        return
    if _State.deferring:
        _State.held = True
        return
    raise _stop()


def _stop() -> KeyboardInterrupt:
    if _State.terminated:
        return Terminated()
    # in the program, Ctrl-C is Python's own KeyboardInterrupt (its traceback says so)
    return KeyboardInterrupt() if _State.phase == "running" else Interrupted()


def stop_on_signals(*, hold: bool = False) -> None:
    """Install the handling described in the module docstring (main thread only; idempotent).

    Also unblocks SIGINT and SIGTERM: a process started with them blocked (Ray's job
    supervisor blocks SIGINT, and the mask is inherited) would never see them.

    Args:
        hold: Hold a stop until :func:`end_hold`. The command line installs the handling
            before it loads its command and parses its arguments (quick, and never waiting),
            where a ``KeyboardInterrupt`` would end in click's "Aborted!" and exit 1.
    """
    if threading.current_thread() is not threading.main_thread():
        return  # signals are delivered to the main thread only; nothing to install
    if hold and not _State.holding:
        _State.holding = True
        _State.deferring += 1
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    if _State.stopping:
        return  # installed before (a rank's entry point), and the first signal came: ignored
    signal.signal(signal.SIGTERM, _on_stop)
    signal.signal(signal.SIGINT, _on_stop)


def end_hold() -> None:
    """End the hold ``stop_on_signals(hold=True)`` began; raise a stop that came meanwhile."""
    _end_holding()
    if _State.held and not _State.deferring:
        _State.held = False
        raise _stop()


def _end_holding() -> None:
    if _State.holding:
        _State.holding = False
        _State.deferring -= 1


@contextmanager
def stops_deferred(abandon: Callable[[], object] | None = None) -> Iterator[None]:
    """A stop that comes in the block (a profiler starting) is held until the block ends.

    Then, if one came, ``abandon`` runs (it undoes what the block did, such as stopping the
    profiler it started; later stops are ignored by then) and the stop is raised, as if it
    had come just after the block. A block that raises raises as it would.
    """
    _State.deferring += 1
    try:
        yield
    finally:
        _State.deferring -= 1
    if _State.deferring > _State.holding or not _State.held or _State.phase != "starting":
        return  # an inner section (the outermost one answers), or no stop came
    _State.held = False
    try:
        if abandon is not None:
            abandon()
    finally:
        raise _stop()  # the stop wins over a failure to abandon


@contextmanager
def program_running() -> Iterator[None]:
    """The block is the profiled program (or the child that runs it): signals stop it.

    When the block ends, however it ends, the run moves on to writing its results, which
    signals no longer interrupt. A stop that came before the block raises on entry.
    """
    _end_holding()
    if _State.stopping:
        _State.held = False
        raise _stop()
    _State.phase = "running"
    try:
        yield
    finally:
        _State.phase = "finishing"
        _quiet_child_exits()


def _quiet_child_exits() -> None:
    """The program has ended: its SIGCHLD handler no longer runs (module docstring).

    A stop sent to the whole process group (``timeout``, a terminal, a job scheduler) ends the
    program's worker processes too; as each exits, the handler a torch ``DataLoader``
    installs raises "DataLoader worker ... is killed by signal" on the main thread, in the
    middle of writing the trace. No result waits for a child's exit: the default (nothing)
    is restored.
    """
    if not hasattr(signal, "SIGCHLD") or threading.current_thread() is not threading.main_thread():
        return
    if callable(signal.getsignal(signal.SIGCHLD)):
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)


@contextmanager
def stops_go_to_the_main_thread() -> Iterator[None]:
    """Threads started in the block (a profiler's, a sampler's) never take SIGINT or SIGTERM.

    The kernel hands a process's signal to any thread that does not block it. Python runs the
    handler in the main thread, but only once the main thread runs again: a program waiting in
    ``time.sleep`` or a blocking read would not see a SIGTERM that a profiler thread took until
    its wait ended (a rank told to stop kept sleeping). Threads inherit the signal mask of the
    thread that starts them, so the main thread blocks both while it starts them; a signal that
    comes meanwhile waits and is delivered when the block ends.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def program_started() -> bool:
    """Whether the profiled program began (its first line may have run)."""
    return _State.phase != "starting"


def terminated() -> bool:
    """Whether a SIGTERM arrived (under :func:`stop_on_signals`)."""
    return _State.terminated


def exit_code(code: int) -> int:
    """The process's exit code for a run whose program ended with ``code``.

    143 once a SIGTERM stopped the run (the trace was written first), 130 for a Ctrl-C held
    back while the results were written of a program that succeeded; ``code`` otherwise.
    """
    if _State.terminated:
        return TERMINATED_EXIT_CODE
    if _State.deferred_interrupt and code == 0:
        return INTERRUPTED_EXIT_CODE
    return code


def interrupted_exit_code(interrupt: KeyboardInterrupt) -> int:
    """The exit code of a command stopped by ``interrupt`` (130 for Ctrl-C, 143 for SIGTERM)."""
    return TERMINATED_EXIT_CODE if isinstance(interrupt, Terminated) else INTERRUPTED_EXIT_CODE


__all__ = [
    "INTERRUPTED_EXIT_CODE",
    "TERMINATED_EXIT_CODE",
    "Interrupted",
    "Terminated",
    "end_hold",
    "exit_code",
    "interrupted_exit_code",
    "program_running",
    "program_started",
    "stop_on_signals",
    "stops_deferred",
    "stops_go_to_the_main_thread",
    "terminated",
]
