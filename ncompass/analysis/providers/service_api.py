"""Request and response bodies of the analysis service's HTTP API (version 1).

One module for both sides: ``ncompass serve`` (:mod:`ncompass.service`) answers with these
models and :class:`~ncompass.analysis.providers.remote.RemoteProvider` validates the answers with
them. It sits under ``analysis.providers`` because the client may not import the service (the
service is the layer above). The client reads answers through the small base models
(:class:`ServiceHello`, :class:`UploadReceipt`, :class:`JobStatus`): they hold what a client
relies on, so a service that adds fields stays compatible.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from typing_extensions import Self

API_VERSION = 1

JobKind = Literal["summarize", "analyze", "filter", "propose-markers"]
JobState = Literal["queued", "running", "done", "failed"]
# trace: the uploaded trace cannot be read; input: the request names something that cannot be
# used; internal: the service failed (clients fall back to their own engine).
ErrorKind = Literal["trace", "input", "internal"]

# The summary's lists a client may rely on (the rest of ``structured`` is free to grow).
SUMMARY_LISTS = ("operations", "bottlenecks", "recommendations")


class _Body(BaseModel):
    # Unknown keys are errors: a misspelt option should not be silently ignored.
    model_config = ConfigDict(extra="forbid")


class UploadLimits(BaseModel):
    """The sizes a client checks before sending a trace or a request."""

    max_upload_bytes: int
    max_request_bytes: int


class LimitsInfo(UploadLimits):
    """The bounds a client should respect before sending anything."""

    max_storage_bytes: int
    retention_s: float
    max_queued_jobs: int
    # newer fields: an older service does not send them
    max_inflated_bytes: int | None = None
    job_timeout_s: float | None = None
    workers: int | None = None


class ServiceHello(BaseModel):
    """What a client reads from ``GET /v1/health``: who answers, in which API, with what limits."""

    service: Literal["ncompass"] = "ncompass"
    api: int = API_VERSION
    auth: bool = Field(False, description="Whether requests other than health need a bearer token.")
    limits: UploadLimits


class HealthInfo(ServiceHello):
    """``GET /v1/health``: the service is up, what it runs and what it accepts."""

    status: Literal["ok"] = "ok"
    version: str
    provider: str = Field(description="The analysis provider jobs run with (e.g. 'builtin').")
    auth: bool = Field(description="Whether requests other than health need a bearer token.")
    limits: LimitsInfo
    jobs: dict[str, int] = Field(description="Jobs by status.")


class UploadReceipt(BaseModel):
    """What a client reads from ``POST /v1/uploads``: the id to name the trace by."""

    upload_id: str


class UploadInfo(UploadReceipt):
    """``POST /v1/uploads``: the stored trace, referenced by ``upload_id`` from then on."""

    name: str
    bytes: int
    gzip: bool
    expires_in_s: float


class SummarizeRequest(_Body):
    """Summarize an uploaded trace."""

    upload_id: str
    top: int = Field(20, ge=1, le=1000, description="Markers, kernels and operators listed.")


class AnalyzeRequest(SummarizeRequest):
    """Summarize an uploaded trace around what the user asked."""

    feedback_context: dict[str, Any] = Field(
        description="``feedback_text``, ``target_module`` (and any other keys) of the question."
    )


class FilterRequest(_Body):
    """Filter an uploaded trace down to its markers (and what they launched)."""

    upload_id: str
    include_cuda_kernels: bool = True
    include_direct_children: bool = False
    min_duration_us: float = Field(0.0, ge=0.0, allow_inf_nan=False)
    gzip: bool = Field(False, description="Compress the result (.json.gz).")


class ProposeMarkersRequest(_Body):
    """Ask the service's provider for the next markers (see ``MarkerRequest``)."""

    spec: dict[str, Any]
    summary: dict[str, Any]
    markers: list[dict[str, Any]]
    feedback: dict[str, Any] | None = None
    sources: dict[str, dict[str, str]] = Field(default_factory=dict)


class JobStatus(BaseModel):
    """What a client reads from a job: where it stands and, once done, where its result is."""

    job_id: str
    status: JobState
    error: str | None = None
    error_kind: ErrorKind | None = None
    result_url: str | None = Field(
        None, description="Where to download the result once the job is done."
    )

    @model_validator(mode="after")
    def _done_has_result(self) -> Self:
        if self.status == "done" and self.result_url is None:
            raise ValueError("a done job needs a result_url")
        return self


class JobInfo(JobStatus):
    """A job and where it stands; poll ``GET /v1/jobs/{job_id}`` until ``done`` or ``failed``."""

    kind: JobKind
    upload_id: str | None = None
    created_at: float
    started_at: float | None = None
    finished_at: float | None = None


class ProposalResult(BaseModel):
    """The result of a ``propose-markers`` job: version 1 target dicts, or null (no proposal)."""

    targets: list[dict[str, Any]] | None


class SummaryResult(BaseModel):
    """The result of a ``summarize`` or ``analyze`` job (the seed's summary shape, see
    :class:`~ncompass.analysis.summary_types.Summary`)."""

    markdown: str
    structured: dict[str, Any]

    @field_validator("structured")
    @classmethod
    def _has_lists(cls, structured: dict[str, Any]) -> dict[str, Any]:
        missing = [key for key in SUMMARY_LISTS if not isinstance(structured.get(key), list)]
        if missing:
            raise ValueError(f"no list {', '.join(repr(key) for key in missing)}")
        return structured


class ErrorInfo(BaseModel):
    """Every error answer: one message saying what is wrong and what to do."""

    detail: str


__all__ = [
    "API_VERSION",
    "SUMMARY_LISTS",
    "AnalyzeRequest",
    "ErrorInfo",
    "ErrorKind",
    "FilterRequest",
    "HealthInfo",
    "JobInfo",
    "JobKind",
    "JobState",
    "JobStatus",
    "LimitsInfo",
    "ProposalResult",
    "ProposeMarkersRequest",
    "ServiceHello",
    "SummarizeRequest",
    "SummaryResult",
    "UploadInfo",
    "UploadLimits",
    "UploadReceipt",
]
