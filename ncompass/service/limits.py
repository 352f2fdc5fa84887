"""How much the analysis service accepts, keeps and runs at once."""

from __future__ import annotations

from dataclasses import dataclass

from ncompass._format import MIB, format_size


@dataclass(frozen=True)
class ServiceLimits:
    """The bounds of one service.

    Attributes:
        max_upload_bytes: Largest trace upload (as sent: gzip counts compressed).
        max_request_bytes: Largest JSON request body (job requests, marker requests with sources).
        max_storage_bytes: Uploads and results kept on disk at most; the oldest ones not in use
            are deleted first when a new upload needs room.
        retention_s: Uploads, results and finished jobs older than this are deleted.
        max_queued_jobs: Jobs waiting to run at most; more are refused with 429.
        max_kept_jobs: Finished job records kept at most (the oldest are forgotten first).
        workers: Jobs that run at the same time.
        max_inflated_bytes: Largest trace as JSON: a gzip upload that inflates past it is
            refused while it arrives.
        job_timeout_s: A job still running after this long is stopped and fails.
    """

    max_upload_bytes: int = 1024 * MIB
    max_request_bytes: int = 16 * MIB
    max_storage_bytes: int = 4096 * MIB
    retention_s: float = 3600.0
    max_queued_jobs: int = 16
    max_kept_jobs: int = 1000
    workers: int = 1
    max_inflated_bytes: int = 1024 * MIB
    job_timeout_s: float = 600.0

    def __post_init__(self) -> None:
        for name in (
            "max_upload_bytes",
            "max_request_bytes",
            "max_storage_bytes",
            "workers",
            "max_inflated_bytes",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.max_upload_bytes > self.max_storage_bytes:
            raise ValueError(
                f"max_upload_bytes ({self.max_upload_bytes}) cannot exceed max_storage_bytes "
                f"({self.max_storage_bytes}): an upload that large could never be stored"
            )
        if self.retention_s <= 0 or self.max_queued_jobs < 1 or self.max_kept_jobs < 1:
            raise ValueError("retention_s, max_queued_jobs and max_kept_jobs must be positive")
        if self.job_timeout_s <= 0:
            raise ValueError(f"job_timeout_s must be positive, got {self.job_timeout_s}")


def too_large_message(limit: int, what: str) -> str:
    """The 413 message: the limit, and what the user can do about it."""
    hint = (
        "filter the trace first (`ncompass filter`), gzip it, or restart the service with a "
        "larger --max-upload-mb"
        if what == "trace upload"
        else "send less (fewer or shorter sources)"
    )
    size = format_size(limit, decimals=0)
    return f"the {what} is larger than this service accepts ({size}): {hint}"


__all__ = ["MIB", "ServiceLimits", "too_large_message"]
