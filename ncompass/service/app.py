"""The FastAPI application of ``ncompass serve``: uploads, jobs, results, health."""

from __future__ import annotations

import hmac
import shutil
import tempfile
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Header, HTTPException, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.openapi.docs import (
    get_redoc_html,
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse

from ncompass._version import __version__
from ncompass.analysis.providers.base import AnalysisProvider
from ncompass.analysis.providers.service_api import (
    AnalyzeRequest,
    ErrorInfo,
    FilterRequest,
    HealthInfo,
    JobInfo,
    JobKind,
    LimitsInfo,
    ProposalResult,
    ProposeMarkersRequest,
    SummarizeRequest,
    SummaryResult,
    UploadInfo,
)
from ncompass.service.body_limit import BodySizeLimit
from ncompass.service.host_check import AllowedHosts, HostCheck
from ncompass.service.inflated_size import InflatesTooLarge, NotGzip
from ncompass.service.jobs import Job, JobBoard, QueueFull, UnknownUpload
from ncompass.service.json_route import CheckedJsonRoute
from ncompass.service.limits import ServiceLimits
from ncompass.service.origin_check import OriginCheck, form_content_type
from ncompass.service.storage import NotATrace, StorageFull, TraceStore, is_id

_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorInfo} for code in (401, 404, 409, 410, 413, 415, 429, 507)
}
_RAW_TRACE_BODY = {
    "requestBody": {
        "required": True,
        "description": "The trace file as is: JSON, or gzip-compressed JSON.",
        "content": {
            media: {"schema": {"type": "string", "format": "binary"}}
            for media in ("application/octet-stream", "application/json", "application/gzip")
        },
    }
}


