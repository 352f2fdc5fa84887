"""The run's side of following its processes: start them on the run's spec, then list and merge.

While the script runs, ``NCOMPASS_FOLLOW`` names a private folder holding the run's settings,
its merged spec and a ``sitecustomize.py`` (a copy of
:mod:`~ncompass.capture.follow.run_sitecustomize`); that folder is first on ``PYTHONPATH``, so
every new Python interpreter of the run imports it at start-up. It checks the variable, starts
:mod:`~ncompass.capture.follow.bootstrap` without importing the ``ncompass`` package, and then
imports the ``sitecustomize`` it hides (the user's own, if there is one). A ``.pth`` file would
not do: Python reads ``.pth`` files only in site-packages folders, not in ``PYTHONPATH`` ones.
Forked children are followed by an ``os.register_at_fork`` handler instead.

When the script ends, :meth:`FollowedRun.finish` waits briefly for the children still writing,
merges every trace written into the run's trace (the per-process traces stay beside it, in
``NAME.processes/``) and lists every process for the sidecar, naming in one warning line each
process whose trace is missing.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import json
import os
import pickle
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ncompass.capture.backends.kinds import kind_of
from ncompass.capture.environment import scoped_environment
from ncompass.capture.follow import bootstrap
from ncompass.capture.follow.bootstrap import (
    END_SUFFIX,
    EXIT_PREFIX,
    FOLLOW_ENV,
    PROCESS_KEY,
    START_SUFFIX,
    Followed,
)
from ncompass.capture.follow.exits import why_no_trace
from ncompass.capture.follow.leftovers import (
    FOLDER_PREFIX,
    alive,
    pid_namespace,
    remove_stale_folders,
    started_ticks,
)
from ncompass.capture.trace_files import claim_trace_path, safe_name
from ncompass.capture.triggers import TimedWindow
from ncompass.errors import TraceError
from ncompass.traces.processes import ProcessTrace, merge_processes

if TYPE_CHECKING:
    from ncompass.capture.recording_windows import RecordingWindows
    from ncompass.capture.run_options import RunOptions
    from ncompass.importer.registry import MarkerRecord
    from ncompass.spec.models import RewriteConfig, TargetSpec

FINISH_GRACE_S = 3.0
"""How long the run waits, once its script has ended, for children still writing their trace."""

PROCESSES_SUFFIX = ".processes"
"""The folder beside the run's trace that keeps each process's own trace."""


SITECUSTOMIZE = Path(__file__).with_name("run_sitecustomize.py")
"""The source of the ``sitecustomize.py`` in the run's folder."""


@dataclass
class FollowOutcome:
    """What the run's processes did.

    Attributes:
        processes: One record per process (the run's own first): pid, ppid, rank, role,
            command, exit_code, trace_file, markers (the names of the markers placed in it).
        warnings: One line per process whose trace is missing.
        markers: The marker sites placed in every process (each once).
        modules: ``(name, path)`` of every module rewritten in a child.
        window_processes: Each window trace's process list (its ``trace_file``: the
            process's part of that window).
    """

    processes: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    markers: list[MarkerRecord] = field(default_factory=list)
    modules: list[tuple[str, str]] = field(default_factory=list)
    window_processes: dict[Path, list[dict[str, Any]]] = field(default_factory=dict)

    def still_unplaced(self, targets: list[TargetSpec]) -> list[TargetSpec]:
        """Of the targets the run's own process never imported, those no child imported either."""
        names = {name for name, _ in self.modules}
        paths = {os.path.realpath(path) for _, path in self.modules}
        return [
            target
            for target in targets
            if not (
                (target.module is not None and target.module in names)
                or (target.file is not None and os.path.realpath(target.file) in paths)
            )
        ]


