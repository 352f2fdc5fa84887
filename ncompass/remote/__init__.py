"""Remote runs on a Ray cluster: submit a profiled run, follow it, fetch its traces back.

Ray is optional (``pip install 'ncompass[remote]'``) and imported only when a job is submitted
or listed: importing this package never imports it. ``ncompass submit`` and ``ncompass jobs``
are the command line; the same steps are here for Python::

    from ncompass.remote import SubmitOptions, fetch_ended_job, submit

    result = submit(SubmitOptions(script="train.py", specs=[Path("attn.yaml")], gpus=2), reporter)
    result.fetch.rank_traces()   # [(0, Path("traces/<job>/train-rank0.json")), ...]
    result.merged                # traces/<job>/train-merged.json
    fetch_ended_job(result.job_id, reporter)   # later, what `ncompass jobs fetch` does
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ncompass._lazy import lazy_exports

if TYPE_CHECKING:
    from ncompass.remote.address import Cluster, resolve_cluster
    from ncompass.remote.config import RemoteConfig, load_config, save_config
    from ncompass.remote.errors import (
        ClusterUnreachableError,
        JobNotFoundError,
        RayNotInstalledError,
        RemoteError,
        UploadTooLargeError,
    )
    from ncompass.remote.fetch import FetchReport, fetch_job
    from ncompass.remote.job_fetch import FetchedJob, fetch_ended_job
    from ncompass.remote.job_plan import JOB_ID_ENV, REMOTE_ENV, JobPlan, RankLayout
    from ncompass.remote.jobs import JobsClient, JobState
    from ncompass.remote.reporter import Reporter
    from ncompass.remote.submission import SubmitOptions, SubmitResult, submit

# Imported on first use: the job-side modules of this package (``python -m
# ncompass.remote.launch`` on the cluster) must start with the standard library only, and
# nothing here may import Ray.
_LAZY: dict[str, str] = {
    "Cluster": "ncompass.remote.address",
    "resolve_cluster": "ncompass.remote.address",
    "RemoteConfig": "ncompass.remote.config",
    "load_config": "ncompass.remote.config",
    "save_config": "ncompass.remote.config",
    "ClusterUnreachableError": "ncompass.remote.errors",
    "JobNotFoundError": "ncompass.remote.errors",
    "RayNotInstalledError": "ncompass.remote.errors",
    "RemoteError": "ncompass.remote.errors",
    "UploadTooLargeError": "ncompass.remote.errors",
    "FetchReport": "ncompass.remote.fetch",
    "fetch_job": "ncompass.remote.fetch",
    "FetchedJob": "ncompass.remote.job_fetch",
    "fetch_ended_job": "ncompass.remote.job_fetch",
    "JOB_ID_ENV": "ncompass.remote.job_plan",
    "REMOTE_ENV": "ncompass.remote.job_plan",
    "JobPlan": "ncompass.remote.job_plan",
    "RankLayout": "ncompass.remote.job_plan",
    "JobsClient": "ncompass.remote.jobs",
    "JobState": "ncompass.remote.jobs",
    "Reporter": "ncompass.remote.reporter",
    "SubmitOptions": "ncompass.remote.submission",
    "SubmitResult": "ncompass.remote.submission",
    "submit": "ncompass.remote.submission",
}


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())


__all__ = [
    "JOB_ID_ENV",
    "REMOTE_ENV",
    "Cluster",
    "ClusterUnreachableError",
    "FetchReport",
    "FetchedJob",
    "JobNotFoundError",
    "JobPlan",
    "JobState",
    "JobsClient",
    "RankLayout",
    "RayNotInstalledError",
    "RemoteConfig",
    "RemoteError",
    "Reporter",
    "SubmitOptions",
    "SubmitResult",
    "UploadTooLargeError",
    "fetch_ended_job",
    "fetch_job",
    "load_config",
    "resolve_cluster",
    "save_config",
    "submit",
]