def create_app(
    *,
    limits: ServiceLimits | None = None,
    storage_dir: Path | None = None,
    provider: AnalysisProvider | None = None,
    token: str | None = None,
    host: str = "127.0.0.1",
    allow_hosts: tuple[str, ...] = (),
) -> FastAPI:
    """Build the service.

    Args:
        limits: Request sizes, storage budget, retention, queue; defaults otherwise.
        storage_dir: Where uploads and results go; a temporary folder (deleted on shutdown)
            when None.
        provider: What runs the jobs; the local provider from the environment when None
            (built-in engine, with the LLM narrative when ``NCOMPASS_LLM_URL`` is set).
        token: When given, every request but health needs ``Authorization: Bearer <token>``
            (the API's documentation, ``/docs`` and ``/openapi.json``, too).
        host: The address the service listens on; requests must name it, ``localhost`` or one
            of ``allow_hosts`` in their ``Host`` header (anything else is DNS rebinding).
        allow_hosts: More host names clients may use (``--allow-host``).

    Raises:
        StorageFolderError: ``storage_dir`` holds files the service did not write.
    """
    limits = limits or ServiceLimits()
    if provider is None:
        from ncompass.analysis.providers.select import make_local_provider

        provider = make_local_provider()
    own_storage = storage_dir is None
    root = (
        Path(tempfile.mkdtemp(prefix="ncompass-service-")) if storage_dir is None else storage_dir
    )
    store = TraceStore(root, limits)
    board = JobBoard(provider, store, limits)
    # With a token, the documentation routes are added below, behind it.
    docs: dict[str, Any] = {"openapi_url": None, "docs_url": None, "redoc_url": None}

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        board.close()
        # Traces are the user's data: nothing outlives the service that was given them.
        store.clear()
        if own_storage:
            shutil.rmtree(root, ignore_errors=True)

    app = FastAPI(
        title="ncompass analysis service",
        version=__version__,
        description=(
            "Upload a Chrome/Kineto trace, then run summarize, analyze (summary around a "
            "question), filter and propose-markers jobs on it and poll them by id."
        ),
        lifespan=lifespan,
        **(docs if token is not None else {}),
    )
    if own_storage:
        # Also when the app is built but never served (e.g. only for its OpenAPI schema).
        weakref.finalize(app, shutil.rmtree, root, True)
    app.add_middleware(BodySizeLimit, limits=limits)
    app.add_middleware(OriginCheck)
    # Added last, so it runs first: a request under a foreign name gets no further.
    app.add_middleware(HostCheck, allowed=AllowedHosts(host, allow_hosts))
    app.router.route_class = CheckedJsonRoute
    app.state.store = store
    app.state.board = board
    authorized = [Depends(_bearer_check(token))]

    @app.get("/v1/health", response_model=HealthInfo, tags=["service"])
    def health() -> HealthInfo:
        """Whether the service is up, what it runs and what it accepts (no token needed)."""
        return HealthInfo(
            version=__version__,
            provider=provider.name,
            auth=token is not None,
            limits=LimitsInfo(
                max_upload_bytes=limits.max_upload_bytes,
                max_request_bytes=limits.max_request_bytes,
                max_storage_bytes=limits.max_storage_bytes,
                retention_s=limits.retention_s,
                max_queued_jobs=limits.max_queued_jobs,
                max_inflated_bytes=limits.max_inflated_bytes,
                job_timeout_s=limits.job_timeout_s,
                workers=limits.workers,
            ),
            jobs=board.counts(),
        )

    @app.post(
        "/v1/uploads",
        status_code=201,
        response_model=UploadInfo,
        responses=_ERRORS,
        openapi_extra=_RAW_TRACE_BODY,
        dependencies=authorized,
        tags=["uploads"],
    )
    async def upload_trace(
        request: Request,
        name: Annotated[
            str | None,
            Query(max_length=255, description="The trace's file name (its base name is kept)."),
        ] = None,
    ) -> UploadInfo:
        """Store a trace sent as the raw request body (streamed to disk, size bounded)."""
        form = form_content_type(request.headers.get("content-type"))
        if form is not None:
            raise HTTPException(
                415,
                f"an upload sent as {form} is what a web page's form can send: send the trace "
                "as application/octet-stream, application/json or application/gzip (curl: -H "
                "'Content-Type: application/octet-stream')",
            )
        store.sweep()
        sink = store.open_upload(name)
        try:
            # Chunks are written as they arrive: memory stays flat whatever the trace's size.
            async for chunk in request.stream():
                if sink.inflating:
                    # Inflating a chunk may take a while (1,000:1 is possible): off the event
                    # loop, so other requests are answered meanwhile.
                    await run_in_threadpool(sink.write, chunk)
                else:
                    sink.write(chunk)
            item = sink.commit()
        except StorageFull as error:
            sink.discard()
            raise HTTPException(507, str(error)) from error
        except NotATrace as error:
            raise HTTPException(415, str(error)) from error
        except InflatesTooLarge as error:
            sink.discard()
            raise HTTPException(413, str(error)) from error
        except NotGzip as error:
            sink.discard()
            raise HTTPException(415, str(error)) from error
        except BaseException:
            sink.discard()
            raise
        return UploadInfo(
            upload_id=item.item_id,
            name=item.path.name,
            bytes=item.size,
            gzip=item.gzip,
            expires_in_s=limits.retention_s,
        )

    @app.delete(
        "/v1/uploads/{upload_id}",
        status_code=204,
        responses=_ERRORS,
        dependencies=authorized,
        tags=["uploads"],
    )
    def delete_upload(upload_id: str) -> Response:
        """Delete an upload now instead of waiting for it to expire."""
        if not is_id(upload_id) or store.get(upload_id, "upload") is None:
            raise HTTPException(404, f"no upload {upload_id} on this service")
        if not store.delete(upload_id):
            raise HTTPException(409, f"upload {upload_id} is in use by a job; retry later")
        return Response(status_code=204)

    def submit(kind: JobKind, upload_id: str | None, params: dict[str, Any]) -> JobInfo:
        if upload_id is not None and not is_id(upload_id):
            raise HTTPException(404, f"no upload {upload_id} on this service")
        try:
            return _job_info(board.submit(kind, upload_id, params))
        except UnknownUpload as error:
            raise HTTPException(404, str(error)) from error
        except QueueFull as error:
            raise HTTPException(429, str(error), headers={"Retry-After": "2"}) from error

    job_route: dict[str, Any] = {
        "status_code": 202,
        "response_model": JobInfo,
        "responses": _ERRORS,
        "dependencies": authorized,
        "tags": ["jobs"],
    }

    @app.post("/v1/jobs/summarize", **job_route)
    def summarize(body: SummarizeRequest) -> JobInfo:
        """Summarize an uploaded trace; the result is ``{"markdown", "structured"}``."""
        return submit("summarize", body.upload_id, {"top": body.top})

    @app.post("/v1/jobs/analyze", **job_route)
    def analyze(body: AnalyzeRequest) -> JobInfo:
        """Summarize an uploaded trace around the user's question (``feedback_context``)."""
        params = {"top": body.top, "feedback_context": body.feedback_context}
        return submit("analyze", body.upload_id, params)

    @app.post("/v1/jobs/filter", **job_route)
    def filter_trace(body: FilterRequest) -> JobInfo:
        """Keep the markers of an uploaded trace (and what they launched); the result is a
        trace file."""
        return submit("filter", body.upload_id, body.model_dump(exclude={"upload_id"}))

    @app.post("/v1/jobs/propose-markers", **job_route)
    def propose_markers(body: ProposeMarkersRequest) -> JobInfo:
        """Ask for the next markers; the result is ``{"targets": [...] | null}``."""
        return submit("propose-markers", None, body.model_dump())

    @app.get(
        "/v1/jobs/{job_id}",
        response_model=JobInfo,
        responses=_ERRORS,
        dependencies=authorized,
        tags=["jobs"],
    )
    def job_status(job_id: str) -> JobInfo:
        """Where a job stands: queued, running, done or failed (with the error)."""
        return _job_info(_find_job(board, job_id))

    @app.get(
        "/v1/jobs/{job_id}/result",
        response_class=FileResponse,
        responses={
            200: {
                "description": "A summary, a proposal, or the filtered trace file.",
                "content": {
                    "application/json": {
                        "schema": {
                            "anyOf": [
                                {"$ref": "#/components/schemas/SummaryResult"},
                                {"$ref": "#/components/schemas/ProposalResult"},
                            ]
                        }
                    },
                    "application/gzip": {"schema": {"type": "string", "format": "binary"}},
                },
            },
            **_ERRORS,
        },
        dependencies=authorized,
        tags=["jobs"],
    )
    def job_result(job_id: str) -> FileResponse:
        """Download a finished job's result."""
        job = _find_job(board, job_id)
        if job.status == "failed":
            raise HTTPException(409, f"job {job_id} failed: {job.error}")
        if job.status != "done":
            raise HTTPException(409, f"job {job_id} is {job.status}; poll it until it is done")
        item = store.get(job_id, "result")
        if item is None:
            raise HTTPException(410, f"the result of job {job_id} expired; run the job again")
        return FileResponse(item.path, media_type=job.media_type, filename=item.path.name)

    # Referenced from the result's documented content; registered so the schema stays whole.
    _register_schemas(app, [SummaryResult, ProposalResult])
    if token is not None:
        _add_guarded_docs(app, authorized)
    return app


