"""A low-overhead Python stack sampler for the session's discovery run.

A daemon thread wakes every ``interval_s``, reads the frames of the watched thread with
``sys._current_frames()`` and records the stack (file, line, function of every frame) with the
wall time it stood for. Torch ops release the GIL, so a sample taken while the model computes
sees the statement that called the op; a pure-Python stretch is sampled at the next GIL switch.
Each sample is weighted by the time since the previous one, so a late sample still counts for
the time it covers: the watched thread's CPU time, capped at the wall time, so a stretch where
the machine ran someone else's work (a loaded machine preempts the process) does not count for
the line that happened to be running, nor does a ``sleep``, nor a parent waiting for its
workers (``join()``, a queue's ``get()``) while the process's other threads (the profiler's,
this sampler's) run; where a thread's CPU clock cannot be read, the process's CPU time stands
in. Timestamps are Unix microseconds, the clock Kineto traces use (``ts`` plus
``baseTimeNanoseconds``). A stack read while the watched thread moved on (the sampler lost the
GIL half-way through reading it) is dropped: its frames would be of two moments.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

import orjson

STACKS_SUFFIX = ".stacks.json"
DEFAULT_INTERVAL_S = 0.005


@dataclass(frozen=True)
class Frame:
    """One Python frame of a sampled stack.

    Attributes:
        file: The code's file (``co_filename``).
        line: The line executing when the sample was taken.
        qualname: The code's qualified name (``Class.method``, ``outer.<locals>.inner``).
        first_line: The code's first line (``co_firstlineno``).
        module: ``__name__`` of the frame's globals (``__main__`` for the script).
    """

    file: str
    line: int
    qualname: str
    first_line: int
    module: str


@dataclass
class StackSamples:
    """What a sampler recorded: interned frames and, per sample, its time and stack.

    Attributes:
        frames: Every distinct frame seen.
        stacks: Per sample: frame indices, outermost first.
        times_us: Per sample: Unix time in microseconds.
        weights_us: Per sample: the time it stands for (CPU time, at most the wall time).
        interval_s: The sampling period asked for.
        pids: Per sample: the process it was taken in (empty: all in the run's own process).
        processes: The processes sampled besides the run's own: pid -> role (``SpawnProcess-1``,
            ``DataLoader worker 0``, ``rank 1``).
        root_pid: The run's own process (None: samples of one process only).
    """

    frames: list[Frame] = field(default_factory=list)
    stacks: list[list[int]] = field(default_factory=list)
    times_us: list[float] = field(default_factory=list)
    weights_us: list[float] = field(default_factory=list)
    interval_s: float = DEFAULT_INTERVAL_S
    pids: list[int] = field(default_factory=list)
    processes: dict[int, str] = field(default_factory=dict)
    root_pid: int | None = None

    def pid_of(self, sample: int) -> int | None:
        """The process sample number ``sample`` was taken in (None: the run's own)."""
        return self.pids[sample] if self.pids else self.root_pid

    def role_of(self, pid: int | None) -> str | None:
        """How a process is named, when it is not the run's own (None for the run's own)."""
        if pid is None or pid == self.root_pid:
            return None
        return self.processes.get(pid, f"pid {pid}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {
            "interval_s": self.interval_s,
            "frames": [[f.file, f.line, f.qualname, f.first_line, f.module] for f in self.frames],
            "stacks": self.stacks,
            "times_us": self.times_us,
            "weights_us": self.weights_us,
            "pids": self.pids,
            "processes": {str(pid): role for pid, role in self.processes.items()},
            "root_pid": self.root_pid,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StackSamples:
        """The inverse of :meth:`to_dict`."""
        return cls(
            frames=[
                Frame(str(f[0]), int(f[1]), str(f[2]), int(f[3]), str(f[4])) for f in data["frames"]
            ],
            stacks=[list(map(int, s)) for s in data["stacks"]],
            times_us=[float(t) for t in data["times_us"]],
            weights_us=[float(w) for w in data["weights_us"]],
            interval_s=float(data.get("interval_s", DEFAULT_INTERVAL_S)),
            pids=[int(p) for p in data.get("pids") or []],
            processes={int(pid): str(role) for pid, role in (data.get("processes") or {}).items()},
            root_pid=int(data["root_pid"]) if data.get("root_pid") is not None else None,
        )

    def write(self, path: Path) -> Path:
        """Write the samples as JSON; returns ``path``."""
        path.write_bytes(orjson.dumps(self.to_dict()))
        return path

    @classmethod
    def read(cls, path: Path) -> StackSamples:
        """Samples written by :meth:`write`."""
        return cls.from_dict(orjson.loads(path.read_bytes()))


def stacks_path(trace: Path) -> Path:
    """Where the samples of a trace's run are kept: beside it, ``NAME.stacks.json``."""
    name = trace.name.removesuffix(".gz").removesuffix(".json")
    return trace.with_name(name + STACKS_SUFFIX)


class StackSampler:
    """Samples one thread's Python stack on a background thread.

    Args:
        thread_id: The thread to watch (default: the thread that creates the sampler).
        interval_s: Sampling period.
    """

    def __init__(self, thread_id: int | None = None, interval_s: float = DEFAULT_INTERVAL_S):
        self.thread_id = thread_id if thread_id is not None else threading.get_ident()
        self.samples = StackSamples(interval_s=interval_s)
        # by identity: equal code objects of two files (the same helper copied) are not one
        self._frame_ids: dict[tuple[int, int], int] = {}
        self._codes: list[CodeType] = []  # kept alive, so their ids are never reused
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="ncompass-sampler", daemon=True)

    def start(self) -> None:
        """Start sampling."""
        self._thread.start()

    def stop(self) -> StackSamples:
        """Stop sampling and return what was recorded."""
        self._stop.set()
        self._thread.join()
        return self.samples

    def _loop(self) -> None:
        interval = self.samples.interval_s
        cpu_time = _cpu_clock(self.thread_id)
        last, last_cpu = time.time(), cpu_time()
        while not self._stop.wait(interval):
            frame = sys._current_frames().get(self.thread_id)
            try:
                now, cpu = time.time(), cpu_time()
            except OSError:  # the watched thread has ended
                return
            if frame is None:
                last, last_cpu = now, cpu
                continue
            line = frame.f_lineno
            stack = self._stack(frame)
            if sys._current_frames().get(self.thread_id) is not frame or frame.f_lineno != line:
                # The watched thread ran while the stack was read (this thread lost the GIL
                # half-way, as it can on a loaded machine): the frames read are of two moments
                # and may show a call that never happened. The next sample takes the time.
                continue
            self.samples.stacks.append(stack)
            self.samples.times_us.append(now * 1e6)
            self.samples.weights_us.append(min(now - last, cpu - last_cpu) * 1e6)
            last, last_cpu = now, cpu

    def _stack(self, frame: FrameType | None) -> list[int]:
        stack: list[int] = []
        while frame is not None:
            code = frame.f_code
            line = frame.f_lineno or code.co_firstlineno
            key = (id(code), line)
            index = self._frame_ids.get(key)
            if index is None:
                self._codes.append(code)
                index = len(self.samples.frames)
                module = frame.f_globals.get("__name__")
                self.samples.frames.append(
                    Frame(
                        code.co_filename,
                        line,
                        getattr(code, "co_qualname", code.co_name),
                        code.co_firstlineno,
                        module if isinstance(module, str) else "",
                    )
                )
                self._frame_ids[key] = index
            stack.append(index)
            frame = frame.f_back
        stack.reverse()
        return stack


def _cpu_clock(thread_id: int) -> Callable[[], float]:
    """The CPU time of one thread (its POSIX CPU clock), else of the whole process."""
    try:
        clock = time.pthread_getcpuclockid(thread_id)
        time.clock_gettime(clock)
    except (AttributeError, OSError, OverflowError):
        return time.process_time
    return lambda: time.clock_gettime(clock)


__all__ = ["STACKS_SUFFIX", "Frame", "StackSampler", "StackSamples", "stacks_path"]
