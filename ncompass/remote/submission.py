"""``ncompass submit``: package, submit, follow, fetch, merge.

1. **Prepare** (no network): the script must be inside the upload folder; specs are loaded and
   staged into it; the folder is collected under its ignore rules, checked against the size
   limit and zipped.
2. **Submit** through Ray's Jobs API: the zip is the job's working folder, the local ncompass
   package a ``py_module``, the requirements a pip environment.
3. **Follow**: the job's output streams here until it ends; Ctrl-C detaches (the job goes on).
4. **Fetch** every node's traces into ``<trace folder>/<job id>/`` and merge the ranks.
"""

from __future__ import annotations

import secrets
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ncompass
from ncompass._format import MIB, format_size
from ncompass.capture.trace_files import safe_name, trace_dir
from ncompass.errors import NcompassError
from ncompass.remote.address import Cluster, resolve_cluster
from ncompass.remote.cluster_python import COMMAND_NOT_FOUND, python_not_found
from ncompass.remote.config import ConfigFile, load_config
from ncompass.remote.dashboard import Dashboard
from ncompass.remote.errors import RemoteError
from ncompass.remote.fetch import FetchReport
from ncompass.remote.job_fetch import describe_fetch, fetch_traces
from ncompass.remote.job_plan import JobPlan, RankLayout, run_arguments
from ncompass.remote.jobs import JobsClient, JobState, require_ray, runtime_environment
from ncompass.remote.rank_traces import merge_ranks
from ncompass.remote.reporter import Reporter
from ncompass.remote.staged_specs import StagedSpec, stage_specs
from ncompass.remote.upload import Upload, check_size, collect_upload, write_archive

PENDING_HINT_AFTER_S = 15.0
DETACHED_EXIT_CODE = 130


@dataclass
class SubmitOptions:
    """What ``ncompass submit`` was asked to do.

    Attributes:
        script: The script to run, a path on this machine inside ``upload_dir``.
        module: Or a module to run (``-m``), importable from the upload folder.
        args: The script's arguments.
        specs: Target spec files (``--config``).
        profiler: ``ncompass run --profiler``.
        run_flags: Other ``ncompass run`` flags (``--record-shapes``, ...).
        address: The cluster (``--address``; else ``$RAY_ADDRESS`` or the settings file).
        gpus: GPUs (ranks) per node; 0 runs one rank with no GPU.
        nodes: Nodes.
        gpu_resource: The Ray resource a GPU is (default: the settings file's, else ``GPU``).
        upload_dir: The folder to upload.
        requirements: A pip requirements file (default: ``requirements.txt`` in the upload
            folder, if there is one).
        app_name: The job's name (default: the script's name).
        trace_name: The trace name (default: the app name).
        output_dir: The local trace folder (default: ``$NCOMPASS_TRACE_DIR`` or ``traces``).
        env: Environment variables for the job.
        max_upload_mb: The upload size limit (default: the settings file's, else 100).
        wait: Follow the job and fetch its traces; False returns once it is submitted.
    """

    script: str | None = None
    module: str | None = None
    args: Sequence[str] = ()
    specs: Sequence[Path] = ()
    profiler: str = "torch"
    run_flags: Sequence[str] = ()
    address: str | None = None
    gpus: int = 1
    nodes: int = 1
    gpu_resource: str | None = None
    upload_dir: Path = Path(".")
    requirements: Path | None = None
    app_name: str | None = None
    trace_name: str | None = None
    output_dir: Path | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    max_upload_mb: float | None = None
    wait: bool = True


@dataclass
class PreparedJob:
    """A job ready to submit: its plan, its upload zipped, its runtime environment."""

    plan: JobPlan
    app_name: str
    upload: Upload
    archive: Path
    specs: list[StagedSpec]
    requirements_file: Path | None
    runtime_env: dict[str, Any]
    job_dir: Path