def _add_guarded_docs(app: FastAPI, authorized: list[Any]) -> None:
    """FastAPI's documentation routes, behind the token like the API they describe."""
    guarded: dict[str, Any] = {"dependencies": authorized, "include_in_schema": False}

    @app.get("/openapi.json", **guarded)
    def openapi() -> JSONResponse:
        return JSONResponse(app.openapi())

    @app.get("/docs", **guarded)
    def swagger() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url="/openapi.json",
            title=f"{app.title} - Swagger UI",
            oauth2_redirect_url="/docs/oauth2-redirect",
        )

    @app.get("/docs/oauth2-redirect", **guarded)
    def swagger_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @app.get("/redoc", **guarded)
    def redoc() -> HTMLResponse:
        return get_redoc_html(openapi_url="/openapi.json", title=f"{app.title} - ReDoc")


def _find_job(board: JobBoard, job_id: str) -> Job:
    job = board.get(job_id) if is_id(job_id) else None
    if job is None:
        raise HTTPException(404, f"no job {job_id} on this service (unknown, or forgotten)")
    return job


def _job_info(job: Job) -> JobInfo:
    return JobInfo(
        job_id=job.job_id,
        kind=job.kind,
        status=job.status,
        upload_id=job.upload_id,
        error=job.error,
        error_kind=job.error_kind,
        created_at=job.created_at,
        started_at=job.started_at,
        finished_at=job.finished_at,
        result_url=f"/v1/jobs/{job.job_id}/result" if job.status == "done" else None,
    )


def _bearer_check(token: str | None) -> Any:
    async def check(authorization: Annotated[str | None, Header()] = None) -> None:
        if token is None:
            return
        scheme, _, given = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.encode(), token.encode()):
            raise HTTPException(
                401,
                "this service needs a token: set NCOMPASS_ANALYSIS_TOKEN to the token it was "
                "started with",
                headers={"WWW-Authenticate": "Bearer"},
            )

    return check


def _register_schemas(app: FastAPI, models: list[type[Any]]) -> None:
    """Add models that only appear in hand-written response docs to the OpenAPI components."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = build()
            components = schema.setdefault("components", {}).setdefault("schemas", {})
            for model in models:
                components.setdefault(model.__name__, model.model_json_schema())
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


__all__ = ["create_app"]
