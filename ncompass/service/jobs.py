"""Analysis jobs: queued, run on worker threads by the service's provider, polled by id."""

from __future__ import annotations

import dataclasses
import logging
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from ncompass.analysis.providers.base import AnalysisProvider, MarkerRequest
from ncompass.analysis.providers.service_api import ErrorKind, JobKind, JobState
from ncompass.analysis.providers.time_budget import TimeBudgetSpent
from ncompass.errors import NcompassError, TraceError
from ncompass.service.deadline import JobDeadline
from ncompass.service.limits import ServiceLimits
from ncompass.service.storage import StoredItem, TraceStore, new_id

log = logging.getLogger("ncompass.service")


class QueueFull(Exception):
    """Too many jobs are waiting; the client should retry later."""


class UnknownUpload(Exception):
    """A job names an upload that does not exist (or expired)."""


@dataclass
class Job:
    """One unit of work and its state (a snapshot when handed out by :class:`JobBoard`)."""

    job_id: str
    kind: JobKind
    upload_id: str | None
    params: dict[str, Any]
    created_at: float
    status: JobState = "queued"
    error: str | None = None
    error_kind: ErrorKind | None = None
    started_at: float | None = None
    finished_at: float | None = None
    result: Path | None = None
    media_type: str = "application/json"