@dataclass
class SubmitResult:
    """How a submission ended.

    Attributes:
        job_id: The job.
        cluster: Where it ran.
        exit_code: The job's exit code (130 when detached, 0 for a job not waited for).
        state: The job's last known state (None when not waited for).
        job_dir: The local folder of its traces.
        fetch: What was fetched (None if nothing was).
        merged: The merged timeline of its ranks, if there are several.
        problems: What went wrong after the job ran (fetch, merge), already reported.
    """

    job_id: str
    cluster: Cluster
    exit_code: int
    state: JobState | None
    job_dir: Path
    fetch: FetchReport | None = None
    merged: Path | None = None
    problems: list[str] = field(default_factory=list)


def new_job_id(app_name: str) -> str:
    """``APP-YYYYmmdd-HHMMSS-xxxx``: readable, sortable, unique."""
    return f"{safe_name(app_name)}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"


def prepare_job(options: SubmitOptions, settings: ConfigFile, workspace: Path) -> PreparedJob:
    """Check and package everything; nothing touches the network.

    Raises:
        RemoteError: the script is missing or outside the upload folder, a bad layout, a
            requirements file that cannot be read.
        UploadTooLargeError: the upload is over the limit.
        SpecError: a spec is malformed.
    """
    if options.nodes < 1:
        raise RemoteError(f"--nodes must be 1 or more (got {options.nodes})")
    if options.gpus < 0:
        raise RemoteError(f"--gpus must be 0 or more (got {options.gpus})")
    if (options.script is None) == (options.module is None):
        raise RemoteError("give a SCRIPT to run (or -m MODULE)")
    root = options.upload_dir.resolve()
    if not root.is_dir():
        raise RemoteError(f"{options.upload_dir}: the upload folder does not exist")
    script = _script_in_upload(options.script, root) if options.script is not None else None
    app_name = options.app_name or Path(options.script or options.module or "job").stem
    staged = stage_specs([Path(spec) for spec in options.specs], root)
    local_traces = trace_dir(options.output_dir).resolve()
    upload = collect_upload(root, exclude=[local_traces])
    if script is not None and script not in {item.relative for item in upload.files}:
        raise RemoteError(
            f"the script {script} is left out of the upload by an ignore rule (.gitignore, "
            f".ncompassignore or a default); re-include it with a line `!{script}` in "
            f"{root / '.ncompassignore'}"
        )
    limit_mb = options.max_upload_mb or settings.config.max_upload_mb
    check_size(
        upload,
        int(limit_mb * MIB),
        limit_hint=f"raise the limit with --max-upload-mb (or max_upload_mb in {settings.path})",
    )
    requirements_file, requirements = _requirements(options.requirements, root)
    job_id = new_job_id(app_name)
    plan = JobPlan(
        job_id=job_id,
        layout=RankLayout(
            options.nodes, options.gpus, options.gpu_resource or settings.config.gpu_resource
        ),
        trace_name=safe_name(options.trace_name or app_name),
        run_args=run_arguments(
            specs=[spec.archive_path for spec in staged],
            profiler=options.profiler,
            flags=options.run_flags,
            script=script,
            module=options.module,
            args=options.args,
        ),
        python=settings.config.python,
        env=dict(options.env),
    )
    archive = write_archive(
        upload, {spec.archive_path: spec.content for spec in staged}, workspace / f"{job_id}.zip"
    )
    runtime_env = runtime_environment(
        archive=archive,
        ncompass_package=Path(ncompass.__file__).resolve().parent,
        env=plan.environment(),
        requirements=requirements,
    )
    return PreparedJob(
        plan=plan,
        app_name=app_name,
        upload=upload,
        archive=archive,
        specs=staged,
        requirements_file=requirements_file,
        runtime_env=runtime_env,
        job_dir=local_traces / job_id,
    )


