"""The ``cpu`` backend: host CPU utilisation and memory of this process and its descendants.

For machines without a GPU. On Linux it reads ``/proc`` directly (no dependency): CPU time and
resident memory of every process in the tree, found through ``/proc/<pid>/task/<tid>/children``.
Elsewhere it falls back to ``os.times()`` of this process and its waited-for children, and does not
measure memory; a note says so.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence

from ncompass.gpu._backends.base import DeviceInfo, Notes
from ncompass.gpu._sample import HOST_DEVICE, GpuSample

# fields of /proc/<pid>/stat after the ")" that ends the command name (0 = state)
_PPID, _UTIME, _STIME, _CUTIME, _CSTIME, _RSS = 1, 11, 12, 13, 14, 21


class CpuBackend:
    """Reads the CPU utilisation and resident memory of a process tree.

    Utilisation is the tree's CPU time over the sample period as a percent of the cores this
    process may run on, so 100 % means every available core was busy. Reaped children count
    (through their parent's ``cutime``), so short-lived subprocesses are not lost.

    Args:
        root_pid: The root of the tree; ``None`` is this process.
        proc: Where procfs is mounted.
    """

    name = "cpu"

    def __init__(self, root_pid: int | None = None, proc: str = "/proc") -> None:
        self._root = root_pid if root_pid is not None else os.getpid()
        self._proc = proc
        self._cores = _available_cores()
        self._has_proc = False
        self._children_files = True
        self._tick_s = 0.01
        self._page_bytes = 4096
        self._memory_total: int | None = None
        self._previous: tuple[int, float] | None = None  # (monotonic_ns, cpu seconds)
        self._parents: dict[int, list[int]] | None = None  # ppid -> pids, without children files
        self._notes = Notes()

    def open(self, devices: tuple[int, ...] | None, interval_s: float) -> Sequence[DeviceInfo]:
        """Checks for ``/proc`` and returns the one host pseudo-device (index ``HOST_DEVICE``)."""
        self._has_proc = os.path.exists(f"{self._proc}/{self._root}/stat")
        if self._has_proc:
            self._tick_s = 1.0 / os.sysconf("SC_CLK_TCK")
            self._page_bytes = os.sysconf("SC_PAGE_SIZE")
            self._memory_total = _memory_total(f"{self._proc}/meminfo")
        else:
            self._notes.add(
                HOST_DEVICE,
                "no /proc here: utilisation covers this process and its waited-for children, "
                "memory is not measured",
            )
        if devices not in (None, (0,)):
            self._notes.add(HOST_DEVICE, "the cpu backend watches the host; device= is ignored")
        self._previous = None
        name = f"host CPU, process tree ({self._cores} cores)"
        return [DeviceInfo(HOST_DEVICE, name, self._memory_total)]

    def read(self, time_ns: int, monotonic_ns: int) -> Sequence[GpuSample]:
        """One host sample; the first one has no utilisation (it needs a previous reading)."""
        cpu_s, rss = self._tree_usage() if self._has_proc else (_own_cpu_seconds(), None)
        util = None
        if self._previous is not None:
            previous_ns, previous_cpu_s = self._previous
            elapsed_s = (monotonic_ns - previous_ns) / 1e9
            if elapsed_s > 0:
                busy = (cpu_s - previous_cpu_s) / elapsed_s / self._cores * 100.0
                # clock ticks are coarse, and a child reparented away takes its time with it
                util = min(100.0, max(0.0, busy))
        self._previous = (monotonic_ns, cpu_s)
        return [
            GpuSample(
                device=HOST_DEVICE,
                time_ns=time_ns,
                monotonic_ns=monotonic_ns,
                util_gpu=util,
                memory_used_bytes=rss,
                memory_total_bytes=self._memory_total,
            )
        ]

    def _tree_usage(self) -> tuple[float, int]:
        self._parents = None
        ticks = 0
        pages = 0
        for fields in self._tree_stats():
            ticks += sum(int(fields[i]) for i in (_UTIME, _STIME, _CUTIME, _CSTIME))
            pages += int(fields[_RSS])
        return ticks * self._tick_s, pages * self._page_bytes

    def _tree_stats(self) -> Iterator[list[bytes]]:
        pending = [self._root]
        seen = set()
        while pending:
            pid = pending.pop()
            if pid in seen:
                continue
            seen.add(pid)
            fields = self._stat(pid)
            if fields is None:
                continue  # exited since it was listed
            yield fields
            pending.extend(self._children(pid))

    def _stat(self, pid: int) -> list[bytes] | None:
        try:
            with open(f"{self._proc}/{pid}/stat", "rb") as file:
                data = file.read()
        except OSError:
            return None
        # the command name may contain spaces and parentheses; it ends at the last ")"
        return data[data.rindex(b")") + 2 :].split()

    def _children(self, pid: int) -> list[int]:
        if self._children_files:
            try:
                return self._children_from_tasks(pid)
            except FileNotFoundError:
                if pid != self._root:
                    return []  # that process just exited
                self._children_files = False  # kernel without CONFIG_PROC_CHILDREN
        return self._children_by_scan(pid)

    def _children_from_tasks(self, pid: int) -> list[int]:
        children: list[int] = []
        # a child belongs to the thread that forked it, so every thread's list is read
        for tid in os.listdir(f"{self._proc}/{pid}/task"):
            try:
                with open(f"{self._proc}/{pid}/task/{tid}/children", "rb") as file:
                    children.extend(int(child) for child in file.read().split())
            except FileNotFoundError:
                if tid == str(pid):
                    raise
        return children

    def _children_by_scan(self, pid: int) -> list[int]:
        if self._parents is None:
            # one scan of every process per reading, shared by all the tree's lookups
            self._parents = {}
            for entry in os.listdir(self._proc):
                fields = self._stat(int(entry)) if entry.isdigit() else None
                if fields is not None:
                    self._parents.setdefault(int(fields[_PPID]), []).append(int(entry))
        return self._parents.get(pid, [])

    def close(self) -> None:
        """Nothing to release."""

    def notes(self) -> Sequence[tuple[int | None, str]]:
        """Platform limitations."""
        return self._notes.items()


def _available_cores() -> int:
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def _own_cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def _memory_total(meminfo: str) -> int | None:
    try:
        with open(meminfo) as file:
            for line in file:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None
