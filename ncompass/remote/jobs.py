"""Ray's Jobs API, behind a small client that speaks ncompass errors.

Ray is imported here, lazily: ``import ncompass`` never imports it, and a missing Ray gives one
line saying how to install it. Every failure names the cluster address (and the job).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ncompass.remote.address import Cluster, check_reachable, unreachable_message
from ncompass.remote.dashboard import Dashboard, http_error
from ncompass.remote.errors import (
    ClusterUnreachableError,
    JobNotFoundError,
    RayNotInstalledError,
    RemoteError,
)
from ncompass.remote.job_plan import METADATA_KEY

TERMINAL = frozenset({"SUCCEEDED", "FAILED", "STOPPED"})
STOPPED_EXIT_CODE = 143  # what a shell reports for a process ended by SIGTERM
_POLL_S = 0.5
# Ray's client logs every package upload at INFO; ncompass says what it uploads itself.
_QUIET_LOGGERS = (
    "ray.dashboard.modules.dashboard_sdk",
    "ray.dashboard.modules.job.sdk",
    "ray._private.runtime_env.packaging",
)


@dataclass(frozen=True)
class JobState:
    """A job as the cluster reports it.

    Attributes:
        job_id: The submission id.
        status: ``PENDING``, ``RUNNING``, ``SUCCEEDED``, ``FAILED`` or ``STOPPED``.
        message: Ray's message (why it failed, for one).
        exit_code: The entrypoint's exit code, once it ran.
        entrypoint: The job's command.
        metadata: The job's metadata (ncompass jobs carry ``ncompass``, ``trace_name``, ...).
        start_time_s: When it started (Unix seconds), if it did.
        end_time_s: When it ended, if it did.
    """

    job_id: str
    status: str
    message: str = ""
    exit_code: int | None = None
    entrypoint: str = ""
    metadata: dict[str, str] = field(default_factory=dict)
    start_time_s: float | None = None
    end_time_s: float | None = None

    @property
    def terminal(self) -> bool:
        """Whether the job has ended."""
        return self.status in TERMINAL

    @property
    def from_ncompass(self) -> bool:
        """Whether ``ncompass submit`` started the job."""
        return METADATA_KEY in self.metadata

    def final_exit_code(self) -> int:
        """The exit code to pass on: the job's own, else 0 / 1 / 143 by status."""
        if self.exit_code is not None:
            return self.exit_code
        if self.status == "SUCCEEDED":
            return 0
        if self.status == "STOPPED":
            return STOPPED_EXIT_CODE
        return 1


def require_ray(command: str = "ncompass submit") -> Any:
    """Ray's ``JobSubmissionClient`` class, keeping the cluster's headers to its address
    (see :mod:`ncompass.remote.ray_client`).

    Raises:
        RayNotInstalledError: Ray (with its ``[default]`` extra) is not installed.
    """
    try:
        from ray.job_submission import JobSubmissionClient
    except ImportError as error:
        raise RayNotInstalledError(command, str(error)) from None
    # requests comes with Ray: imported only once Ray is there.
    from ncompass.remote.ray_client import guarded_client_class

    for name in _QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    return guarded_client_class(JobSubmissionClient)


