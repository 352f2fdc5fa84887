"""What submit and jobs fetch show of fetched traces: the same text as the trace commands print.

The fetched traces here are real shared traces, laid out as a fetch leaves them.
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

from click.testing import CliRunner

from ncompass.cli import ncompass_cli
from ncompass.remote.fetch import ChunkProgress, FetchReport
from ncompass.remote.manifest import NodeManifest, RankRecord
from ncompass.remote.trace_overview import show_fetched_traces
from tests.traces.builders import shared_trace

TWO_GPU_RANKS = [
    shared_trace("trace_filter").with_name("sampled_rank-0.json.gz"),
    shared_trace("trace_filter").with_name("sampled_rank-1.json.gz"),
]


class RecordingReporter:
    """Keeps what would go to stderr (status) and stdout (output)."""

    def __init__(self) -> None:
        self.statuses: list[str] = []
        self.stdout = ""

    def status(self, message: str) -> None:
        self.statuses.append(message)

    def output(self, text: str) -> None:
        self.stdout += text

    def progress(self, event: ChunkProgress) -> None:
        raise AssertionError("nothing is fetched here")


def fetched(job_dir: Path, traces: list[Path]) -> FetchReport:
    """A fetch report of one node whose ranks wrote ``traces`` (copied into ``job_dir``)."""
    job_dir.mkdir()
    local_paths, ranks = {}, []
    for rank, trace in enumerate(traces):
        inside = f"job-rank{rank}.json.gz"
        local_paths[inside] = job_dir / inside
        shutil.copy(trace, job_dir / inside)
        ranks.append(RankRecord(rank, rank, 0, inside))
    manifest = NodeManifest("job-1", 0, "node", "job", len(traces), tuple(ranks), (), 0.0)
    return FetchReport(job_dir, [manifest], local_paths)


def command_stdout(*args: str | Path) -> str:
    result = CliRunner().invoke(ncompass_cli, [str(arg) for arg in args])
    assert result.exit_code == 0, result.output
    return result.stdout


def test_one_rank_shows_the_files_and_its_summary(tmp_path: Path) -> None:
    report = fetched(tmp_path / "job", TWO_GPU_RANKS[:1])
    reporter = RecordingReporter()
    show_fetched_traces(report, None, 5, reporter)
    trace = tmp_path / "job" / "job-rank0.json.gz"
    assert reporter.stdout == command_stdout("summarize", trace, "--top", "5")
    assert reporter.statuses[0].startswith(f"  {trace} (")
    assert reporter.statuses[1:] == [f"ncompass: summary of {trace}"]


def test_several_ranks_show_the_breakdown_then_the_first_ranks_summary(tmp_path: Path) -> None:
    report = fetched(tmp_path / "job", TWO_GPU_RANKS)
    merged = tmp_path / "job" / "job-merged.json"
    reporter = RecordingReporter()
    show_fetched_traces(report, merged, 3, reporter)
    first, second = sorted(report.local_paths.values())
    assert reporter.stdout == command_stdout("breakdown", first, second) + command_stdout(
        "summarize", first, "--top", "3"
    )
    assert reporter.statuses[2:] == [
        "ncompass: per-rank breakdown of 2 ranks",
        f"ncompass: summary of rank 0 ({first}); the others: `ncompass summarize TRACE`",
        f"ncompass: merged timeline of all ranks: {merged} (ui.perfetto.dev)",
    ]


def test_ranks_without_gpu_events_are_compared_by_cpu_time(tmp_path: Path) -> None:
    cpu_only = shared_trace("cpu_only")
    data = json.loads(gzip.decompress(cpu_only.read_bytes()))
    data["distributedInfo"]["rank"] += 1  # the same run, as another rank
    other = tmp_path / "other.json.gz"
    other.write_bytes(gzip.compress(json.dumps(data).encode()))
    report = fetched(tmp_path / "job", [cpu_only, other])
    reporter = RecordingReporter()
    show_fetched_traces(report, None, 3, reporter)
    assert "ncompass: no GPU events: CPU time per rank of the longest markers" in reporter.statuses
    assert reporter.stdout.count("no GPU activity (CPU-only trace)") == 1  # no rows of zeros
    table = reporter.stdout.split("marker (CPU total)", 1)[1]
    assert table.split("\n", 1)[0].split() == ["rank", "0", "rank", "1"]
    assert "CPU wall time" in table
