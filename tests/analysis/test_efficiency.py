"""FLOPs, bytes, the roofline bound and the share of peak (analysis/roofline.py), on real
traces: models profiled here with the real torch profiler, planted markers, and HTA's GPU
traces."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ncompass.analysis.device_peaks import table_peaks
from ncompass.analysis.summary import summarize_trace

HTA = Path(__file__).parents[1] / "data" / "traces" / "hta"
REPO = Path(__file__).parents[2]


@pytest.fixture(autouse=True)
def _peaks_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """One calibration per test session, in a folder of its own (not the user's cache)."""
    monkeypatch.setenv("NCOMPASS_PEAKS_DIR", str(tmp_path_factory.getbasetemp() / "peaks"))
    monkeypatch.delenv("NCOMPASS_PEAK_FLOPS", raising=False)
    monkeypatch.delenv("NCOMPASS_PEAK_BANDWIDTH", raising=False)


def _markers(summary: Any) -> dict[str, Any]:
    return {row["name"]: row for row in summary["structured"]["markers"]}


def _assert_within_one_percent(ours: dict[str, Any], reference: dict[str, float]) -> None:
    assert reference, "FlopCounterMode counted nothing"
    checked = 0
    for name, expected in reference.items():
        row = ours.get(name)
        got = 0.0 if row is None or row["efficiency"] is None else row["efficiency"]["tensor_flops"]
        if expected == 0:
            assert got == 0, name
            continue
        assert got == pytest.approx(expected, rel=0.01), name
        checked += 1
    assert checked >= 3


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_gpt2_marker_flops_match_flop_counter_mode(tmp_path: Path, attn: str) -> None:
    pytest.importorskip("transformers")
    from tests.analysis.efficiency_models import gpt2, profile_model

    model, run = gpt2(attn)
    reference, total = profile_model(model, run, tmp_path / "gpt2.json")
    summary = summarize_trace(tmp_path / "gpt2.json")
    _assert_within_one_percent(_markers(summary), reference)
    assert summary["structured"]["model_flops"] == pytest.approx(total, rel=0.01)


def test_llama_marker_flops_match_flop_counter_mode(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    from tests.analysis.efficiency_models import llama, profile_model

    model, run = llama()
    reference, _ = profile_model(model, run, tmp_path / "llama.json")
    _assert_within_one_percent(_markers(summarize_trace(tmp_path / "llama.json")), reference)


def test_conv_net_flops_match_forward_and_backward(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from tests.analysis.efficiency_models import conv_net, profile_model

    model, run = conv_net()
    reference, total = profile_model(model, run, tmp_path / "conv.json", backward=True)
    summary = summarize_trace(tmp_path / "conv.json")
    markers = _markers(summary)
    # the forward pass per module; the run's model FLOPs include convolution_backward's
    _assert_within_one_percent(markers, reference)
    assert summary["structured"]["model_flops"] == pytest.approx(total, rel=0.01)


_PLANTED = r"""
import sys, torch
from torch.profiler import ProfilerActivity, profile, record_function
a, b = torch.randn(768, 768), torch.randn(768, 768)
x, y = torch.randn(1 << 24), torch.randn(1 << 24)
s, t = torch.randn(4), torch.randn(4)
torch.mm(a, b); x.add_(y); s.add(t)  # warm: first calls allocate and pick kernels
with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
    with record_function("gemm_loop"):
        for _ in range(10):
            torch.mm(a, b)
    with record_function("elementwise_stream"):
        for _ in range(4):
            x.add_(y)  # in place: no fresh pages to fault in
    with record_function("tiny_ops"):
        for _ in range(3000):
            s.add(t)
prof.export_chrome_trace(sys.argv[1])
"""


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real trace of three planted markers: a GEMM loop, an elementwise stream, tiny ops."""
    pytest.importorskip("torch")
    trace = tmp_path_factory.mktemp("planted") / "planted.json"
    subprocess.run([sys.executable, "-c", _PLANTED, str(trace)], check=True)
    return trace


def test_planted_markers_are_compute_memory_and_overhead_bound(planted: Path) -> None:
    markers = _markers(summarize_trace(planted))
    assert markers["gemm_loop"]["efficiency"]["bound"] == "compute"
    assert markers["elementwise_stream"]["efficiency"]["bound"] == "memory"
    assert markers["tiny_ops"]["efficiency"]["bound"] == "overhead"
    gemm = markers["gemm_loop"]["efficiency"]
    assert gemm["tensor_flops"] == 10 * 2 * 768**3


def test_no_achieved_figure_exceeds_its_peak(planted: Path) -> None:
    structured = summarize_trace(planted)["structured"]
    device = structured["device"]
    assert device is not None and device["source"] == "measured"
    peak_flops = max(device["peak_flops_per_s"].values())
    rows = [*structured["markers"], *structured["operations"]]
    rated = [row["efficiency"] for row in rows if row.get("efficiency")]
    assert rated
    for efficiency in rated:
        if efficiency["flops_per_s"] is not None:
            assert efficiency["flops_per_s"] <= peak_flops * (1 + 1e-9)
            assert efficiency["bytes_per_s"] <= device["peak_bytes_per_s"] * (1 + 1e-9)
        if efficiency["of_peak"] is not None:
            assert 0.0 <= efficiency["of_peak"] <= 1.0


def test_summary_names_the_marker_with_most_time_left(planted: Path) -> None:
    summary = summarize_trace(planted)
    markdown = summary["markdown"]
    assert "## Efficiency" in markdown
    assert "Most time left on the table: `" in markdown
    assert "| bound, of peak |" in markdown
    assert "compute " in markdown and "memory " in markdown and "overhead " in markdown


def test_user_peaks_replace_the_measured_ones(planted: Path) -> None:
    structured = summarize_trace(planted, peak_flops=1e15, peak_bandwidth=1e13)["structured"]
    device = structured["device"]
    assert device is not None
    assert device["source"] == "user"
    assert set(device["peak_flops_per_s"].values()) == {1e15}
    assert device["peak_bytes_per_s"] == 1e13


def test_cli_rejects_a_bad_peak_from_the_environment(planted: Path) -> None:
    env = {**os.environ, "NCOMPASS_PEAK_FLOPS": "fast", "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "ncompass", "summarize", str(planted)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert done.returncode == 2
    assert "NCOMPASS_PEAK_FLOPS" in done.stderr and "Traceback" not in done.stderr


def test_cli_takes_peak_flags_and_prints_json(planted: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ncompass",
            "summarize",
            str(planted),
            "--json",
            "--peak-flops",
            "2e12",
            "--peak-bandwidth",
            "1e11",
        ],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    structured = json.loads(done.stdout)["structured"]
    assert structured["device"]["source"] == "user"
    assert structured["device"]["peak_flops_per_s"]["fp32"] == 2e12
    for row in structured["markers"]:
        assert set(row["efficiency"]) >= {
            "flops",
            "bytes",
            "flops_per_s",
            "bytes_per_s",
            "intensity",
            "bound",
            "of_peak",
        }


def test_trace_without_shapes_says_so_in_one_line() -> None:
    summary = summarize_trace(HTA / "nccl_parser_config" / "nccl_data.json.gz")
    structured = summary["structured"]
    assert structured["device"] is None and structured["model_flops"] is None
    assert all(row["efficiency"] is None for row in structured["markers"])
    lines = [line for line in summary["markdown"].splitlines() if "--record-shapes" in line]
    assert len(lines) == 1


def test_gpu_gemm_kernels_of_a_real_trace_get_flops() -> None:
    """HTA's sampled A100 rank: its cutlass GEMM kernels inherit their addmm/mm's FLOPs."""
    structured = summarize_trace(HTA / "trace_filter" / "sampled_rank-0.json.gz", top=200)[
        "structured"
    ]
    gemms = [
        op
        for op in structured["operations"]
        if op["kind"] == "kernel" and "gemm" in op["name"] and op.get("efficiency")
    ]
    assert gemms
    assert all(op["efficiency"]["tensor_flops"] > 0 for op in gemms)
    assert structured["model_flops"] > 1e12


def test_the_table_is_chosen_by_the_device_name() -> None:
    a100 = table_peaks("NVIDIA A100-SXM4-80GB")
    assert a100 is not None and a100.flops_per_s["bf16"] == 312e12
    pcie = table_peaks("NVIDIA H100 PCIe")
    assert pcie is not None and pcie.note.endswith("H100 PCIe")
    for name in ["NVIDIA H200", "NVIDIA B200", "NVIDIA L4", "NVIDIA L40S"]:
        assert table_peaks(name) is not None, name
    assert table_peaks("NVIDIA GeForce RTX 4090") is not None
    assert table_peaks("AMD Instinct MI300X") is not None
    assert table_peaks("AMD Radeon Graphics") is None  # unnamed: the user gives the peaks


def test_calibration_keeps_the_best_and_stays_under_the_theoretical_peak(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("torch")
    from ncompass.analysis import calibration

    monkeypatch.setenv("NCOMPASS_PEAKS_DIR", str(tmp_path))
    first = calibration.cpu_peaks()
    (cached,) = tmp_path.glob("*.json")
    data = json.loads(cached.read_text())
    data["bytes_per_s"] *= 10  # a better earlier calibration: a busy re-measure keeps it
    cached.write_text(json.dumps(data))
    again = calibration.cpu_peaks(recalibrate=True)
    assert again.bytes_per_s >= data["bytes_per_s"]
    bound = calibration.theoretical_flops()
    if bound is not None:
        assert first.flops_per_s["fp32"] <= bound and again.flops_per_s["fp32"] <= bound


def test_html_page_draws_the_roofline_itself(planted: Path) -> None:
    from ncompass.analysis.html_page import render_html

    page = render_html(summarize_trace(planted))
    assert "<h2>Efficiency</h2>" in page
    assert 'aria-label="Roofline"' in page and "<polyline" in page
    assert "gemm_loop" in page and "achieved FLOP/s" in page
    assert "http://" not in page and "https://" not in page  # no CDN, nothing fetched


def test_session_answer_says_the_bound_of_its_marker(planted: Path) -> None:
    from ncompass.session.answer_bound import bound_phrase, marker_efficiency

    efficiency = marker_efficiency(planted, {"elementwise_stream"})
    assert efficiency is not None and efficiency["bound"] == "memory"
    phrase = bound_phrase(efficiency)
    assert phrase.startswith("; memory-bound, ") and phrase.endswith("% of peak bandwidth")
    assert marker_efficiency(HTA / "nccl_parser_config" / "nccl_data.json.gz", {"x"}) is None


def test_compare_reports_achieved_flop_rate_changes(planted: Path, tmp_path: Path) -> None:
    after = tmp_path / "after.json"
    after.write_bytes(planted.read_bytes())
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "ncompass", "compare", str(planted), "--", str(after)]
    text = subprocess.run(command, capture_output=True, text=True, env=env, check=True).stdout
    assert "## Achieved FLOP/s" in text and "`gemm_loop`" in text
    done = subprocess.run(
        [*command, "--json"], capture_output=True, text=True, env=env, check=True
    ).stdout
    rates = {row["name"]: row for row in json.loads(done)["flop_rates"]}
    assert rates["gemm_loop"]["ratio"] == pytest.approx(1.0)
    assert rates["gemm_loop"]["before_flops"] == 10 * 2 * 768**3


def test_no_efficiency_leaves_the_figures_out(planted: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "ncompass", "summarize", str(planted), "--json"]
    done = subprocess.run(
        [*command, "--no-efficiency"], capture_output=True, text=True, env=env, check=True
    )
    structured = json.loads(done.stdout)["structured"]
    assert "device" not in structured
    assert all("efficiency" not in row for row in structured["markers"])