def submit(
    options: SubmitOptions, reporter: Reporter, settings: ConfigFile | None = None
) -> SubmitResult:
    """Submit a profiled run to a Ray cluster, follow it, and fetch its traces.

    Raises:
        NcompassError: anything that stops the job from being submitted (the message names
            the file, the address or the job). Problems after the job ran (a failed fetch) are
            reported and recorded in the result instead, with the job's exit code kept.
    """
    require_ray()  # before any work: without Ray, say how to install it first
    settings = settings or load_config()
    for warning in settings.warnings:
        reporter.status(f"warning: {warning}")
    cluster = resolve_cluster(options.address, settings)
    workspace = Path(tempfile.mkdtemp(prefix="ncompass-submit-"))
    try:
        prepared = prepare_job(options, settings, workspace)
        client = JobsClient(cluster)
        mismatch = version_mismatch(client.ray_version)
        if mismatch:
            reporter.status(f"warning: {mismatch}")
        job_id = client.submit(
            job_id=prepared.plan.job_id,
            entrypoint=prepared.plan.entrypoint(),
            runtime_env=prepared.runtime_env,
            metadata=prepared.plan.metadata(prepared.app_name),
            resources=prepared.plan.entrypoint_resources(),
        )
    finally:
        shutil.rmtree(workspace, ignore_errors=True)
    layout = prepared.plan.layout
    reporter.status(
        f"ncompass: submitted job {job_id} to {cluster.url} ({len(prepared.upload.files)} files, "
        f"{format_size(prepared.upload.total_bytes)}; {layout.world_size} rank"
        f"{'s' if layout.world_size != 1 else ''} on {layout.nodes} node"
        f"{'s' if layout.nodes != 1 else ''})"
    )
    if prepared.requirements_file is not None:
        reporter.status(f"ncompass: the cluster installs {prepared.requirements_file} (pip)")
    result = SubmitResult(job_id, cluster, 0, None, prepared.job_dir)
    if not options.wait:
        return result
    try:
        state = follow(client, job_id, prepared.plan, reporter)
    except KeyboardInterrupt:
        reporter.status(
            f"ncompass: detached; job {job_id} keeps running. Follow it with `ncompass jobs "
            f"logs {job_id} --follow`, stop it with `ncompass jobs stop {job_id}`, and fetch "
            f"its traces with `ncompass jobs fetch {job_id}`"
        )
        result.exit_code = DETACHED_EXIT_CODE
        return result
    result.state = state
    result.exit_code = state.final_exit_code()
    if describe_end(state, reporter, client):
        collect(client, result, reporter)
    return result


def follow(client: JobsClient, job_id: str, plan: JobPlan, reporter: Reporter) -> JobState:
    """Wait for the job to start (saying why it waits, if long), stream its output, return
    its final state."""
    hinted = False

    def while_pending(state: JobState, waited: float) -> None:
        nonlocal hinted
        if hinted or state.status != "PENDING" or waited < PENDING_HINT_AFTER_S:
            return
        hinted = True
        reporter.status(pending_hint(client.cluster, job_id, plan, waited))

    client.wait(job_id, until=lambda state: state.status != "PENDING", on_poll=while_pending)
    client.follow(job_id, reporter.output)
    return client.wait(job_id)


def version_mismatch(cluster_version: str) -> str | None:
    """A warning when this machine's Ray and the cluster's differ in major or minor version."""
    import ray

    ours = str(ray.__version__)
    if ours.split(".")[:2] == cluster_version.split(".")[:2]:
        return None
    return (
        f"the cluster runs Ray {cluster_version} and this machine Ray {ours}; the Jobs API "
        f"usually copes, but if something fails, install ray[default]=={cluster_version} here"
    )


def pending_hint(cluster: Cluster, job_id: str, plan: JobPlan, waited: float) -> str:
    """Why a job may still be pending: what it asks for and what the cluster has."""
    asked = plan.entrypoint_resources() or {"placement": f"{plan.layout.nodes} nodes"}
    try:
        nodes = Dashboard(cluster).nodes()
        totals: dict[str, float] = {}
        for node in nodes:
            if node.alive:
                for key, value in node.resources.items():
                    totals[key] = totals.get(key, 0.0) + value
        has = ", ".join(
            f"{key} {value:g}" for key, value in sorted(totals.items()) if "memory" not in key
        )
    except NcompassError:
        has = "unknown"
    return (
        f"ncompass: job {job_id} has waited {waited:.0f} s to start; it asks for {asked} and "
        f"the cluster has {has} (the runtime environment may also still be installing)"
    )


