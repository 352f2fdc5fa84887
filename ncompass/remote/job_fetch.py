"""``ncompass jobs fetch``: bring an ended job's traces home and merge its ranks.

The fetch step (:func:`fetch_traces`) is shared with ``ncompass submit``, which fetches right
after following the job (:func:`ncompass.remote.submission.collect`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ncompass._format import format_size
from ncompass.capture.trace_files import trace_dir
from ncompass.remote.address import resolve_cluster
from ncompass.remote.config import ConfigFile, load_config
from ncompass.remote.dashboard import Dashboard
from ncompass.remote.errors import JobNotFoundError, RemoteError
from ncompass.remote.fetch import FetchReport, fetch_job
from ncompass.remote.rank_traces import merge_ranks
from ncompass.remote.reporter import Reporter

# how long a fetch looks for the packs of a job that was stopped (its ranks pack their traces
# after Ray has marked it ended)
STOPPED_PACK_SETTLE_S = 20.0


@dataclass(frozen=True)
class FetchedJob:
    """The traces of an ended job, here.

    Attributes:
        report: What the fetch found and did.
        merged: The merged timeline of its ranks, if there are several.
    """

    report: FetchReport
    merged: Path | None


def fetch_ended_job(
    job_id: str,
    reporter: Reporter,
    *,
    address: str | None = None,
    output_dir: Path | None = None,
    settings: ConfigFile | None = None,
) -> FetchedJob:
    """Fetch the traces of ``job_id`` into ``<trace folder>/<job id>/`` and merge its ranks.

    Resumes an interrupted fetch and overwrites nothing (see :mod:`ncompass.remote.fetch`).

    Raises:
        JobNotFoundError: the cluster has no such job.
        RemoteError: the job has not ended yet, or left nothing to fetch.
        NcompassError: the fetch or the merge failed (the message names the file or address).
        KeyboardInterrupt: the fetch was interrupted, after telling how to resume it.
    """
    cluster = resolve_cluster(address, settings or load_config())
    dashboard = Dashboard(cluster)
    status = dashboard.job_status(job_id)
    if status is None:
        raise JobNotFoundError(
            f"no job {job_id} on the Ray cluster at {cluster.url}; `ncompass jobs list` shows "
            "the jobs it has"
        )
    if status in ("PENDING", "RUNNING"):
        raise RemoteError(
            f"job {job_id} is {status}: its traces are packed when it ends. Follow it with "
            f"`ncompass jobs logs {job_id} --follow`, then fetch again"
        )
    job_dir = trace_dir(output_dir).resolve() / job_id
    try:
        # a stopped job's ranks may still be packing their traces when Ray marks it ended
        settle_s = STOPPED_PACK_SETTLE_S if status == "STOPPED" else 0.0
        report = fetch_traces(dashboard, job_id, job_dir, reporter, settle_s=settle_s)
    except KeyboardInterrupt:
        reporter.status(
            f"ncompass: fetch interrupted; run `ncompass jobs fetch {job_id}` again to resume"
        )
        raise
    return FetchedJob(report, merge_ranks(report))


def fetch_traces(
    dashboard: Dashboard, job_id: str, job_dir: Path, reporter: Reporter, *, settle_s: float = 0.0
) -> FetchReport:
    """Fetch the job's files with progress on ``reporter``, then say what the fetch did.

    Raises:
        RemoteError: as :func:`ncompass.remote.fetch.fetch_job`.
    """
    report = fetch_job(dashboard, job_id, job_dir, on_chunk=reporter.progress, settle_s=settle_s)
    reporter.status(describe_fetch(report))
    return report


def describe_fetch(report: FetchReport) -> str:
    """One line on what a fetch did."""
    files = len(report.local_paths)
    counted = f"{files} file{'s' if files != 1 else ''} ({format_size(report.total_bytes)})"
    if report.present and not report.written:
        verb, folder = ("are" if files != 1 else "is"), report.job_dir
        return f"ncompass: nothing new to fetch: the job's {counted} {verb} already in {folder}"
    parts = [counted]
    if report.present:
        parts.append(f"{len(report.present)} already here")
    if report.chunks_reused:
        parts.append(f"resumed: {report.chunks_reused} chunks were already here")
    line = f"ncompass: fetched {', '.join(parts)} into {report.job_dir}"
    for kept, saved in report.diverted:
        line += f"\nncompass: {kept} differs from the job's copy and was kept; the job's is {saved}"
    return line


__all__ = [
    "STOPPED_PACK_SETTLE_S",
    "FetchedJob",
    "describe_fetch",
    "fetch_ended_job",
    "fetch_traces",
]