class FollowedRun:
    """One ``ncompass run`` that follows its processes.

    Args:
        folder: The private folder the children find through ``NCOMPASS_FOLLOW``.
        traces: Where the children write their traces (None: the profiler writes none).
        command: The run's command as the user gave it.
    """

    def __init__(self, folder: Path, traces: Path | None, command: str) -> None:
        self.folder = folder
        self.traces = traces
        self.command = command
        self.root_pid = os.getpid()
        self.windows_stem: Path | None = None  # the run's trace name, when it records windows
        self.windows_followed = False  # its children record the run's windows too

    @classmethod
    def begin(
        cls,
        config: RewriteConfig,
        options: RunOptions,
        trace_path: Path | None,
        windows: RecordingWindows | None = None,
        windows_stem: Path | None = None,
    ) -> FollowedRun:
        """Prepare the folder the run's children read, and follow forks of this process.

        Args:
            windows / windows_stem: The run's recording windows and its trace folder and name
                (``DIR/NAME``): every process records the same windows (``--profiler torch``
                and ``nvtx-trace``).
        """
        # one flat folder (each directory is one more to remove): the sitecustomize, the
        # settings and the processes' records, none of the others importable
        remove_stale_folders()  # of runs that were killed before they could
        folder = Path(tempfile.mkdtemp(prefix=FOLDER_PREFIX))
        shutil.copyfile(SITECUSTOMIZE, folder / "sitecustomize.py")
        spec = folder / "spec.pickle"
        spec.write_bytes(pickle.dumps(config))
        kind = kind_of(options.profiler)
        traces = None  # made by the first child that records
        by_window = windows is not None and windows_stem is not None
        if kind.per_process_traces and trace_path is not None and not by_window:
            traces = processes_folder(trace_path)
        stems = {Path(target.file).stem for target in config.targets if target.file}
        started = time.time()
        settings = {
            "root_pid": os.getpid(),
            "root_namespace": pid_namespace(),
            "root_started_ticks": started_ticks(os.getpid()),
            "started_unix_s": started,
            "modules": sorted({t.module for t in config.targets if t.module}),
            "file_stems": sorted(stems),
            "profiler": options.profiler,
            "kind": {  # what the stdlib-only bootstrap asks: capabilities, not the name
                "per_process_traces": kind.per_process_traces,
                "followed_windows": kind.followed_windows,
                "gates_recorder": kind.gates_recorder,
            },
            "profiler_options": {
                "record_shapes": options.record_shapes,
                "profile_memory": options.profile_memory,
                "with_stack": options.with_stack,
            },
            "spec": str(spec),
            "traces": str(traces) if traces is not None else None,
            "process_hooks": dict(options.process_hooks),
        }
        if by_window and kind.followed_windows and options.recording_windows is not None:
            from ncompass.capture.follow import windows as followed_windows

            assert windows is not None and windows_stem is not None
            stem = windows_stem.with_name(safe_name(windows_stem.name))
            settings[followed_windows.SETTINGS_KEY] = followed_windows.window_settings(
                options.recording_windows, _window_processes_folder(stem), started
            )
            followed_windows.adopt_run_windows(windows)
            if isinstance(windows.trigger, TimedWindow):  # one clock for every process
                windows.trigger.on_clock = functools.partial(_publish_clock, str(folder), settings)
        bootstrap.write_settings(str(folder), settings)
        command = " ".join(
            [*(["-m", options.module] if options.module else [options.script or ""]), *options.args]
        )
        run = cls(folder, traces, command)
        atexit.register(run._remove_folder)  # whatever way out the run takes past its finish
        if by_window and "windows" in settings:
            assert windows is not None and options.recording_windows is not None
            run.windows_followed = True
            merge: Callable[[int, Path], object] = _nothing_to_merge
            if kind.window_is_profiler:  # else the parent cuts them from the recordings
                run.windows_stem = stem
                merge = functools.partial(run._merge_capture, windows)
            if options.recording_windows.on_demand:
                from ncompass.capture.follow.windows import follow_captures

                follow_captures(windows, folder, merge)
        bootstrap.begin(Followed(str(folder), settings, root=True))
        return run

    @contextlib.contextmanager
    def scope(self) -> Iterator[None]:
        """The children started inside the block are followed; on an error the folder goes."""
        path = os.environ.get("PYTHONPATH")
        site = str(self.folder)
        variables = {
            FOLLOW_ENV: str(self.folder),
            "PYTHONPATH": site + (os.pathsep + path if path else ""),
        }
        try:
            with scoped_environment(variables):
                yield
        except BaseException:
            self.abandon()
            raise

    def identity(self) -> dict[str, Any]:
        """The run's own process, as the merged trace and the sidecar name it."""
        me = bootstrap.identity()
        rank = me["rank"]
        return {**me, "role": f"rank {rank}" if rank is not None else self.command}

    def profiler_started(self, profiler: object) -> None:
        """Name the run's own process in its trace (the torch profiler only)."""
        add_metadata = getattr(profiler, "add_metadata", None)
        if add_metadata is not None:
            add_metadata(PROCESS_KEY, self.identity())

    def _remove_folder(self) -> None:
        """Remove the private folder (in the run's own process only: a forked child that
        exits through its inherited exit handlers must leave the live run's folder)."""
        if os.getpid() == self.root_pid:
            shutil.rmtree(self.folder, ignore_errors=True)

    def abandon(self) -> None:
        """Stop following and remove the private folder (the per-process traces stay)."""
        bootstrap.stop_root()
        if "ncompass.capture.follow.windows" in sys.modules:  # the run recorded windows
            from ncompass.capture.follow.windows import adopt_run_windows

            adopt_run_windows(None)
        self._remove_folder()
        atexit.unregister(self._remove_folder)
        if self.traces is not None:
            with contextlib.suppress(OSError):
                self.traces.rmdir()  # only when empty

    def finish(
        self,
        root_trace: Path | None,
        root_markers: list[MarkerRecord],
        exit_code: int,
        windows: RecordingWindows | None = None,
    ) -> FollowOutcome:
        """Wait for the children, merge their traces into ``root_trace``, list every process.

        With ``windows`` (the run's own, ended), window N of every process is merged into the
        run's ``NAME-wN.json`` instead.
        """
        try:
            _join_multiprocessing_children()
            started, ended = self._wait_for_children()
            outcome = self._outcome(started, ended, root_trace, root_markers, exit_code)
            if root_trace is not None and self.traces is not None:
                self._merge(root_trace, outcome)
            for folder in self._trace_folders():
                _release_empty_claims(folder)  # of processes that crashed before writing
            if windows is not None and self.windows_followed:
                self._merge_windows(windows, outcome, ended)
            return outcome
        finally:
            self.abandon()

    def _trace_folders(self) -> list[Path]:
        """The folders the processes write their own traces into."""
        folders = [self.traces] if self.traces is not None else []
        if self.windows_stem is not None:
            folders.append(_window_processes_folder(self.windows_stem))
        return folders

    def _wait_for_children(self) -> tuple[dict[int, dict[str, Any]], dict[int, dict[str, Any]]]:
        deadline = time.monotonic() + FINISH_GRACE_S
        while True:
            started = _records(self.folder, START_SUFFIX)
            ended = _records(self.folder, END_SUFFIX)
            running = [pid for pid in started if pid not in ended and alive(pid)]
            if not running or time.monotonic() > deadline:
                return started, ended
            time.sleep(0.05)

    def _merge_windows(
        self, windows: RecordingWindows, outcome: FollowOutcome, ended: dict[int, dict[str, Any]]
    ) -> None:
        """Window N of every process into ``NAME-wN.json`` (or, when the parent cuts the
        windows from the recordings, only the run's account of which process recorded what)."""
        from ncompass.capture.follow.windows import WindowTraces, merge_windows

        calls = {pid: record.get("window_calls") for pid, record in ended.items()}
        target = None
        if self.windows_stem is not None:
            target = WindowTraces(
                _window_processes_folder(self.windows_stem),
                self.windows_stem.parent,
                self.windows_stem.name,
            )
        lists, warnings = merge_windows(self.folder, windows, outcome.processes, calls, target)
        outcome.window_processes = lists
        outcome.warnings += warnings
        if target is not None:
            with contextlib.suppress(OSError):  # only when empty: no process recorded a window
                target.parts.rmdir()

    def _merge_capture(self, windows: RecordingWindows, number: int, trace: Path) -> None:
        """Merge an on-demand capture as it closes (the run merges it again at its end)."""
        from ncompass.capture.follow.windows import merge_capture

        assert self.windows_stem is not None
        started, ended = _records(self.folder, START_SUFFIX), _records(self.folder, END_SUFFIX)
        outcome = self._outcome(started, ended, None, [], 0)
        outcome.processes[0]["exit_code"] = None  # still running
        merge_capture(
            self.folder,
            windows,
            number,
            trace,
            outcome.processes,
            _window_processes_folder(self.windows_stem),
            alive,
            FINISH_GRACE_S,
        )

    def _outcome(
        self,
        started: dict[int, dict[str, Any]],
        ended: dict[int, dict[str, Any]],
        root_trace: Path | None,
        root_markers: list[MarkerRecord],
        exit_code: int,
    ) -> FollowOutcome:
        outcome = FollowOutcome(markers=list(root_markers))
        outcome.processes.append(
            {
                **self.identity(),
                "exit_code": exit_code,
                "trace_file": str(root_trace) if root_trace is not None else None,
                "markers": sorted({m["name"] for m in root_markers}),
            }
        )
        seen = {(m["module"], m["id"]) for m in root_markers}
        exits = _exit_codes(self.folder)
        for pid, start in started.items():
            end = ended.get(pid)
            record = dict(end if end is not None else start)
            markers: list[MarkerRecord] = record.pop("markers", None) or []
            modules = record.pop("modules", None) or []
            code = exits.get(pid, record.get("exit_code"))
            outcome.processes.append(
                {
                    "pid": pid,
                    "ppid": record.get("ppid"),
                    "rank": record.get("rank"),
                    "role": record.get("role"),
                    "command": record.get("command"),
                    "exit_code": code,
                    "trace_file": record.get("trace_file"),
                    "markers": sorted({m["name"] for m in markers}),
                }
            )
            outcome.modules += [(name, path) for name, path in modules]
            for marker in markers:
                if (marker["module"], marker["id"]) not in seen:
                    seen.add((marker["module"], marker["id"]))
                    outcome.markers.append(marker)
            if end is None and self.windows_stem is None:  # windows: see _merge_windows
                outcome.warnings.append(_missing(pid, record, code))
        return outcome

    def _merge(self, root_trace: Path, outcome: FollowOutcome) -> None:
        assert self.traces is not None
        if len(outcome.processes) < 2 or not root_trace.is_file():
            return  # no child: the run's trace stays as the profiler wrote it
        own = claim_trace_path(self.traces, str(self.root_pid))
        os.replace(root_trace, own)
        outcome.processes[0]["trace_file"] = str(own)
        traces = [
            ProcessTrace(Path(p["trace_file"]), p["pid"], p["role"])
            for p in outcome.processes
            if p["trace_file"]
        ]
        try:
            merge_processes(traces, root_trace, metadata={"ncompass_processes": outcome.processes})
        except (TraceError, OSError) as error:
            outcome.warnings.append(
                f"the processes' traces were not merged ({error}); the run's own trace is "
                f"{root_trace}, the others are in {self.traces}"
            )
            shutil.copyfile(own, root_trace)


