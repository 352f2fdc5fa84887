"""A multi-process CPU-only run (a real two-rank gloo job) reads as CPU time, not GPU zeros.

``breakdown`` lists the processes' CPU time without columns of 0.0 µs GPU time, the summary
page has one "Ranks" heading, and the timeline keeps each rank's marker lanes apart.
"""

from __future__ import annotations

import re
from pathlib import Path

from click.testing import CliRunner

from ncompass.analysis.summary import summarize_trace
from ncompass.cli import ncompass_cli
from tests.analysis.test_stragglers import gloo_run  # noqa: F401 - the real run, a fixture


def test_breakdown_lists_cpu_time_per_process_only(gloo_run: Path) -> None:  # noqa: F811
    result = CliRunner().invoke(ncompass_cli, ["breakdown", str(gloo_run / "out" / "run.json")])
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert "processes of run.json: CPU time only (no GPU events)" in text
    after = text[text.index("(no GPU events)") + len("(no GPU events)") :]
    assert "0.0 µs      0.0 µs" not in after  # no GPU span/compute columns
    assert "compute" not in after and "GPU events" not in after
    assert "ranks of run.json" not in after
    assert re.search(r"rank 0 \(\d+\)\s+\S+ m?s", after)


def test_page_has_one_ranks_heading_and_no_gpu_columns(
    gloo_run: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    page = tmp_path / "run.html"
    result = CliRunner().invoke(
        ncompass_cli, ["summarize", str(gloo_run / "out" / "run.json"), "--html", str(page)]
    )
    assert result.exit_code == 0, result.output
    html = page.read_text()
    headings = re.findall(r"<h[1-4]>([^<]*)</h[1-4]>", html)
    assert [heading for heading in headings if heading.startswith("Ranks")] == ["Ranks (2)"]
    assert "<th>GPU span</th>" not in html


def test_timeline_lanes_are_per_rank(gloo_run: Path) -> None:  # noqa: F811
    lanes = summarize_trace(gloo_run / "out" / "run.json")["structured"]["timeline"]["lanes"]
    names = {lane["name"] for lane in lanes}
    assert {"rank 0: work.compute", "rank 1: work.compute"} <= names
    assert "work.compute" not in names


def test_the_launchers_wait_is_not_program_time(gloo_run: Path) -> None:  # noqa: F811
    summary = summarize_trace(gloo_run / "out" / "run.json")
    trace = summary["structured"]["trace"]
    processes = summary["structured"]["run"]["processes"]
    ranks = [row for row in processes if row["rank"] is not None]
    program = trace["program_span_us"]
    # the ranks run at the same time: their union is at least the longest and at most the sum
    assert max(row["wall_us"] for row in ranks) <= program <= sum(row["wall_us"] for row in ranks)
    assert program < trace["cpu_wall_us"]
    assert (
        "is process launch, start-up before the profiled code and teardown" in (summary["markdown"])
    )
    assert "CPU share: a marker's CPU total over the whole CPU wall time" in summary["markdown"]
