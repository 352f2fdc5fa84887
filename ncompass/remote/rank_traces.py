"""After a fetch: the ranks' traces merged into one timeline, one process group per rank."""

from __future__ import annotations

import os
from pathlib import Path

from ncompass.remote.errors import RemoteError
from ncompass.remote.fetch import FetchReport


def merged_trace_path(job_dir: Path, trace_name: str) -> Path:
    """Where the merged timeline of a job goes."""
    return job_dir / f"{trace_name}-merged.json"


def merge_ranks(report: FetchReport) -> Path | None:
    """Merge the fetched rank traces into ``NAME-merged.json``; None with fewer than two.

    An existing merged file (from an earlier fetch of the same job) is kept as it is.

    Raises:
        TraceError: a rank trace is corrupt.
        RemoteError: the merged file cannot be written.
    """
    traces = report.rank_traces()
    if len(traces) < 2 or not report.manifests:
        return None
    from ncompass.traces.merge import merge_traces

    output = merged_trace_path(report.job_dir, report.manifests[0].trace_name)
    if output.exists():
        return output
    partial = output.with_name(f".{output.stem}.partial.json")
    merge_traces([path for _, path in traces], partial)
    try:
        descriptor = os.open(output, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:  # another fetch merged meanwhile
        partial.unlink(missing_ok=True)
        return output
    except OSError as error:
        raise RemoteError(f"{output}: cannot write the merged trace ({error.strerror})") from None
    os.close(descriptor)
    os.replace(partial, output)
    return output


__all__ = ["merge_ranks", "merged_trace_path"]