def describe_end(state: JobState, reporter: Reporter, client: JobsClient | None = None) -> bool:
    """One line on how the job ended, with the reason when it failed before the script.

    Args:
        state: The job's final state.
        reporter: Where to say it.
        client: The cluster's client, to read the output of a job whose shell did not find its
            Python (exit code 127).

    Returns:
        Whether the job got as far as running its ranks (so it may have traces to fetch).
    """
    if state.status == "SUCCEEDED":
        reporter.status(f"ncompass: job {state.job_id} succeeded")
        return True
    code = state.final_exit_code()
    no_python = _python_not_found(state, client)
    if state.exit_code is None and state.status == "FAILED":
        reason = state.message.strip().splitlines()[0] if state.message.strip() else "no reason"
        reporter.status(f"ncompass: job {state.job_id} failed before its script ran: {reason}")
        return True  # a node lost mid-run fails the job this way too: look for its traces
    if no_python is not None:
        reporter.status(
            f"ncompass: job {state.job_id} failed before its script ran (exit code {code}): "
            f"{no_python}"
        )
        return False
    reporter.status(
        f"ncompass: job {state.job_id} {state.status.lower()} (exit code {code}); its whole "
        f"output: `ncompass jobs logs {state.job_id}`"
    )
    return True


def _python_not_found(state: JobState, client: JobsClient | None) -> str | None:
    if client is None or state.exit_code != COMMAND_NOT_FOUND:
        return None
    try:
        logs = client.logs(state.job_id)
    except NcompassError:
        return None
    return python_not_found(state.exit_code, state.entrypoint, logs)


def collect(client: JobsClient, result: SubmitResult, reporter: Reporter) -> None:
    """Fetch the job's traces and merge its ranks; problems are reported, not raised."""
    try:
        report = fetch_traces(Dashboard(client.cluster), result.job_id, result.job_dir, reporter)
    except NcompassError as error:
        result.problems.append(str(error))
        reporter.status(f"ncompass: traces not fetched: {error}")
        return
    except KeyboardInterrupt:
        result.problems.append("fetch interrupted")
        reporter.status(
            f"ncompass: fetch interrupted; `ncompass jobs fetch {result.job_id}` resumes it"
        )
        result.exit_code = DETACHED_EXIT_CODE
        return
    result.fetch = report
    try:
        result.merged = merge_ranks(report)
    except NcompassError as error:
        result.problems.append(str(error))
        reporter.status(f"ncompass: ranks not merged: {error}")


def _script_in_upload(script: str, root: Path) -> str:
    """The script's path inside the upload; ``script`` is relative to here or to the upload."""
    typed = Path(script).expanduser()
    candidates = [typed] if typed.is_absolute() else [typed, root / typed]
    path = next((item.resolve() for item in candidates if item.is_file()), None)
    if path is None:
        raise RemoteError(f"{script}: no such script (looked in {Path.cwd()} and {root})")
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        raise RemoteError(
            f"the script {script} is not inside the upload folder {root}; pass --upload-dir "
            "with a folder that contains it"
        ) from None


def _requirements(explicit: Path | None, root: Path) -> tuple[Path | None, list[str] | None]:
    path = explicit if explicit is not None else root / "requirements.txt"
    if explicit is None and not path.is_file():
        return None, None
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise RemoteError(f"{path}: cannot read the requirements ({error.strerror})") from None
    lines = [line.strip() for line in text.splitlines()]
    requirements = [line for line in lines if line and not line.startswith("#")]
    return path, requirements or None


__all__ = [
    "DETACHED_EXIT_CODE",
    "PreparedJob",
    "Reporter",
    "SubmitOptions",
    "SubmitResult",
    "describe_end",
    "describe_fetch",
    "follow",
    "new_job_id",
    "pending_hint",
    "prepare_job",
    "submit",
    "version_mismatch",
]