class JobsClient:
    """Submit, follow, list and stop jobs on one cluster.

    Raises (from the constructor):
        RayNotInstalledError: Ray is not installed.
        ClusterUnreachableError: nothing answers at the address, or it is no Ray dashboard.
        RemoteError: the cluster refuses the token.
    """

    def __init__(self, cluster: Cluster, command: str = "ncompass submit") -> None:
        client_class = require_ray(command)
        self.cluster = cluster
        check_reachable(cluster)
        self.ray_version = Dashboard(cluster).ray_version()
        try:
            self._client = client_class(cluster.url, headers=dict(cluster.headers) or None)
        except Exception as error:
            raise self._translate(error) from None

    def submit(
        self,
        *,
        job_id: str,
        entrypoint: str,
        runtime_env: Mapping[str, Any],
        metadata: Mapping[str, str],
        resources: Mapping[str, Any],
    ) -> str:
        """Submit a job; return its id (the upload happens here)."""
        try:
            submitted: str = self._client.submit_job(
                entrypoint=entrypoint,
                submission_id=job_id,
                runtime_env=dict(runtime_env),
                metadata=dict(metadata),
                **resources,
            )
        except Exception as error:
            raise self._translate(error) from None
        return submitted

    def state(self, job_id: str) -> JobState:
        """The job's current state."""
        try:
            info = self._client.get_job_info(job_id)
        except Exception as error:
            raise self._translate(error, job_id) from None
        return _state(info)

    def jobs(self) -> list[JobState]:
        """Every job the cluster knows, oldest first."""
        try:
            infos = self._client.list_jobs()
        except Exception as error:
            raise self._translate(error) from None
        states = [_state(info) for info in infos]
        return sorted(states, key=lambda state: (state.start_time_s or 0.0, state.job_id))

    def logs(self, job_id: str) -> str:
        """The job's output so far."""
        try:
            text: str = self._client.get_job_logs(job_id)
        except Exception as error:
            raise self._translate(error, job_id) from None
        return text

    def stop(self, job_id: str) -> bool:
        """Ask the job to stop; False when it had already ended."""
        try:
            stopped: bool = self._client.stop_job(job_id)
        except Exception as error:
            raise self._translate(error, job_id) from None
        return stopped

    def wait(
        self,
        job_id: str,
        *,
        until: Callable[[JobState], bool] = lambda state: state.terminal,
        on_poll: Callable[[JobState, float], None] | None = None,
        timeout_s: float | None = None,
    ) -> JobState:
        """Poll the job until ``until(state)`` (default: it ended); return that state."""
        started = time.monotonic()
        while True:
            state = self.state(job_id)
            waited = time.monotonic() - started
            if until(state) or (timeout_s is not None and waited > timeout_s):
                return state
            if on_poll is not None:
                on_poll(state, waited)
            time.sleep(_POLL_S)

    def follow(self, job_id: str, write: Callable[[str], None]) -> None:
        """Stream the job's output to ``write`` as it comes, until the job ends.

        The Jobs API's websocket is used; if it breaks (a proxy that does not pass websockets,
        a dropped connection), the output is polled instead, without repeating what was shown.
        """
        shown = 0

        def counted(chunk: str) -> None:
            nonlocal shown
            shown += len(chunk)
            write(chunk)

        async def tail() -> None:
            async for chunk in self._client.tail_job_logs(job_id):
                counted(chunk)

        # Ray opens the websocket with aiohttp, which would take the cluster's headers along
        # a redirect to another address: when the address redirects there, poll.
        if not getattr(self._client, "left_origin", False):
            try:
                asyncio.run(tail())
                return
            except Exception:  # the websocket failed: poll from where it stopped
                pass
        while True:
            state = self.state(job_id)
            text = self.logs(job_id)
            if len(text) > shown:
                counted(text[shown:])
            if state.terminal:
                return
            time.sleep(_POLL_S)

    def _translate(self, error: Exception, job_id: str | None = None) -> RemoteError:
        text = str(error)
        if isinstance(error, ConnectionError) or "Failed to connect" in text:
            return ClusterUnreachableError(unreachable_message(self.cluster, text))
        if job_id is not None and ("404" in text or "does not exist" in text):
            return JobNotFoundError(
                f"no job {job_id} on the Ray cluster at {self.cluster.url}; "
                "`ncompass jobs list` shows the jobs it has"
            )
        if "401" in text or "403" in text or "Authentication" in text:
            return http_error(self.cluster, 403 if "403" in text else 401, text.splitlines()[0])
        return RemoteError(f"the Ray cluster at {self.cluster.url}: {text.strip()}")


def _state(info: Any) -> JobState:
    status = getattr(info, "status", "")
    return JobState(
        job_id=str(getattr(info, "submission_id", None) or getattr(info, "job_id", "")),
        status=str(getattr(status, "value", status)),
        message=str(getattr(info, "message", "") or ""),
        exit_code=getattr(info, "driver_exit_code", None),
        entrypoint=str(getattr(info, "entrypoint", "") or ""),
        metadata=dict(getattr(info, "metadata", None) or {}),
        start_time_s=_seconds(getattr(info, "start_time", None)),
        end_time_s=_seconds(getattr(info, "end_time", None)),
    )


def _seconds(milliseconds: Any) -> float | None:
    return None if milliseconds is None else float(milliseconds) / 1000.0


def runtime_environment(
    *,
    archive: Path,
    ncompass_package: Path,
    env: Mapping[str, str],
    requirements: list[str] | None,
) -> dict[str, Any]:
    """The job's Ray runtime environment.

    The upload is the working folder; the local ncompass package travels as a ``py_module`` so
    the cluster runs the same ncompass as this machine (its dependencies must be there).
    """
    runtime_env: dict[str, Any] = {
        "working_dir": str(archive),
        "py_modules": [str(ncompass_package)],
        "env_vars": dict(env),
    }
    if requirements:
        runtime_env["pip"] = list(requirements)
    return runtime_env


__all__ = [
    "STOPPED_EXIT_CODE",
    "TERMINAL",
    "JobState",
    "JobsClient",
    "require_ray",
    "runtime_environment",
]