def _publish_clock(folder: str, settings: dict[str, Any], started_unix_s: float) -> None:
    """The run's ``--delay`` clock started (before the program, so before any child): every
    process counts from it."""
    from ncompass.capture.follow.windows import SETTINGS_KEY

    settings[SETTINGS_KEY]["started_unix_s"] = started_unix_s
    bootstrap.write_settings(folder, settings)


def _nothing_to_merge(number: int, trace: Path) -> None:
    """A capture's parts are cut from the NVTX recordings once the run has ended."""


def processes_folder(trace_path: Path) -> Path:
    """The folder beside a run's trace that keeps each process's own trace."""
    return trace_path.with_name(trace_path.stem + PROCESSES_SUFFIX)


def _window_processes_folder(stem: Path) -> Path:
    """``DIR/NAME.processes``: the processes' window traces (``PID-wN.json``)."""
    return stem.with_name(stem.name + PROCESSES_SUFFIX)


def _release_empty_claims(folder: Path) -> None:
    """Remove the empty files claimed for traces never written: a process that crashed (or
    was killed) after it started its profiler. Every trace is renamed into place whole, so an
    empty file is only ever a claim."""
    with contextlib.suppress(OSError):
        for path in folder.glob("*.json"):
            with contextlib.suppress(OSError):
                if path.stat().st_size == 0:
                    path.unlink()


