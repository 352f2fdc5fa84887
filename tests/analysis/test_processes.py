"""summarize, breakdown and compare of a run's merged trace: per process, per rank, in total.

The traces are real: three Python processes (rank 0 starts rank 1, which starts its DataLoader
worker) each record themselves with the torch profiler, and tests/support/run_traces merges
them into the shape ``ncompass run`` writes for a followed run. The GPU cases use two real ranks
of a 128-rank job (Holistic Trace Analysis test data).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner
from pydantic import TypeAdapter

from ncompass.analysis.breakdown import breakdown
from ncompass.analysis.comparison import compare
from ncompass.analysis.ranks import summarize_traces
from ncompass.analysis.summary import summarize_trace
from ncompass.analysis.summary_types import Summary
from ncompass.cli import ncompass_cli
from tests.support.run_traces import default_plan, merge_run, record_runs, with_identity

pytest.importorskip("torch")

_HTA = Path("/work/shared/traces/hta/trace_filter")
ROLES = ["rank 0", "rank 1", "DataLoader worker 0"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two real runs of three processes each (rank 1 eight times the work in the second),
    recorded side by side, each merged into one run trace."""
    root = tmp_path_factory.mktemp("runs")
    before, after = record_runs(
        [(root / "before", default_plan(rank1_work=10)), (root / "after", default_plan(80))]
    )
    return {
        "before": before,
        "after": after,
        "before_run": merge_run(before, root / "before-run.json"),
        "after_run": merge_run(after, root / "after-run.json"),
    }


def _identity(path: Path) -> dict[str, Any]:
    return orjson.loads(path.read_bytes())["ncompass_process"]  # type: ignore[no-any-return]


def test_summary_of_a_run_reports_each_process_and_the_total(runs: dict[str, Any]) -> None:
    summary = summarize_trace(runs["before_run"])
    TypeAdapter(Summary).validate_python(dict(summary), strict=True)  # the declared shape
    structured = summary["structured"]
    markers = {row["name"]: row for row in structured["markers"]}
    # the total as for any trace: every process's markers
    assert markers["train_step"]["calls"] == 6 and markers["load_batch"]["calls"] == 4
    rows = structured["run"]["processes"]
    assert [row["role"] for row in rows] == ROLES
    assert [row["pid"] for row in rows] == [_identity(path)["pid"] for path in runs["before"]]
    assert [row["rank"] for row in rows] == [0, 1, None]
    assert [row["under_rank"] for row in rows] == [0, 1, 1]  # the worker is under its rank
    assert [row["markers"] for row in rows] == [3, 3, 4]
    assert [row["top_markers"][0]["name"] for row in rows] == [
        "train_step",
        "train_step",
        "load_batch",
    ]
    # each process's CPU in markers is its own share of the total
    assert sum(row["marker_cpu_us"] for row in rows) == pytest.approx(
        markers["train_step"]["cpu_total_us"] + markers["load_batch"]["cpu_total_us"]
    )
    assert all(0 < row["marker_cpu_us"] <= row["wall_us"] for row in rows)


def test_ranks_of_a_run_hold_their_workers(runs: dict[str, Any]) -> None:
    ranks = summarize_trace(runs["before_run"])["structured"]["run"]["ranks"]
    assert ranks["label"] == "rank"
    assert [row["label"] for row in ranks["ranks"]] == ["0", "1"]  # the worker is no rank
    assert [row["processes"] for row in ranks["ranks"]] == [
        ["rank 0"],
        ["rank 1", "DataLoader worker 0"],
    ]
    loading = next(row for row in ranks["markers"] if row["name"] == "load_batch")
    assert loading["by_rank_us"]["0"] == 0.0 and loading["by_rank_us"]["1"] > 0
    assert loading["slowest"] == "1"


def test_summarize_command_prints_processes_and_ranks(runs: dict[str, Any], tmp_path: Path) -> None:
    runner = CliRunner()
    page = tmp_path / "run.html"
    result = runner.invoke(
        ncompass_cli, ["summarize", str(runs["before_run"]), "--html", str(page)]
    )
    assert result.exit_code == 0, result.output
    text = result.output
    assert "Run of 3 processes" in text
    assert "## Processes (3)" in text and "## Ranks (2)" in text
    assert "| `DataLoader worker 0` |" in text and "| `rank 1`, `DataLoader worker 0` |" in text
    html = page.read_text()
    assert "<h2>Processes (3)</h2>" in html and "<h2>Ranks (2)</h2>" in html
    assert "DataLoader worker 0" in html
    as_json = runner.invoke(ncompass_cli, ["summarize", "--json", str(runs["before_run"])])
    assert as_json.exit_code == 0, as_json.output
    run = orjson.loads(as_json.output)["structured"]["run"]
    assert [row["role"] for row in run["processes"]] == ROLES


