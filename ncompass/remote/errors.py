"""Errors of remote runs: each names the cluster address, file or job, and what to do."""

from __future__ import annotations

from ncompass.errors import NcompassError

INSTALL_HINT = "pip install 'ncompass[remote]' (or: pip install 'ray[default]')"


class RemoteError(NcompassError):
    """A remote run cannot be prepared, submitted, followed or fetched."""


class RayNotInstalledError(RemoteError):
    """Ray's job client is not installed on this machine."""

    def __init__(self, command: str = "ncompass submit", reason: str | None = None) -> None:
        detail = f" ({reason})" if reason else ""
        super().__init__(f"{command} needs Ray's job client{detail}: {INSTALL_HINT}")


class ClusterUnreachableError(RemoteError):
    """Nothing answers at the cluster address, or it does not speak the Ray Jobs API."""


class UploadTooLargeError(RemoteError):
    """The upload folder is over the size limit after the ignore rules."""


class JobNotFoundError(RemoteError):
    """The cluster has no job with that id."""


__all__ = [
    "INSTALL_HINT",
    "ClusterUnreachableError",
    "JobNotFoundError",
    "RayNotInstalledError",
    "RemoteError",
    "UploadTooLargeError",
]