def _join_multiprocessing_children() -> None:
    """Wait for the non-daemon ``multiprocessing`` children, as the interpreter would at exit."""
    if "multiprocessing" not in sys.modules:
        return
    import multiprocessing

    for child in multiprocessing.active_children():
        if not child.daemon:
            child.join()


def _records(folder: Path, suffix: str) -> dict[int, dict[str, Any]]:
    records: dict[int, dict[str, Any]] = {}
    for path in sorted(folder.glob(f"*{suffix}"), key=_modified):
        with contextlib.suppress(OSError, ValueError):
            records[int(path.name[: -len(suffix)])] = json.loads(path.read_bytes())
    return records


def _modified(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _exit_codes(folder: Path) -> dict[int, int]:
    codes: dict[int, int] = {}
    for path in folder.glob(f"{EXIT_PREFIX}*"):
        with contextlib.suppress(OSError, ValueError):
            codes[int(path.name[len(EXIT_PREFIX) :])] = int(path.read_text())
    return codes


def _missing(pid: int, record: dict[str, Any], code: int | None) -> str:
    return (
        f"process {pid} ({record.get('role') or record.get('command')}) left no trace: "
        f"{why_no_trace(code)}; what it recorded is lost"
    )


__all__ = [
    "FINISH_GRACE_S",
    "PROCESSES_SUFFIX",
    "FollowOutcome",
    "FollowedRun",
    "processes_folder",
]
