"""The client of ``ncompass serve``: the provider protocol over HTTP, with a local fallback.

Each call uploads the trace (once per file version), submits a job, polls it within a bounded
time and downloads the result. A service that cannot be reached, does not answer in time,
fails (5xx, a failed job) or answers nonsense never stops the user's work: the call warns,
naming the URL and what failed, and returns the fallback provider's answer instead.
"""

from __future__ import annotations

import dataclasses
import os
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, cast

import orjson
from pydantic import BaseModel, ValidationError

from ncompass import environment_variables
from ncompass._format import format_size
from ncompass.analysis.providers._http import (
    HttpFailure,
    JsonAnswer,
    describe_error,
    download,
    error_detail,
    request_json,
)
from ncompass.analysis.providers._proposals import InvalidProposal, check_proposal
from ncompass.analysis.providers.base import AnalysisProvider, MarkerRequest
from ncompass.analysis.providers.fallback import warn_fallback
from ncompass.analysis.providers.service_api import (
    API_VERSION,
    JobStatus,
    ProposalResult,
    ServiceHello,
    SummaryResult,
    UploadReceipt,
)
from ncompass.analysis.summary_types import StructuredSummary, Summary
from ncompass.errors import TraceError

TOKEN_ENV = environment_variables.NCOMPASS_ANALYSIS_TOKEN

T = TypeVar("T")
Answer = TypeVar("Answer", bound=BaseModel)


class _Deadline:
    """The time one call may take, shared by its requests."""

    def __init__(self, seconds: float, request_timeout_s: float):
        self.seconds = seconds
        self.request_timeout_s = request_timeout_s
        self.end = time.monotonic() + seconds

    def remaining(self) -> float:
        return self.end - time.monotonic()

    def timeout(self, url: str) -> float:
        """The timeout of the next request: the request timeout, cut to what is left."""
        left = self.remaining()
        if left <= 0:
            raise HttpFailure(url, f"no result within {self.seconds:g} s", unreachable=False)
        return min(self.request_timeout_s, left)


