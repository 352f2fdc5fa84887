"""After a fetch: the ranks' traces merged into one timeline, one process group per rank, and
compared side by side when they hold no GPU time to break down."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ncompass._files import move_if_absent, removed_on_error, temporary_path
from ncompass._format import format_duration
from ncompass.remote.errors import RemoteError
from ncompass.remote.fetch import FetchReport

if TYPE_CHECKING:
    from ncompass.analysis.summary_types import Summary


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
    merged = merge_traces([path for _, path in traces], temporary_path(output))
    try:
        with removed_on_error(merged):
            if not move_if_absent(merged, output):  # another fetch merged meanwhile
                merged.unlink()
    except OSError as error:
        raise RemoteError(f"{output}: cannot write the merged trace ({error.strerror})") from None
    return output


def cpu_by_rank(summaries: Sequence[tuple[int, Summary]], top: int = 10) -> list[str]:
    """Lines of a table: each marker's CPU time in each rank, then each rank's CPU wall time.

    For runs without GPU events (the GPU breakdown is empty): the markers whose CPU time is
    largest in any rank, at most ``top``; a marker a rank never ran shows ``-``.

    Args:
        summaries: ``(rank, summary)`` of every rank, as ``summarize_trace`` returns them.
        top: How many markers.
    """
    totals: dict[str, dict[int, float]] = {}
    for rank, summary in summaries:
        for marker in summary["structured"]["markers"]:
            totals.setdefault(marker["name"], {})[rank] = marker["cpu_total_us"]
    names = sorted(totals, key=lambda name: -max(totals[name].values()))[:top]
    ranks = [rank for rank, _ in summaries]
    width = min(40, max([len("CPU wall time"), *(len(name) for name in names)]))
    lines = [f"{'marker (CPU total)':<{width}} " + " ".join(f"{f'rank {r}':>11}" for r in ranks)]
    for name in names:
        cells = (totals[name].get(rank) for rank in ranks)
        row = " ".join(
            f"{format_duration(cell) if cell is not None else '-':>11}" for cell in cells
        )
        lines.append(f"{name[:width]:<{width}} {row}")
    walls = (summary["structured"]["trace"]["cpu_wall_us"] for _, summary in summaries)
    lines.append(
        f"{'CPU wall time':<{width}} " + " ".join(f"{format_duration(w):>11}" for w in walls)
    )
    return lines


__all__ = ["cpu_by_rank", "merge_ranks", "merged_trace_path"]
