"""The control folder through which ``ncompass capture PID`` asks a run to record now.

Why a folder rather than a signal from the sender: the run answers (the trace's path), a
folder reaches every process of a run that looks for it, and the folder's permissions say who
may ask. Each user has one folder, ``<tmp>/ncompass-<uid>/`` (mode 0700, refused when it is
not the user's own or others can enter it); a run started with ``--on-demand`` makes
``<pid>/`` inside it and a thread polls it. A request is one file, written whole then renamed:

* ``request-<token>.json`` (``{"duration_s": float | null}``): open a span now;
* ``stop-<token>``: close it (the sender's Ctrl-C, or no duration);

and the run answers with ``opened-<token>.json`` (``{"number": N}`` or ``{"error": ...}``)
then ``written-<token>.json`` (``{"trace": path}``) once the trace is written.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import stat
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import orjson

from ncompass.capture.main_thread import MainThreadCalls
from ncompass.capture.spans import SpanSink, WindowRecord
from ncompass.errors import CaptureError

POLL_INTERVAL_S = 0.1


def user_folder() -> Path:
    """This user's control folder, created 0700 if missing.

    Raises:
        CaptureError: it exists but belongs to someone else, or others may enter it.
    """
    folder = Path(tempfile.gettempdir()) / f"ncompass-{os.getuid()}"
    with contextlib.suppress(FileExistsError):
        folder.mkdir(mode=0o700)
    status = folder.lstat()
    if not stat.S_ISDIR(status.st_mode) or status.st_uid != os.getuid() or status.st_mode & 0o077:
        raise CaptureError(
            f"{folder} is not a folder only you can use (owner, mode 0700): remove it and retry"
        )
    return folder


def create_control_folder(pid: int) -> Path:
    """The control folder of the run ``pid`` (this process), empty."""
    folder = user_folder() / str(pid)
    shutil.rmtree(folder, ignore_errors=True)  # a stale one from an earlier process
    folder.mkdir(mode=0o700)
    return folder


def remove_control_folder(folder: Path) -> None:
    """Remove a run's control folder as the run ends (left for the sender while it holds an
    answer the sender has not read; the sender removes it then)."""
    if not _answers_pending(folder):
        shutil.rmtree(folder, ignore_errors=True)


def _write(path: Path, document: dict[str, Any]) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    temporary.write_bytes(orjson.dumps(document))
    os.replace(temporary, path)


def _read(path: Path) -> dict[str, Any] | None:
    try:
        document = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    return document if isinstance(document, dict) else None


def serve_requests(
    folder: Path, sink: SpanSink, main: MainThreadCalls, stopped: threading.Event
) -> None:
    """The run's side: poll ``folder`` for requests until ``stopped``; spans open and close on
    the main thread."""
    open_token: str | None = None
    closes_at: float | None = None

    def open_span(token: str, duration: float | None) -> None:
        nonlocal open_token, closes_at
        record: WindowRecord = {"number": 0, "trigger": "demand", "duration_s": duration}
        try:
            opened = sink.open(record)
        except Exception as error:  # e.g. torch still being imported by the program
            _write(folder / f"opened-{token}.json", {"error": f"cannot record now: {error}"})
            return
        if not opened:
            _write(folder / f"opened-{token}.json", {"error": "a capture is already recording"})
            return
        number = sink.recording or record
        open_token = token
        closes_at = None if duration is None else time.monotonic() + duration
        _write(folder / f"opened-{token}.json", {"number": number["number"]})

    def close_span(token: str) -> None:
        nonlocal open_token, closes_at
        if open_token != token:
            return
        open_token, closes_at = None, None
        try:
            written = sink.close()
        except CaptureError as error:
            _write(folder / f"written-{token}.json", {"error": str(error)})
            return
        _write(folder / f"written-{token}.json", {"trace": str(written)})

    while not stopped.wait(POLL_INTERVAL_S):
        for request in sorted(folder.glob("request-*.json")):
            document = _read(request)
            request.unlink(missing_ok=True)
            requested = request.name[len("request-") : -len(".json")]
            duration = document.get("duration_s") if document else None
            if not isinstance(duration, int | float):
                duration = None
            main.call(functools.partial(open_span, requested, duration))
        recording = open_token
        if recording is None:
            continue
        stop = folder / f"stop-{recording}"
        if stop.exists() or (closes_at is not None and time.monotonic() >= closes_at):
            stop.unlink(missing_ok=True)
            closes_at = None
            main.call(functools.partial(close_span, recording))
    spans = sink.spans
    if open_token is not None and spans:  # the run ended during the capture: its trace
        _write(folder / f"written-{open_token}.json", {"trace": str(spans[-1].trace)})


def _answers_pending(folder: Path) -> bool:
    return any(folder.glob("written-*.json"))


def owner_of(pid: int) -> int | None:
    """The user id running ``pid`` (None where the system does not say)."""
    if not os.path.isdir("/proc/self"):
        return None
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except FileNotFoundError:
        raise CaptureError(f"no process {pid}: give the pid `ncompass run` printed") from None
    except OSError:
        return None


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class CaptureRequest:
    """The sender's side of one capture (``ncompass capture PID``).

    Raises (from :meth:`send`):
        CaptureError: the process is another user's, is not a run recording on demand, or
            does not answer.
    """

    def __init__(self, pid: int, duration: float | None, answer_timeout_s: float = 60.0):
        self.pid = pid
        self.duration = duration
        self.token = uuid.uuid4().hex
        self._timeout = answer_timeout_s
        self._folder: Path | None = None

    def send(self) -> int:
        """Ask the run to record now; returns the span's number once recording."""
        owner = owner_of(self.pid)
        if owner is not None and owner != os.getuid():
            raise CaptureError(
                f"process {self.pid} belongs to another user: only the user who started a run "
                "may capture it"
            )
        folder = user_folder() / str(self.pid)
        if not folder.is_dir():
            raise CaptureError(
                f"process {self.pid} is not an `ncompass run --on-demand` of yours; start the "
                "run with --on-demand"
            )
        _write(folder / f"request-{self.token}.json", {"duration_s": self.duration})
        self._folder = folder
        answer = self._wait(folder / f"opened-{self.token}.json")
        if "error" in answer:
            raise CaptureError(f"process {self.pid}: {answer['error']}")
        return int(answer["number"])

    @property
    def sent(self) -> bool:
        """Whether the request reached the run's folder (a stop then means something)."""
        return self._folder is not None

    def stop(self) -> None:
        """Ask the run to close the span now."""
        assert self._folder is not None
        (self._folder / f"stop-{self.token}").touch()

    def wait_written(self) -> Path:
        """Wait for the span's trace; returns its path."""
        assert self._folder is not None
        answer = self._wait(self._folder / f"written-{self.token}.json", timeout=None)
        if not _answers_pending(self._folder) and not _running(self.pid):
            shutil.rmtree(self._folder, ignore_errors=True)
        if "error" in answer:
            raise CaptureError(f"process {self.pid}: {answer['error']}")
        return Path(answer["trace"])

    def _wait(self, path: Path, timeout: float | None = 0.0) -> dict[str, Any]:
        deadline = time.monotonic() + (self._timeout if timeout == 0.0 else (timeout or 1e18))
        while time.monotonic() < deadline:
            answer = _read(path)
            if answer is not None:
                path.unlink(missing_ok=True)
                return answer
            if self._folder is not None and not self._folder.exists():
                raise CaptureError(f"process {self.pid} ended before answering")
            time.sleep(POLL_INTERVAL_S)
        raise CaptureError(f"process {self.pid} did not answer; is it still running?")


__all__ = [
    "CaptureRequest",
    "create_control_folder",
    "owner_of",
    "remove_control_folder",
    "serve_requests",
    "user_folder",
]