class RemoteProvider:
    """Summaries, filtering and marker proposals by an ``ncompass serve`` service.

    Args:
        base_url: The service, e.g. ``http://127.0.0.1:8000``.
        fallback: Answers instead when the service cannot (usually the built-in provider).
        timeout_s: Longest wait for a connection or for any single answer.
        job_timeout_s: Longest time one call may take in all (upload, job, download).
        token: Bearer token for a service started with one (default: ``$NCOMPASS_ANALYSIS_TOKEN``).
        retry_after_s: After the service could not be reached, calls go straight to the
            fallback (still with a warning) for this long instead of waiting again.

    Attributes:
        last_failure: Why the last call fell back, or None when it was answered remotely.
    """

    def __init__(
        self,
        base_url: str,
        fallback: AnalysisProvider,
        *,
        timeout_s: float = 30.0,
        job_timeout_s: float = 600.0,
        token: str | None = None,
        retry_after_s: float = 30.0,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.fallback = fallback
        self.timeout_s = timeout_s
        self.job_timeout_s = job_timeout_s
        self.retry_after_s = retry_after_s
        self.name = f"remote {self.base_url}"
        self.last_failure: str | None = None
        self._token = token if token is not None else os.environ.get(TOKEN_ENV) or None
        self._uploads: dict[tuple[str, int, int], str] = {}
        self._unreachable_until = 0.0

    def summarize(
        self, trace_path: Path, *, top: int = 20, feedback_context: dict[str, Any] | None = None
    ) -> Summary:
        """See :meth:`AnalysisProvider.summarize`."""
        trace_path = Path(trace_path)

        def local() -> Summary:
            return self.fallback.summarize(trace_path, top=top, feedback_context=feedback_context)

        if not trace_path.is_file():
            return local()  # the local engine says precisely what is wrong with the path
        return self._or_fallback(
            f"summarize {trace_path.name}",
            lambda: self._summarize(trace_path, top, feedback_context),
            local,
        )

    def filter(
        self,
        trace_path: Path,
        output_path: Path,
        *,
        include_cuda_kernels: bool = True,
        include_direct_children: bool = False,
        min_duration_us: float = 0.0,
    ) -> Path:
        """See :meth:`AnalysisProvider.filter`."""
        trace_path, output_path = Path(trace_path), Path(output_path)
        options: dict[str, Any] = {
            "include_cuda_kernels": include_cuda_kernels,
            "include_direct_children": include_direct_children,
            "min_duration_us": min_duration_us,
        }

        def local() -> Path:
            return self.fallback.filter(
                trace_path,
                output_path,
                include_cuda_kernels=include_cuda_kernels,
                include_direct_children=include_direct_children,
                min_duration_us=min_duration_us,
            )

        if not trace_path.is_file():
            return local()
        return self._or_fallback(
            f"filter {trace_path.name}",
            lambda: self._filter(trace_path, output_path, options),
            local,
        )

    def propose_markers(self, request: MarkerRequest) -> list[dict[str, Any]] | None:
        """The service's proposal, checked like any non-built-in proposal; None when it has
        none (the session's planner then decides)."""
        return self._or_fallback(
            "propose markers",
            lambda: self._propose(request),
            lambda: self.fallback.propose_markers(request),
        )

    # The calls, over HTTP.

    def _summarize(
        self, trace_path: Path, top: int, feedback_context: dict[str, Any] | None
    ) -> Summary:
        deadline = _Deadline(self.job_timeout_s, self.timeout_s)
        health = self._health(deadline)
        body: dict[str, Any] = {"top": top}
        kind = "summarize"
        if feedback_context:
            kind = "analyze"
            body["feedback_context"] = feedback_context
        job = self._run_upload_job(kind, trace_path, body, health, deadline)
        url = self._url(str(job.result_url))
        body = self._get(url, deadline).body
        _validated(SummaryResult, body, url, "not a summary (markdown + structured)")
        summary = cast(Summary, body)  # checked above; the JSON is kept as the service wrote it
        _name_local_trace(summary["structured"], trace_path)
        return summary

    def _filter(self, trace_path: Path, output_path: Path, options: dict[str, Any]) -> Path:
        deadline = _Deadline(self.job_timeout_s, self.timeout_s)
        health = self._health(deadline)
        body = {**options, "gzip": output_path.name.endswith(".gz")}
        job = self._run_upload_job("filter", trace_path, body, health, deadline)
        url = self._url(str(job.result_url))
        try:
            return download(url, output_path, timeout_s=deadline.timeout(url), headers=self._auth())
        except OSError as error:
            raise TraceError(f"cannot write the filtered trace {output_path}: {error}") from error

    def _propose(self, request: MarkerRequest) -> list[dict[str, Any]] | None:
        deadline = _Deadline(self.job_timeout_s, self.timeout_s)
        health = self._health(deadline)
        body = dataclasses.asdict(request)
        size = len(orjson.dumps(body))
        limit = health.limits.max_request_bytes
        if size > limit:
            raise HttpFailure(
                self.base_url, f"the marker request is {size} bytes; the service takes {limit}"
            )
        url = self._url("/v1/jobs/propose-markers")
        answer = self._post_json(url, body, deadline)
        if answer.status == 404:
            return None  # a service without marker proposals: the session's planner decides
        job = self._wait(self._accepted(answer, url), deadline)
        result_url = self._url(str(job.result_url))
        result = _validated(
            ProposalResult, self._get(result_url, deadline).body, url, "not a proposal"
        )
        if result.targets is None:
            return None
        try:
            targets = check_proposal(result.targets, request)
        except InvalidProposal as error:
            raise HttpFailure(url, f"the proposed markers were refused: {error}") from error
        return targets or None

    def _run_upload_job(
        self,
        kind: str,
        trace_path: Path,
        body: dict[str, Any],
        health: ServiceHello,
        deadline: _Deadline,
    ) -> JobStatus:
        """Upload (or reuse the upload of) ``trace_path``, run the job, wait for it."""
        url = self._url(f"/v1/jobs/{kind}")
        for attempt in (1, 2):
            upload_id = self._upload(trace_path, health, deadline, fresh=attempt == 2)
            answer = self._post_json(url, {"upload_id": upload_id, **body}, deadline)
            if answer.status != 404 or attempt == 2:
                break
            # The upload expired or the service restarted: send the trace once more.
        job = self._wait(self._accepted(answer, url), deadline)
        if job.status == "failed":
            if job.error_kind == "trace":
                raise TraceError(
                    f"the analysis service at {self.base_url} cannot read {trace_path}: {job.error}"
                )
            raise HttpFailure(url, f"the {kind} job failed: {job.error}")
        return job

    def _upload(
        self, trace_path: Path, health: ServiceHello, deadline: _Deadline, *, fresh: bool
    ) -> str:
        stat = trace_path.stat()
        key = (str(trace_path.resolve()), stat.st_size, stat.st_mtime_ns)
        if not fresh and key in self._uploads:
            return self._uploads[key]
        limit = health.limits.max_upload_bytes
        if stat.st_size > limit:
            raise HttpFailure(
                self.base_url,
                f"{trace_path.name} is {format_size(stat.st_size)} and the service accepts "
                f"uploads up to {format_size(limit, decimals=0)} (gzip the trace, `ncompass "
                "filter` it, or start the service with a larger --max-upload-mb)",
            )
        url = self._url(f"/v1/uploads?name={urllib.parse.quote(trace_path.name)}")
        headers = {
            **self._auth(),
            "Content-Type": "application/octet-stream",
            "Content-Length": str(stat.st_size),
        }
        with trace_path.open("rb") as data:
            answer = request_json(
                "POST", url, data=data, headers=headers, timeout_s=deadline.timeout(url)
            )
        if answer.status != 201:
            raise HttpFailure(url, self._explain(answer), status=answer.status)
        upload_id = _validated(UploadReceipt, answer.body, url, "no upload_id").upload_id
        self._uploads[key] = upload_id
        return upload_id

    def _wait(self, job: JobStatus, deadline: _Deadline) -> JobStatus:
        """Poll a job until it is done or failed (sleeping a little longer each time)."""
        url = self._url(f"/v1/jobs/{job.job_id}")
        pause = 0.02
        while job.status not in ("done", "failed"):
            if deadline.remaining() <= pause:
                raise HttpFailure(
                    url,
                    f"the job was still {job.status} after {deadline.seconds:g} s "
                    "(the service is busy or the trace is very large)",
                )
            time.sleep(pause)
            pause = min(pause * 1.5, 1.0)
            job = _validated(JobStatus, self._get(url, deadline).body, url, "not a job status")
        return job

    def _health(self, deadline: _Deadline) -> ServiceHello:
        url = self._url("/v1/health")
        body = self._get(url, deadline).body
        # Who answers and in which API first: the rest of the answer means nothing otherwise.
        if not (isinstance(body, dict) and body.get("service") == "ncompass"):
            raise HttpFailure(url, "malformed answer: this is not an ncompass analysis service")
        if body.get("api") != API_VERSION:
            raise HttpFailure(
                url,
                f"the service speaks API {body.get('api')}, this client {API_VERSION}: "
                "run the same ncompass version on both sides",
            )
        health = _validated(ServiceHello, body, url, "not a health answer")
        if health.auth:
            self._check_token(deadline)
        return health

    def _check_token(self, deadline: _Deadline) -> None:
        """Find out about a missing or wrong token before sending a trace, not halfway through
        (the service refuses without reading the upload, which breaks the connection)."""
        if not self._token:
            raise HttpFailure(
                self.base_url,
                f"the service needs a token: set {TOKEN_ENV} to the token it was started with",
            )
        url = self._url("/v1/jobs/" + "0" * 32)
        answer = request_json("GET", url, headers=self._auth(), timeout_s=deadline.timeout(url))
        if answer.status == 401:
            raise HttpFailure(url, self._explain(answer), status=401)

    # HTTP plumbing.

    def _get(self, url: str, deadline: _Deadline) -> JsonAnswer:
        url = self._url(url)
        answer = request_json("GET", url, headers=self._auth(), timeout_s=deadline.timeout(url))
        if answer.status != 200:
            raise HttpFailure(url, self._explain(answer), status=answer.status)
        return answer

    def _post_json(self, url: str, body: dict[str, Any], deadline: _Deadline) -> JsonAnswer:
        """POST a job request, waiting out a full queue (429) within the deadline."""
        while True:
            answer = request_json(
                "POST", url, json_body=body, headers=self._auth(), timeout_s=deadline.timeout(url)
            )
            if answer.status != 429:
                return answer
            pause = _retry_after(answer)
            if deadline.remaining() <= pause:
                raise HttpFailure(url, self._explain(answer), status=429)
            time.sleep(pause)

    def _accepted(self, answer: JsonAnswer, url: str) -> JobStatus:
        if answer.status != 202:
            raise HttpFailure(url, self._explain(answer), status=answer.status)
        return _validated(JobStatus, answer.body, url, "not a job status")

    def _explain(self, answer: JsonAnswer) -> str:
        detail = error_detail(answer.body)
        if answer.status == 401:
            detail = f"the service needs a token: set {TOKEN_ENV} to the token it was started with"
        return describe_error(answer.status, detail)

    def _auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._token}"} if self._token else {}

    def _url(self, path_or_url: str) -> str:
        return path_or_url if "://" in path_or_url else self.base_url + path_or_url

    def _or_fallback(self, what: str, remote: Callable[[], T], local: Callable[[], T]) -> T:
        where = f"analysis service at {self.base_url}"
        left = self._unreachable_until - time.monotonic()
        if left > 0:
            reason = f"{self.last_failure} (not retried for another {left:.0f} s)"
            warn_fallback(where, what, reason, self.fallback.name)
            return local()
        try:
            result = remote()
        except HttpFailure as failure:
            # The URL is in `where`; the failing endpoint only when it adds something.
            path = failure.url.removeprefix(self.base_url).partition("?")[0]
            self.last_failure = f"{path}: {failure.reason}" if path else failure.reason
            if failure.unreachable:
                self._unreachable_until = time.monotonic() + self.retry_after_s
            warn_fallback(where, what, self.last_failure, self.fallback.name)
            return local()
        self.last_failure = None
        return result