class JobBoard:
    """Accepts jobs, runs them on a few worker threads, keeps their state for polling.

    Threads (not processes) because the engine streams and keeps memory bounded, and jobs then
    share the store without copying traces around; ``workers`` bounds how many run at once.

    Args:
        provider: Does the work (the built-in engine, or an LLM provider over it).
        store: Where uploads are read and results written.
        limits: Queue length, workers and how long finished jobs are remembered.
        clock: Seconds since the epoch.
    """

    def __init__(
        self,
        provider: AnalysisProvider,
        store: TraceStore,
        limits: ServiceLimits,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.provider = provider
        self.store = store
        self.limits = limits
        self._clock = clock
        self._jobs: dict[str, Job] = {}
        self._lock = threading.Lock()
        self._executor = ThreadPoolExecutor(limits.workers, thread_name_prefix="ncompass-job")

    def submit(self, kind: JobKind, upload_id: str | None, params: dict[str, Any]) -> Job:
        """Queue a job; returns its snapshot.

        Raises:
            UnknownUpload: ``upload_id`` names no stored trace.
            QueueFull: ``max_queued_jobs`` jobs are already waiting.
        """
        self._forget_old_jobs()
        upload: StoredItem | None = None
        if upload_id is not None:
            upload = self.store.pin(upload_id)
            if upload is None:
                raise UnknownUpload(
                    f"no upload {upload_id} on this service (it expired, was deleted, or the "
                    "service restarted): upload the trace again"
                )
        with self._lock:
            waiting = sum(1 for job in self._jobs.values() if job.status == "queued")
            if waiting >= self.limits.max_queued_jobs:
                if upload_id is not None:
                    self.store.unpin(upload_id)
                raise QueueFull(f"{waiting} jobs are already waiting; retry in a few seconds")
            job = Job(new_id(), kind, upload_id, params, self._clock())
            self._jobs[job.job_id] = job
            snapshot = dataclasses.replace(job)
        self._executor.submit(self._run, job.job_id, upload)
        return snapshot

    def get(self, job_id: str) -> Job | None:
        """A snapshot of the job, or None when it is unknown or forgotten."""
        with self._lock:
            job = self._jobs.get(job_id)
            return dataclasses.replace(job) if job is not None else None

    def counts(self) -> dict[str, int]:
        """How many jobs are queued, running, done and failed."""
        with self._lock:
            counts = dict.fromkeys(("queued", "running", "done", "failed"), 0)
            for job in self._jobs.values():
                counts[job.status] += 1
            return counts

    def close(self) -> None:
        """Stop taking jobs; wait for the running ones, drop the queued ones."""
        self._executor.shutdown(wait=True, cancel_futures=True)

    def _run(self, job_id: str, upload: StoredItem | None) -> None:
        with self._lock:
            job = self._jobs[job_id]
            job.status = "running"
            job.started_at = self._clock()
        kind: ErrorKind | None = None
        message: str | None = None
        try:
            with JobDeadline(self.limits.job_timeout_s):
                result, media_type = self._work(job, upload)
            stored = self.store.commit_result(job.job_id, result)
        except (Exception, TimeBudgetSpent) as error:
            status: JobState = "failed"
            kind, message = _classify(error, self.limits)
            if kind == "internal":
                log.exception("job %s (%s) failed", job.job_id, job.kind)
            message = _without_storage_paths(message, self.store.root)
            self.store.discard_result(job.job_id)
            stored = None
        else:
            status = "done"
        finally:
            if upload is not None:
                self.store.unpin(upload.item_id)
        with self._lock:
            job.status = status
            job.error_kind = kind
            job.error = message
            job.finished_at = self._clock()
            if stored is not None:
                job.result = stored.path
                job.media_type = media_type

    def _work(self, job: Job, upload: StoredItem | None) -> tuple[Path, str]:
        params = job.params
        if job.kind == "propose-markers":
            targets = self.provider.propose_markers(MarkerRequest(**params))
            return self._write_json(job, {"targets": targets}), "application/json"
        if upload is None:
            raise ValueError(f"a {job.kind} job needs an upload")
        if job.kind == "filter":
            gzip = bool(params.get("gzip"))
            stem = upload.path.name.removesuffix(".gz").removesuffix(".json")
            name = f"{stem}.filtered.json" + (".gz" if gzip else "")
            output = self.store.reserve_result(job.job_id, name)
            self.provider.filter(
                upload.path,
                output,
                include_cuda_kernels=params["include_cuda_kernels"],
                include_direct_children=params["include_direct_children"],
                min_duration_us=params["min_duration_us"],
            )
            return output, "application/gzip" if gzip else "application/json"
        summary = self.provider.summarize(
            upload.path, top=params["top"], feedback_context=params.get("feedback_context")
        )
        return self._write_json(job, _without_server_paths(summary, upload.path)), (
            "application/json"
        )

    def _write_json(self, job: Job, body: Any) -> Path:
        path = self.store.reserve_result(job.job_id, "result.json")
        path.write_bytes(orjson.dumps(body))
        return path

    def _forget_old_jobs(self) -> None:
        """Drop finished jobs past the retention time, or beyond ``max_kept_jobs``."""
        horizon = self._clock() - self.limits.retention_s
        with self._lock:
            finished = sorted(
                (job for job in self._jobs.values() if job.finished_at is not None),
                key=lambda job: job.finished_at or 0.0,
            )
            # Room for the job about to be added.
            excess = len(self._jobs) + 1 - self.limits.max_kept_jobs
            for job in finished:
                if excess <= 0 and (job.finished_at or 0.0) >= horizon:
                    break
                del self._jobs[job.job_id]
                excess -= 1
                if job.result is not None:
                    self.store.delete(job.job_id)


def _classify(error: BaseException, limits: ServiceLimits) -> tuple[ErrorKind, str]:
    if isinstance(error, TimeBudgetSpent):  # the limit itself, or an HTTP call that met it
        return "input", (
            f"the job ran past this service's time limit ({limits.job_timeout_s:g} s) and was "
            "stopped: filter the trace first (`ncompass filter`), or restart the service with "
            "a larger --job-timeout-s"
        )
    if isinstance(error, TraceError):
        return "trace", str(error)
    if isinstance(error, NcompassError):
        return "input", str(error)
    return "internal", f"internal error: {type(error).__name__}: {error}"


def _without_storage_paths(message: str, root: Path) -> str:
    """A job's error with the service's folders left out: an item's file is named by its name.

    Errors come from anywhere (the trace reader, the filesystem, a provider), so every path
    under the storage folder is replaced, however it was spelled.
    """
    spellings = {str(root), str(root.absolute()), str(root.resolve())}
    for spelling in sorted(spellings, key=len, reverse=True):
        item = re.escape(spelling) + r"/(?:uploads|results)/[0-9a-f]{32}/"
        message = re.sub(item, "", message)
        message = message.replace(spelling, "<storage>")
    return message


def _without_server_paths(value: Any, trace: Path) -> Any:
    """Name the trace by its upload name: the service's folders are nobody else's business."""
    if isinstance(value, str):
        return value.replace(str(trace), trace.name)
    if isinstance(value, dict):
        return {key: _without_server_paths(item, trace) for key, item in value.items()}
    if isinstance(value, list):
        return [_without_server_paths(item, trace) for item in value]
    return value


__all__ = ["Job", "JobBoard", "QueueFull", "UnknownUpload"]
