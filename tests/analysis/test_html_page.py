from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

import pytest

from ncompass.analysis import summarize_trace
from ncompass.analysis.comparison import compare
from ncompass.analysis.html_page import SummaryReport, render_html
from ncompass.analysis.timeline import COLUMNS
from tests.traces.builders import TraceBuilder, shared_trace

CLOVER = (
    "void clover::par_ranged2d_kernel<PdV_kernel(bool, int, double)::{lambda(int, int)#1}>"
    "(int, int, int, int, PdV_kernel(bool, int, double)::{lambda(int, int)#1})"
)
CLOVER_FLUX = CLOVER.replace("PdV_kernel", "flux_calc_kernel")


@pytest.fixture(scope="module")
def gpu_summary() -> dict[str, Any]:
    return summarize_trace(shared_trace("nccl_parser_config"), top=8)


@pytest.fixture(scope="module")
def cpu_summary() -> dict[str, Any]:
    return summarize_trace(shared_trace("cpu_only"))


def test_page_is_self_contained_with_timeline_and_charts(gpu_summary: dict[str, Any]) -> None:
    page = render_html(gpu_summary, top=8)
    assert page.startswith("<!DOCTYPE html>")
    assert page.count("<svg") == 3
    for label in ("Timeline of the run", "GPU time breakdown", "Time per marker"):
        assert f'aria-label="{label}"' in page
    assert "GPU busy" in page and "<h2>CPU operators</h2>" in page
    assert page.count('<table class="sortable">') == 2  # kernels and CPU operators
    assert not re.search(r"(src|href)=|https?://|@import", page)  # nothing loaded from outside


def test_timeline_is_binned_and_adds_up_to_the_gpu_busy_time(gpu_summary: dict[str, Any]) -> None:
    timeline = gpu_summary["structured"]["timeline"]
    assert timeline["source"] == "gpu" and len(timeline["busy"]) == COLUMNS
    assert all(0.0 <= share <= 1.0 for share in timeline["busy"])
    span = timeline["end_us"] - timeline["start_us"]
    busy_us = sum(timeline["busy"]) * span / COLUMNS
    breakdown = gpu_summary["structured"]["breakdown"]
    gpu_busy_us = breakdown["kernel_span_us"] - breakdown["idle_us"]
    assert busy_us == pytest.approx(gpu_busy_us, rel=0.01)
    lanes = {lane["name"]: lane for lane in timeline["lanes"]}
    assert {"ProfilerStep#*", "nccl:all_reduce"} <= set(lanes)
    assert all(
        0 <= first <= last <= COLUMNS for lane in lanes.values() for first, last in lane["ranges"]
    )


def test_cpu_only_trace_has_no_gpu_columns_and_lists_cpu_operators(
    cpu_summary: dict[str, Any],
) -> None:
    page = render_html(cpu_summary)
    assert "CPU only (no GPU events)" in page and "CPU in markers" in page
    for gpu_part in ("<h2>GPU", "GPU share", "GPU time of the kernels", "GPU busy", "#31a354"):
        assert gpu_part not in page  # no GPU section, column, bar or legend
    assert "<h2>CPU operators</h2>" in page and ">aten::empty<" in page


def test_kernel_names_stay_distinct_with_the_full_name_on_hover(tmp_path: Path) -> None:
    builder = TraceBuilder().marker("step", 0, 100)
    builder.launch(CLOVER, 1, 2, 10, 30)
    builder.launch(CLOVER_FLUX, 5, 2, 50, 20)
    page = render_html(summarize_trace(builder.write(tmp_path / "clover.json")))
    cells = re.findall(r'<td title="([^"]*)">([^<]*)</td><td>computation', page)
    assert len(cells) == 2
    shown = [html.unescape(text) for _, text in cells]
    assert shown[0] == "clover::par_ranged2d_kernel<PdV_kernel(…)::{lambda(…)#1}>(…)"
    assert shown[1] == "clover::par_ranged2d_kernel<flux_calc_kernel(…)::{lambda(…)#1}>(…)"
    assert {html.unescape(title) for title, _ in cells} == {CLOVER, CLOVER_FLUX}


def test_a_summary_without_a_timeline_reads_its_trace_again(gpu_summary: dict[str, Any]) -> None:
    structured = {k: v for k, v in gpu_summary["structured"].items() if k != "timeline"}
    page = render_html({"markdown": "", "structured": structured}, top=8)
    assert 'aria-label="Timeline of the run"' in page


def test_summary_and_comparison_display_in_jupyter(cpu_summary: dict[str, Any]) -> None:
    assert isinstance(cpu_summary, SummaryReport) and isinstance(cpu_summary, dict)
    assert json.loads(json.dumps(cpu_summary)) == dict(cpu_summary)  # still the dict contract
    assert cpu_summary._repr_html_() == render_html(cpu_summary)
    trace = shared_trace("cpu_only")
    comparison = compare([trace], [trace])
    assert comparison._repr_html_().startswith("<!DOCTYPE html>")


def test_names_are_escaped(tmp_path: Path) -> None:
    path = TraceBuilder().marker("<script>alert(1)</script>", 0, 10).write(tmp_path / "t.json")
    page = render_html(summarize_trace(path))
    assert "<script>alert" not in page and "&lt;script&gt;" in page


def test_comparison_page_draws_both_sides_and_short_kernel_names() -> None:
    rank0 = shared_trace("trace_filter").with_name("sampled_rank-0.json.gz")
    comparison = compare([rank0], [rank0.with_name("sampled_rank-1.json.gz")])
    assert [timeline["source"] for timeline in comparison.timelines] == ["gpu", "gpu"]
    assert "timelines" not in comparison.to_dict()  # the --json shape is unchanged
    page = comparison.to_html()
    assert page.count('aria-label="Timeline of the run"') == 2
    assert "<h2>Before: sampled_rank-0.json.gz</h2>" in page
    [kernel] = [c for c in comparison.biggest_changes() if c.kind == "kernel"][:1]
    item = re.search(r"<li>kernel <b title=\"([^\"]*)\">([^<]*)</b>", page)
    assert item is not None
    assert html.unescape(item.group(1)) == kernel.name  # the full name on hover
    assert len(html.unescape(item.group(2))) <= 70 < len(kernel.name)