def _validated(model: type[Answer], body: Any, url: str, what: str) -> Answer:
    """``body`` as ``model``; an answer that is not one fails naming what was wrong with it."""
    try:
        return model.model_validate(body)
    except ValidationError as error:
        raise HttpFailure(url, f"malformed answer: {what} ({_problems(error)})") from None


def _problems(error: ValidationError, shown: int = 3) -> str:
    """The first few problems of a validation error, as ``where: what`` phrases."""
    problems = []
    for problem in error.errors()[:shown]:
        where = ".".join(str(part) for part in problem["loc"])
        problems.append(f"{where}: {problem['msg']}" if where else str(problem["msg"]))
    more = error.error_count() - shown
    return "; ".join(problems) + (f"; and {more} more" if more > 0 else "")


def _name_local_trace(structured: StructuredSummary, trace_path: Path) -> None:
    """Put the local path where the service wrote the upload's name, as a local summary has."""
    # Only the lists are checked on arrival: the sections may be missing or of another shape.
    sections: list[object] = [structured.get("trace"), structured.get("breakdown")]
    for section in sections:
        if isinstance(section, dict) and section.get("path") == trace_path.name:
            section["path"] = str(trace_path)
    for finding in structured["bottlenecks"]:
        if (
            isinstance(finding, dict)
            and finding.get("subject_kind") == "trace"
            and finding.get("subject") == trace_path.name
        ):
            finding["subject"] = str(trace_path)


def _retry_after(answer: JsonAnswer) -> float:
    try:
        return min(max(float(answer.headers.get("retry-after", "1")), 0.1), 10.0)
    except ValueError:
        return 1.0


__all__ = ["TOKEN_ENV", "RemoteProvider"]
