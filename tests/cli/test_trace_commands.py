"""``ncompass summarize | breakdown | filter | merge`` on real traces, through the real CLI."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from ncompass.cli import ncompass_cli
from tests.traces.builders import TraceBuilder, record_torch_trace, shared_trace, shared_traces

DESIGN_RANK_KEYS = {"kernel_span_us", "idle_us", "compute_us", "non_compute_us", "gpu_events"}


def run(*args: str | Path) -> tuple[int, str, str]:
    result = CliRunner().invoke(ncompass_cli, [str(arg) for arg in args])
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def torch_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("torch")
    return record_torch_trace(tmp_path_factory.mktemp("torch") / "run.json")


@pytest.mark.parametrize("compressed", [True, False], ids=["json.gz", "json"])
@pytest.mark.parametrize("shared", shared_traces(), ids=lambda path: path.parent.name)
def test_every_command_works_on_every_shared_trace(
    shared: Path, compressed: bool, tmp_path: Path
) -> None:
    trace = shared
    if not compressed:
        trace = tmp_path / shared.name.removesuffix(".gz")
        trace.write_bytes(gzip.decompress(shared.read_bytes()))
    code, out, _ = run("summarize", trace, "--top", "3")
    assert code == 0 and out.startswith("# Trace summary")
    code, out, _ = run("breakdown", trace, "--json")
    assert code == 0
    assert set(next(iter(json.loads(out)["ranks"].values()))) >= DESIGN_RANK_KEYS
    code, _, err = run("filter", trace, "-o", tmp_path / "filtered.json")
    assert code == 0 and "wrote" in err
    filtered = json.loads((tmp_path / "filtered.json").read_text())["traceEvents"]
    original = json.loads(gzip.decompress(shared.read_bytes()))["traceEvents"]
    assert [e for e in filtered if e["ph"] == "M"] == [e for e in original if e["ph"] == "M"]
    code, out, _ = run("summarize", tmp_path / "filtered.json", "--json")
    assert code == 0 and json.loads(out)["structured"]["operations"]
    code, _, _ = run("merge", trace, "-o", tmp_path / "merged.json.gz")
    assert code == 0 and (tmp_path / "merged.json.gz").stat().st_size > 0


def test_summarize_json_has_the_seed_shape_and_html_is_written(
    torch_trace: Path, tmp_path: Path
) -> None:
    page = tmp_path / "report" / "summary.html"
    code, out, err = run("summarize", torch_trace, "--json", "--html", page)
    assert code == 0, err
    summary = json.loads(out)
    assert set(summary) == {"markdown", "structured"}
    assert {"operations", "bottlenecks", "recommendations"} <= set(summary["structured"])
    assert page.read_text().startswith("<!DOCTYPE html>")
    assert f"wrote {page}" in err


def test_breakdown_json_matches_design_shape_for_two_ranks(tmp_path: Path) -> None:
    ranks = [shared_trace("trace_filter").with_name(f"sampled_rank-{n}.json.gz") for n in (0, 1)]
    code, out, _ = run("breakdown", *ranks, "--json")
    assert code == 0
    result = json.loads(out)
    assert set(result["ranks"]) == {"0", "1"}
    assert set(result["kernel_types"]) == {"computation_us", "communication_us", "memory_us"}
    code, text, _ = run("breakdown", *ranks)
    assert code == 0 and "kernel types over ranks" in text


def test_breakdown_of_a_cpu_only_trace_says_so_instead_of_a_row_of_zeros(
    torch_trace: Path,
) -> None:
    code, text, _ = run("breakdown", torch_trace)
    assert code == 0
    assert text.splitlines() == [
        "no GPU activity (CPU-only trace): nothing to break down; "
        "`ncompass summarize TRACE` shows its CPU time"
    ]
    code, out, _ = run("breakdown", torch_trace, "--json")  # the JSON keeps its zeros
    assert code == 0 and json.loads(out)["ranks"]["0"]["gpu_events"] == 0


def test_breakdown_names_the_cpu_only_rank_beside_the_ranks_with_gpu_work(
    torch_trace: Path,
) -> None:
    gpu_rank = shared_trace("trace_filter").with_name("sampled_rank-1.json.gz")
    code, text, _ = run("breakdown", torch_trace, gpu_rank)
    assert code == 0
    rows = [line.split()[0] for line in text.splitlines()[1:] if line.split()[0].isdigit()]
    assert rows == ["1"]  # no row of zeros for rank 0
    assert "rank 0: no GPU activity (CPU-only trace)" in text
    assert "kernel types over ranks" in text


def test_breakdown_can_leave_out_the_last_step(tmp_path: Path) -> None:
    builder = TraceBuilder().marker("ProfilerStep#1", 0, 100).marker("ProfilerStep#2", 100, 100)
    builder.launch("early", 10, 1, 20, 10)
    builder.launch("late", 110, 1, 120, 30)
    path = builder.write(tmp_path / "t.json")
    code, out, _ = run("breakdown", path, "--json", "--exclude-last-step")
    assert code == 0 and json.loads(out)["ranks"]["0"]["gpu_events"] == 1


def test_filter_options_reach_the_library(tmp_path: Path) -> None:
    builder = TraceBuilder().marker("step", 0, 100).marker("short", 200, 1)
    builder.cpu_op("aten::child", 1, 50)
    builder.launch("k", 2, 1, 10, 5)
    path = builder.write(tmp_path / "t.json")
    out = tmp_path / "out.json"
    code, _, _ = run(
        "filter", path, "-o", out, "--no-kernels", "--direct-children", "--min-duration-us", "2"
    )
    assert code == 0
    names = [e["name"] for e in json.loads(out.read_text())["traceEvents"]]
    assert names == ["step", "aten::child"]


@pytest.mark.parametrize("command", ["summarize", "breakdown", "filter", "merge"])
def test_missing_trace_is_a_clear_error_with_exit_code_2(command: str, tmp_path: Path) -> None:
    extra = ["-o", str(tmp_path / "o.json")] if command in {"filter", "merge"} else []
    code, _, err = run(command, tmp_path / "missing.json", *extra)
    assert code == 2
    assert err.startswith("error: ") and "missing.json: no such trace file" in err


def test_truncated_trace_reports_the_byte_offset(tmp_path: Path) -> None:
    path = tmp_path / "cut.json"
    text = '{"traceEvents": [{"ph": "X", "ts": 1}, {"ph": "X", "ts"'
    path.write_text(text)
    code, _, err = run("summarize", path)
    incomplete_event = text.rindex("{")
    assert code == 2 and f"cut.json: cannot read the trace at byte {incomplete_event}:" in err
