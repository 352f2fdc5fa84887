"""The compiled regions' time and the part no marker is credited with, on GPU traces."""

from __future__ import annotations

from pathlib import Path

from ncompass.analysis.compiled_region_text import compiled_region_lines
from ncompass.analysis.compiled_regions import compiled_region_stats
from ncompass.analysis.html_page import render_html
from ncompass.analysis.summary import summarize_trace
from tests.traces.builders import CPU_PID, TraceBuilder

REGION = "Torch-Compiled Region: 0/0"


def _compiled_gpu_trace(path: Path) -> Path:
    """Two calls of compiled code: a Triton kernel naming its marker and an extern cuBLAS gemm
    (launched by aten::mm), plus a kernel launched outside any compiled region."""
    builder = TraceBuilder()
    for start in (0, 1000):
        builder.cpu_op(REGION, start, 500)
        builder.cpu_op("## Call CompiledFxGraph fabc ##", start + 10, 480)
        triton = builder.runtime("cuLaunchKernel", start + 20, 5)
        builder.gpu("triton_poi_fused_relu_0", start + 30, 40, correlation=triton,
                    ncompass_markers=["block.relu", "block"])  # fmt: skip
        builder.cpu_op("aten::mm", start + 100, 50)
        gemm = builder.runtime("cudaLaunchKernel", start + 110, 5)
        builder.gpu("sm80_xmma_gemm_f32f32", start + 120, 160, correlation=gemm)
    builder.launch("elementwise_outside", 2000, 5, 2010, 300)
    return builder.write(path)


def test_gpu_time_launched_from_compiled_regions_is_split_by_marker_credit(
    tmp_path: Path,
) -> None:
    row = compiled_region_stats(_compiled_gpu_trace(tmp_path / "t.json"))
    assert row == {
        "source": "gpu",
        "regions": 2,
        "total_us": 400.0,  # the kernel outside the regions is not counted
        "credited_us": 80.0,
        "uncredited_us": 320.0,
        "uncredited": [{"name": "sm80_xmma_gemm_f32f32", "calls": 2, "total_us": 320.0}],
    }
    (text, _) = compiled_region_lines(row, heading=False)
    assert text.startswith(
        "Compiled regions: 2 calls, 400.0 µs (GPU time launched from them); the markers' "
        "Inductor kernels hold 80.0 µs (20.0%), no marker is credited with 320.0 µs (80.0%): "
        "`sm80_xmma_gemm_f32f32` 320.0 µs."
    )


def test_summary_of_a_compiled_gpu_trace_reports_the_regions(tmp_path: Path) -> None:
    summary = summarize_trace(_compiled_gpu_trace(tmp_path / "t.json"))
    assert summary["structured"]["compiled_code"]["uncredited_us"] == 320.0
    section = summary["markdown"].split("## Compiled code", 1)[1]
    assert "- `block.relu`: compiled: its time is in 1 Inductor kernel" in section
    assert "no marker is credited with 320.0 µs (80.0%)" in section
    page = render_html(summary)
    assert "no marker is credited with 320.0 µs (80.0%)" in page.split("<h2>Compiled code</h2>")[1]


def test_a_trace_without_compiled_code_has_no_region_row(tmp_path: Path) -> None:
    builder = TraceBuilder().marker("step", 0, 100)
    builder.launch("k", 10, 5, 20, 30)
    path = builder.write(tmp_path / "t.json")
    assert compiled_region_stats(path) is None
    assert "compiled_code" not in summarize_trace(path)["structured"]


def test_cpu_time_credits_a_kernel_that_starts_as_the_op_before_it_ends(tmp_path: Path) -> None:
    """Timestamps rounded to the nanosecond can overlap neighbours by a hair: still siblings."""
    builder = TraceBuilder().cpu_op(REGION, 0, 100)
    builder.cpu_op("aten::mm", 10, 20.0004)
    builder.add(ph="X", cat="cpu_op", name="graph_0_cpp_fused_relu_0", pid=CPU_PID, tid=1, ts=30,
                dur=40, args={"ncompass_markers": ["block.relu"]})  # fmt: skip
    builder.cpu_op("aten::resolve_conj", 71, 1)
    row = compiled_region_stats(builder.write(tmp_path / "t.json"))
    assert row is not None and row["source"] == "cpu"
    assert row["total_us"] == 100.0 and row["credited_us"] == 40.0
    assert [(item["name"], item["calls"]) for item in row["uncredited"]] == [
        ("aten::mm", 1),
        ("aten::resolve_conj", 1),
    ]
