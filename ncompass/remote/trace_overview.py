"""What ``ncompass submit`` and ``ncompass jobs fetch`` show of a job's fetched traces.

The files with their sizes; then the summary of the one rank, or, with several ranks, the
per-rank breakdown (the CPU time per rank when the run had no GPU events) and the summary of
the first rank; then where the merged timeline is.
"""

from __future__ import annotations

from pathlib import Path

from ncompass._format import format_size
from ncompass.analysis.breakdown import breakdown
from ncompass.analysis.breakdown_table import breakdown_lines
from ncompass.analysis.summary import summarize_trace
from ncompass.remote.fetch import FetchReport
from ncompass.remote.rank_traces import cpu_by_rank
from ncompass.remote.reporter import Reporter


def show_fetched_traces(
    report: FetchReport, merged: Path | None, top: int, reporter: Reporter
) -> None:
    """Tell ``reporter`` what was fetched: the files (status), the analysis (output).

    Args:
        report: The fetch.
        merged: The merged timeline of the ranks, if any.
        top: Rows per summary.
        reporter: Where to say it.

    Raises:
        TraceError: a fetched trace cannot be read.
    """
    for local in sorted(report.local_paths.values()):
        reporter.status(f"  {local} ({format_size(local.stat().st_size)})")
    traces = report.rank_traces()
    if len(traces) == 1:
        reporter.status(f"ncompass: summary of {traces[0][1]}")
        reporter.output(summarize_trace(traces[0][1], top=top)["markdown"])
    elif len(traces) > 1:
        reporter.status(f"ncompass: per-rank breakdown of {len(traces)} ranks")
        ranks = breakdown([path for _, path in traces], jobs=None)  # one reader per core
        _output_lines(reporter, breakdown_lines(ranks))
        rank, first = traces[0]
        summary = summarize_trace(first, top=top)
        if summary["structured"]["trace"]["gpu_events"] == 0:
            # A CPU-only run: the GPU breakdown is all zeros; compare the ranks' CPU time.
            others = [(other, summarize_trace(path, top=top)) for other, path in traces[1:]]
            reporter.status("ncompass: no GPU events: CPU time per rank of the longest markers")
            _output_lines(reporter, cpu_by_rank([(rank, summary), *others], top=top))
        reporter.status(
            f"ncompass: summary of rank {rank} ({first}); the others: `ncompass summarize TRACE`"
        )
        reporter.output(summary["markdown"])
    if merged is not None:
        reporter.status(f"ncompass: merged timeline of all ranks: {merged} (ui.perfetto.dev)")


def _output_lines(reporter: Reporter, lines: list[str]) -> None:
    reporter.output("".join(f"{line}\n" for line in lines))


__all__ = ["show_fetched_traces"]
