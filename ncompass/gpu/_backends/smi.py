"""The ``smi`` backend: one long-running ``nvidia-smi --query-gpu ... -lms`` process per monitor.

A reader thread parses the CSV lines as ``nvidia-smi`` prints them and keeps the latest row per
device; ``read`` only copies those rows, so the sampler never waits on the subprocess. A reading is
therefore at most one period old.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO

from ncompass.gpu._backends.base import BackendUnavailable, DeviceInfo, DeviceNotFound, Notes
from ncompass.gpu._sample import GpuSample

# The loop query, in the order of the CSV columns it prints.
LOOP_FIELDS = (
    "index",
    "utilization.gpu",
    "utilization.memory",
    "memory.used",
    "memory.total",
    "power.draw",
    "temperature.gpu",
)
# The device listing; the name goes last so that a comma in a name cannot shift the columns.
LIST_FIELDS = ("index", "memory.total", "name")
CSV_FORMAT = "--format=csv,noheader,nounits"

_MIB = 1024 * 1024
_LIST_TIMEOUT_S = 15.0
_FIRST_READING_TIMEOUT_S = 10.0
_STOP_TIMEOUT_S = 2.0
# a row older than this is stale even when nvidia-smi keeps printing other rows
_MIN_STALE_AFTER_NS = 2_000_000_000


@dataclass(frozen=True)
class _Row:
    values: tuple[float | None, ...]  # LOOP_FIELDS[1:]
    block: int  # which output block (one line per device) the row came in
    received_ns: int


class SmiBackend:
    """Reads the devices through one ``nvidia-smi -lms`` child process.

    Args:
        executable: The ``nvidia-smi`` to run, looked up on ``PATH``.
    """

    name = "smi"

    def __init__(self, executable: str = "nvidia-smi") -> None:
        self._executable = executable
        self._process: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None
        self._lock = threading.Lock()
        self._first_reading = threading.Event()
        self._wanted: tuple[int, ...] = ()
        self._latest: dict[int, _Row] = {}
        self._block = 0
        self._last_index: int | None = None
        self._ended = False
        self._closing = False
        self._gone: set[int] = set()
        self._last_output: str | None = None
        self._stale_after_ns = _MIN_STALE_AFTER_NS
        self._notes = Notes()

    def open(self, devices: tuple[int, ...] | None, interval_s: float) -> Sequence[DeviceInfo]:
        """Lists the devices, starts the ``-lms`` process and waits for its first reading."""
        path = shutil.which(self._executable)
        if path is None:
            raise BackendUnavailable(f"{self._executable} not found on PATH")
        listed = _list_devices(path)
        wanted = tuple(sorted(devices)) if devices is not None else tuple(sorted(listed))
        missing = [index for index in wanted if index not in listed]
        if missing:
            raise DeviceNotFound(
                f"no GPU {', '.join(map(str, missing))}: nvidia-smi lists "
                f"{', '.join(map(str, sorted(listed)))}"
            )
        self._wanted = wanted
        self._stale_after_ns = max(_MIN_STALE_AFTER_NS, int(5 * interval_s * 1e9))
        command = [
            path,
            "--query-gpu=" + ",".join(LOOP_FIELDS),
            CSV_FORMAT,
            "-i",
            ",".join(map(str, wanted)),
            "-lms",
            str(max(1, round(interval_s * 1000))),
        ]
        self._start(command)
        if not self._first_reading.wait(_FIRST_READING_TIMEOUT_S):
            self._notes.add(None, f"nvidia-smi gave no reading within {_FIRST_READING_TIMEOUT_S} s")
        with self._lock:
            failed = self._ended and not self._latest
        if failed:
            output = self._last_output or "no output"
            code = self._process.returncode if self._process else None
            self.close()
            raise BackendUnavailable(f"nvidia-smi exited with code {code}: {output}")
        requested = devices if devices is not None else wanted
        return [listed[index] for index in requested]

    def _start(self, command: list[str]) -> None:
        try:
            # stderr joins stdout: its messages ("GPU is lost", driver errors) become notes
            self._process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                errors="replace",
                bufsize=1,
            )
        except OSError as error:
            raise BackendUnavailable(f"cannot run {command[0]}: {error}") from error
        assert self._process.stdout is not None
        self._reader = threading.Thread(
            target=self._read_lines,
            args=(self._process.stdout,),
            name="ncompass-nvidia-smi-reader",
            daemon=True,
        )
        self._reader.start()

    def _read_lines(self, stream: IO[str]) -> None:
        try:
            for line in stream:
                self._take_line(line.strip())
        except (OSError, ValueError):
            pass  # the pipe was closed under us by close()
        process = self._process
        code = process.wait() if process is not None else None
        with self._lock:
            self._ended = True
            if not self._closing and self._latest:
                self._notes.add(None, f"nvidia-smi exited with code {code} while monitoring")
        self._first_reading.set()

    def _take_line(self, line: str) -> None:
        if not line:
            return
        parsed = parse_row(line)
        now = time.perf_counter_ns()
        with self._lock:
            if parsed is None:
                # an error message is printed in place of a block; count it as one so that
                # devices it replaces become stale
                self._block += 1
                self._last_index = None
                self._last_output = line
                if self._latest:
                    self._notes.add(None, f"nvidia-smi: {line}")
                return
            index, values = parsed
            if self._last_index is not None and index <= self._last_index:
                self._block += 1
            self._last_index = index
            if index in self._wanted:
                self._latest[index] = _Row(values, self._block, now)
            if all(wanted in self._latest for wanted in self._wanted):
                self._first_reading.set()

    def read(self, time_ns: int, monotonic_ns: int) -> Sequence[GpuSample]:
        """The latest row of each device; a device missing from the last complete block is empty."""
        now = time.perf_counter_ns()
        with self._lock:
            rows = {index: self._fresh_row(index, now) for index in self._wanted}
        return [self._sample(index, row, time_ns, monotonic_ns) for index, row in rows.items()]

    def _fresh_row(self, index: int, now: int) -> _Row | None:
        row = self._latest.get(index)
        fresh = (
            row is not None
            and not self._ended
            # the current block may still be arriving; the one before it is complete
            and row.block >= self._block - 1
            and now - row.received_ns <= self._stale_after_ns
        )
        if not fresh:
            if index not in self._gone and not self._ended:
                self._notes.add(index, "GPU disappeared from nvidia-smi's output")
            self._gone.add(index)
            return None
        if index in self._gone:
            self._gone.discard(index)
            self._notes.add(index, "GPU reappeared in nvidia-smi's output")
        return row

    @staticmethod
    def _sample(index: int, row: _Row | None, time_ns: int, monotonic_ns: int) -> GpuSample:
        if row is None:
            return GpuSample(device=index, time_ns=time_ns, monotonic_ns=monotonic_ns)
        util_gpu, util_mem, used_mib, total_mib, power_w, temperature_c = row.values
        return GpuSample(
            device=index,
            time_ns=time_ns,
            monotonic_ns=monotonic_ns,
            util_gpu=util_gpu,
            util_mem=util_mem,
            memory_used_bytes=int(used_mib * _MIB) if used_mib is not None else None,
            memory_total_bytes=int(total_mib * _MIB) if total_mib is not None else None,
            power_w=power_w,
            temperature_c=temperature_c,
        )

    def close(self) -> None:
        """Stops the ``nvidia-smi`` child (terminate, then kill) and its reader thread."""
        process, self._process = self._process, None
        if process is None:
            return
        with self._lock:
            self._closing = True
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(_STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._reader is not None:
            self._reader.join(_STOP_TIMEOUT_S)
        if process.stdout is not None:
            process.stdout.close()

    def notes(self) -> Sequence[tuple[int | None, str]]:
        """Devices that disappeared, messages nvidia-smi printed, an early exit."""
        with self._lock:
            return self._notes.items()


def parse_row(line: str) -> tuple[int, tuple[float | None, ...]] | None:
    """Parses one loop line (``LOOP_FIELDS``); ``None`` when it is not a data row.

    ``[N/A]``, ``[Not Supported]``, ``[GPU is lost]`` and other bracketed values become ``None``.
    """
    fields = [field.strip() for field in line.split(",")]
    if len(fields) != len(LOOP_FIELDS):
        return None
    try:
        index = int(fields[0])
    except ValueError:
        return None
    return index, tuple(_number(field) for field in fields[1:])


def _number(text: str) -> float | None:
    if text.startswith("[") or text in ("", "N/A"):
        return None
    try:
        return float(text)
    except ValueError:
        return None


def _list_devices(path: str) -> dict[int, DeviceInfo]:
    command = [path, "--query-gpu=" + ",".join(LIST_FIELDS), CSV_FORMAT]
    try:
        done = subprocess.run(
            command,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=_LIST_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired as error:
        raise BackendUnavailable(f"nvidia-smi did not answer within {_LIST_TIMEOUT_S} s") from error
    except OSError as error:
        raise BackendUnavailable(f"cannot run {path}: {error}") from error
    output = (done.stdout + done.stderr).strip()
    if done.returncode != 0:
        first_line = output.splitlines()[0] if output else "no output"
        raise BackendUnavailable(f"nvidia-smi exited with code {done.returncode}: {first_line}")
    devices = {}
    for line in done.stdout.splitlines():
        fields = [field.strip() for field in line.split(",", len(LIST_FIELDS) - 1)]
        if len(fields) != len(LIST_FIELDS) or not fields[0].isdigit():
            continue
        total_mib = _number(fields[1])
        total = int(total_mib * _MIB) if total_mib is not None else None
        devices[int(fields[0])] = DeviceInfo(int(fields[0]), fields[2], total)
    if not devices:
        raise BackendUnavailable("nvidia-smi lists no GPU")
    return devices