def test_breakdown_of_a_run_per_process_and_rank(runs: dict[str, Any]) -> None:
    result = breakdown([runs["before_run"]])
    values = result.to_dict()
    assert list(values["ranks"]) == ["0"]  # the total, keyed as before
    run = values["runs"]["0"]
    assert [row["role"] for row in run["processes"]] == ROLES
    assert all(row["marker_cpu_us"] > 0 for row in run["processes"])
    assert list(run["ranks"]) == ["0", "1"]
    text = CliRunner().invoke(ncompass_cli, ["breakdown", str(runs["before_run"])])
    assert text.exit_code == 0, text.output
    assert "processes of before-run.json:" in text.output
    assert "DataLoader worker 0" in text.output


def test_a_per_process_trace_is_its_own_rank(runs: dict[str, Any]) -> None:
    rank0, rank1, worker = runs["before"]
    # ncompass_process.rank, not the position: rank 1 given first is still rank 1
    several = summarize_traces([rank1, rank0])["structured"]
    assert [row["label"] for row in several["ranks"]] == ["1", "0"]
    one = summarize_trace(rank1)["structured"]
    assert one["trace"]["rank"] == 1 and "run" not in one
    assert summarize_trace(worker)["structured"]["trace"]["rank"] == 0  # no rank: position 0


def test_compare_matches_processes_by_role_and_counts_one_run_per_file(
    runs: dict[str, Any],
) -> None:
    comparison = compare([runs["before_run"]], [runs["after_run"]])
    processes = {change.name: change for change in comparison.processes}
    assert set(processes) == set(ROLES)
    assert all(change.matched_by == "name" for change in processes.values())
    rank1 = processes["rank 1"]
    assert rank1.before is not None and rank1.after is not None
    assert rank1.before.calls == 3 and rank1.after.calls == 3  # per run: one run a side
    matmuls = next(change for change in comparison.cpu_ops if change.name == "aten::mm")
    assert matmuls.before is not None and matmuls.after is not None
    # every process's calls in the one run of each side: 3x10 + 3x10 + 4x5, then 3x80 for rank 1
    assert (matmuls.before.calls, matmuls.after.calls) == (80, 290)
    steps = comparison.marker("train_step")
    assert steps is not None and steps.before is not None
    assert steps.before.calls == 6  # both ranks' steps are one run's, not two runs'
    values = comparison.to_dict()
    assert [row["name"] for row in values["processes"]] == [c.name for c in comparison.processes]
    assert "## Processes, matched by role" in comparison.to_markdown()
    assert "Processes, matched by role" in comparison.to_html()


def test_compare_of_single_traces_has_no_process_table(runs: dict[str, Any]) -> None:
    comparison = compare([runs["before"][0]], [runs["after"][0]])
    assert comparison.processes == () and "processes" not in comparison.to_dict()


def _hta_run(directory: Path) -> tuple[list[Path], Path]:
    """Two real GPU ranks as the processes of one run: rank 0 the root, rank 1 its child."""
    ranks = []
    for rank, pid in ((0, 4037), (1, 4045)):
        identity = {
            "pid": pid,
            "ppid": 4037 if rank else 1,
            "rank": rank,
            "role": f"rank {rank}",
            "command": "python train.py",
        }
        ranks.append(
            with_identity(
                _HTA / f"sampled_rank-{rank}.json.gz", directory / f"rank{rank}.json", identity
            )
        )
    return ranks, merge_run(ranks, directory / "run.json")


@pytest.mark.skipif(not _HTA.is_dir(), reason="the shared HTA traces are not on this machine")
def test_ranks_of_a_gpu_run_match_the_several_rank_report(tmp_path: Path) -> None:
    ranks, run = _hta_run(tmp_path)
    separate = summarize_traces(ranks)["structured"]
    together = summarize_trace(run)["structured"]["run"]["ranks"]
    keys = ["kernel_span_us", "compute_us", "communication_us", "idle_us", "gpu_events"]
    for alone, within in zip(separate["ranks"], together["ranks"], strict=True):
        assert alone["label"] == within["label"]
        for key in keys:
            assert within[key] == pytest.approx(alone[key]), key  # type: ignore[literal-required]
    assert together["slowest"]["label"] == separate["slowest"]["label"]
    assert [row["name"] for row in together["kernels"]] == [
        row["name"] for row in separate["kernels"]
    ]
    by_file = breakdown(ranks).to_dict()["ranks"]
    per_process = breakdown([run]).to_dict()["runs"]["0"]["processes"]
    for row, rank in zip(per_process, ("0", "1"), strict=True):
        for key in keys:
            assert row[key] == pytest.approx(by_file[rank][key]), key


@pytest.mark.skipif(not _HTA.is_dir(), reason="the shared HTA traces are not on this machine")
def test_a_run_of_gpu_ranks_shows_gpu_time_per_process(tmp_path: Path) -> None:
    _, run = _hta_run(tmp_path)
    rows = summarize_trace(run)["structured"]["run"]["processes"]
    assert all(row["gpu_events"] > 1000 and row["gpu_busy_us"] > 0 for row in rows)
    copy = tmp_path / "copy.json"
    shutil.copy(run, copy)
    text = CliRunner().invoke(ncompass_cli, ["summarize", str(copy)])
    assert "| GPU busy | GPU events |" in text.output
