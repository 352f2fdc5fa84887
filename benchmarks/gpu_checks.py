"""The checks of ``gpu_check.py``: each runs one GPU path of ncompass through its real interface.

A check is a function ``(device) -> Outcome``. ``device`` is ``"cuda"`` on a GPU machine, or
``"cpu"`` under ``--exercise-on-cpu``: the same code runs, and the GPU-only criteria are judged
only on CUDA. Programs are run with the real ``python -m ncompass`` command line, in a fresh
folder, and their traces read back through ncompass' own analysis (``breakdown --json``,
``summarize --json``) or as JSON.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DEVICE_ENV = "GPU_CHECK_DEVICE"


@dataclass(frozen=True)
class Outcome:
    """One check's verdict: ``holds``, ``falls short``, ``skipped`` or ``exercised``."""

    status: str
    figure: str
    detail: str = ""

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


@dataclass(frozen=True)
class Check:
    function: Callable[[str], Outcome]
    limit_s: int


def cuda_unavailable() -> str | None:
    """Why CUDA cannot be used here, or None when it can."""
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if torch.version.cuda is None:
        return f"torch {torch.__version__} is a CPU build"
    if not torch.cuda.is_available():
        return "no CUDA device is visible (torch.cuda.is_available() is False)"
    return None


def judged(device: str, holds: bool, figure: str, expected: str) -> Outcome:
    """``holds`` or ``falls short`` (naming what was expected); on CPU, what ran."""
    if holds:
        return Outcome("holds", figure)
    return Outcome("falls short", figure, f"expected {expected}")


# ---------------------------------------------------------------------------------------------
# running ncompass


def ncompass(*arguments: str, cwd: Path, device: str) -> subprocess.CompletedProcess[str]:
    """``python -m ncompass ARGUMENTS`` in ``cwd``; raises with its output when it fails."""
    env = {**os.environ, DEVICE_ENV: device, "PYTHONPATH": _pythonpath(cwd)}
    done = subprocess.run(
        [sys.executable, "-m", "ncompass", *arguments],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-5:])
        raise RuntimeError(f"ncompass {arguments[0]} exited {done.returncode}: {tail}")
    return done


def profiled(
    script: str, folder: Path, device: str, *run_options: str, config: str | None = None
) -> Path:
    """Run ``script`` (text) under ``ncompass run`` in ``folder``; return the trace's path."""
    (folder / "program.py").write_text(script)
    options = ["--config", config] if config else []
    out = folder / "traces"
    ncompass(
        "run", *options, *run_options, "--output-dir", str(out), "--trace-name", "check",
        "program.py", cwd=folder, device=device,
    )  # fmt: skip
    return out / "check.json"


def breakdown(trace: Path, device: str) -> dict[str, Any]:
    done = ncompass("breakdown", "--json", str(trace), cwd=trace.parent, device=device)
    document: dict[str, Any] = json.loads(done.stdout)
    return document


def summary(trace: Path, device: str) -> dict[str, Any]:
    done = ncompass("summarize", "--json", str(trace), cwd=trace.parent, device=device)
    document: dict[str, Any] = json.loads(done.stdout)
    return document


def trace_events(trace: Path) -> list[dict[str, Any]]:
    document = json.loads(trace.read_text())
    events = document["traceEvents"] if isinstance(document, dict) else document
    return [event for event in events if isinstance(event, dict)]


def _pythonpath(cwd: Path) -> str:
    parts = [str(cwd), str(REPO / "examples"), str(REPO)]
    current = os.environ.get("PYTHONPATH")
    return os.pathsep.join(parts + ([current] if current else []))


def _sync() -> str:
    return "torch.cuda.synchronize() if DEVICE == 'cuda' else None"


PROLOGUE = f"""\
import os
import torch
DEVICE = os.environ["{DEVICE_ENV}"]
torch.manual_seed(0)
"""


# ---------------------------------------------------------------------------------------------
# 1. a transformers model under `ncompass run`

GPT2_PROGRAM = (
    PROLOGUE
    + f"""\
from transformers import GPT2Config, GPT2LMHeadModel
config = GPT2Config(n_layer=2, n_embd=256, n_head=4, vocab_size=1024, n_positions=256)
model = GPT2LMHeadModel(config).to(DEVICE).eval()
ids = torch.randint(0, config.vocab_size, (4, 128), device=DEVICE)
with torch.no_grad():
    for _ in range(6):
        model(ids)
{_sync()}
print("done", flush=True)
"""
)


def check_transformers_run(device: str) -> Outcome:
    """Markers present, kernels linked to launches and markers, the breakdown adds up."""
    with tempfile.TemporaryDirectory() as folder:
        trace = profiled(
            GPT2_PROGRAM, Path(folder), device, config=str(REPO / "rewrites/transformers/gpt2.yaml")
        )
        markers = summary(trace, device)["structured"]["markers"]
        rank = next(iter(breakdown(trace, device)["ranks"].values()))
    marker_calls = sum(row["calls"] for row in markers)
    marked_gpu = sum(row["gpu_self_us"] for row in markers)
    parts = rank["compute_us"] + rank["non_compute_us"] + rank["idle_us"]
    span = rank["kernel_span_us"]
    adds_up = abs(parts - span) <= 0.01 * span if span else False
    launches = rank.get("launches", {})
    linked, events = launches.get("linked", 0), rank["gpu_events"]
    figure = (
        f"{len(markers)} markers ({marker_calls} calls), {linked}/{events} kernels linked, "
        f"{marked_gpu / 1e3:.1f} ms GPU inside markers, parts {parts / 1e3:.1f} of span "
        f"{span / 1e3:.1f} ms"
    )
    if device != "cuda":
        return Outcome("holds" if marker_calls else "falls short", figure)
    holds = marker_calls > 0 and events > 0 and linked == events and marked_gpu > 0 and adds_up
    return judged(
        device, holds, figure, "markers, every kernel linked, GPU time in markers, parts = span"
    )


# ---------------------------------------------------------------------------------------------
# 2. torch.compile(fullgraph=True), and CUDA graphs

COMPILED_PROGRAM = (
    PROLOGUE
    + f"""\
import sys
from tinyformer.model import TinyTransformer, TransformerConfig
model = TinyTransformer(TransformerConfig(layers=2, dim=128)).to(DEVICE).eval()
mode = sys.argv[1] if len(sys.argv) > 1 else "default"
compiled = torch.compile(model, fullgraph=True, mode=None if mode == "default" else mode)
tokens = torch.randint(0, 256, (2, 32), device=DEVICE)
with torch.no_grad():
    for _ in range(4):
        compiled(tokens)
{_sync()}
print("done", flush=True)
"""
)


def check_compiled(device: str) -> Outcome:
    """Inductor's kernels attributed to markers; with CUDA graphs (reduce-overhead) kernels seen."""
    config = str(REPO / "configs/attn.yaml")
    with tempfile.TemporaryDirectory() as folder:
        trace = profiled(COMPILED_PROGRAM, Path(folder), device, config=config)
        sidecar = json.loads(trace.with_name("check.ncompass.json").read_text())
        kernels = sidecar.get("compiled_kernels", {}).get("kernels", [])
        attributed = [kernel for kernel in kernels if kernel["markers"]]
        triton = [kernel for kernel in attributed if kernel["name"].startswith("triton")]
    figure = f"{len(attributed)}/{len(kernels)} compiled kernels attributed to markers"
    if device != "cuda":
        return Outcome("holds" if attributed else "falls short", figure)
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "program.py").write_text(COMPILED_PROGRAM)
        out = Path(folder) / "traces"
        ncompass(
            "run", "--config", config, "--output-dir", str(out), "--trace-name", "graphs",
            "program.py", "reduce-overhead", cwd=Path(folder), device=device,
        )  # fmt: skip
        graph_kernels = [
            event
            for event in trace_events(out / "graphs.json")
            if event.get("cat") == "kernel" and event.get("ph") == "X"
        ]
    figure += f" ({len(triton)} Triton); reduce-overhead: {len(graph_kernels)} kernels in trace"
    return judged(
        device,
        bool(triton) and bool(graph_kernels),
        figure,
        "Triton kernels attributed to markers, and kernels in the CUDA-graph run's trace",
    )


# ---------------------------------------------------------------------------------------------
# 3. NVTX: --profiler nvtx-trace, and --nsys against the torch profiler

TINY_PROGRAM = (
    PROLOGUE
    + f"""\
from tinyformer.model import TinyTransformer, TransformerConfig, generate
model = TinyTransformer(TransformerConfig(layers=2, dim=128)).to(DEVICE).eval()
prompt = torch.randint(0, 256, (2, 32), device=DEVICE)
with torch.no_grad():
    generate(model, prompt, 8)
{_sync()}
print("done", flush=True)
"""
)


def check_nvtx(device: str) -> Outcome:
    """NVTX markers recorded by nvtx-trace; with nsys, kernel time equal to the torch profiler's."""
    config = str(REPO / "configs/attn.yaml")
    with tempfile.TemporaryDirectory() as folder:
        trace = profiled(TINY_PROGRAM, Path(folder), device, "--profiler", "nvtx-trace",
                         config=config)  # fmt: skip
        ranges = [event for event in trace_events(trace) if event.get("ph") in ("X", "B")]
    figure = f"nvtx-trace: {len(ranges)} NVTX ranges"
    if device != "cuda" or shutil.which("nsys") is None:
        note = "" if device != "cuda" else "nsys not installed: the --nsys half was skipped"
        status = "holds" if ranges else "falls short"
        return Outcome(status, figure, note)
    with tempfile.TemporaryDirectory() as folder:
        nsys_trace = profiled(TINY_PROGRAM, Path(folder), device, "--nsys", config=config)
        nsys_kernels = _kernel_time_by_name(trace_events(nsys_trace))
    with tempfile.TemporaryDirectory() as folder:
        torch_trace = profiled(TINY_PROGRAM, Path(folder), device, config=config)
        torch_kernels = _kernel_time_by_name(trace_events(torch_trace))
    shared = sorted(set(nsys_kernels) & set(torch_kernels))
    worst = max(
        (abs(nsys_kernels[name] - torch_kernels[name]) / torch_kernels[name] for name in shared),
        default=float("inf"),
    )
    figure += f"; nsys vs torch profiler: {len(shared)} kernels, worst median gap {worst:.1%}"
    return judged(
        device, bool(ranges) and worst <= 0.01, figure, "median kernel durations within 1 %"
    )


def _kernel_time_by_name(events: list[dict[str, Any]]) -> dict[str, float]:
    """Each kernel name's median duration (µs)."""
    durations: dict[str, list[float]] = {}
    for event in events:
        if event.get("cat") == "kernel" and event.get("ph") == "X":
            durations.setdefault(str(event.get("name")), []).append(float(event.get("dur", 0)))
    return {name: statistics.median(values) for name, values in durations.items() if values}


# ---------------------------------------------------------------------------------------------
# 4. the GPU monitor on the device


def check_gpu_monitor(device: str) -> Outcome:
    """Utilisation rises during a GEMM loop; the sample rate is within 10 % of the interval."""
    import torch

    from ncompass.gpu import GpuMonitor

    backends = ["nvml", "smi"] if device == "cuda" else ["cpu"]
    interval = 0.05
    figures, short = [], []
    matrix = torch.randn(2048, 2048, device=device)
    for backend in backends:
        idle = _monitored(GpuMonitor(interval_s=interval, backend=backend), lambda: time.sleep(1))
        busy = _monitored(
            GpuMonitor(interval_s=interval, backend=backend),
            lambda: _gemm_loop(matrix, 2.0, device),
        )
        rate = busy.sample_count / busy.measured_s if busy.measured_s else 0.0
        rate_error = abs(rate * interval - 1)
        rise = (busy.util_gpu_mean or 0) - (idle.util_gpu_mean or 0)
        figures.append(
            f"{backend}: util {idle.util_gpu_mean or 0:.0f}% idle -> "
            f"{busy.util_gpu_mean or 0:.0f}% busy, "
            f"{rate:.1f} samples/s for {1 / interval:.0f} asked"
        )
        if rate_error > 0.10 or (device == "cuda" and rise < 20):
            short.append(backend)
    figure = "; ".join(figures)
    if short:
        return Outcome("falls short", figure, f"expected a rise and rate within 10 % ({short})")
    return Outcome("holds", figure)


def _monitored(monitor: Any, body: Callable[[], None]) -> Any:
    with monitor:
        body()
    return monitor.summaries[0]


def _gemm_loop(a: Any, seconds: float, device: str) -> None:
    import torch

    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        for _ in range(8):
            a = (a @ a).clamp_(-1, 1)
        if device == "cuda":
            torch.cuda.synchronize()


# ---------------------------------------------------------------------------------------------
# 5. the Triton kernels against PyTorch


def check_kernels(device: str) -> Outcome:
    """Every op's numerics within tolerance, `kernels tune` for a few shapes, time vs PyTorch."""
    import torch
    from bench_kernels import _as_float, _op_call, _peer_call, _scaled_down

    from ncompass.kernels.shapes import PRESETS, OpShape, preset
    from ncompass.kernels.tolerances import TOLERANCES

    rtol, atol = TOLERANCES["float32"]
    worst: dict[str, float] = {}
    ratios: list[float] = []
    first_of_op: dict[str, OpShape] = {}  # one shape of every op the presets use
    for name in PRESETS:
        for shape in preset(name):
            first_of_op.setdefault(shape.op, shape)
    first_of_op.setdefault(
        "matmul", OpShape("matmul", {"a": (256, 512), "b": (512, 256)}, {}, "a=256x512,b=512x256")
    )
    for shape in first_of_op.values():
        small = _scaled_down(shape) if device != "cuda" else shape
        args, kwargs = small.arguments(torch.float32, device)
        kernel, exact = (
            _op_call(small.op, args, kwargs),
            _peer_call(small.op, _as_float(args), kwargs),
        )
        with torch.no_grad():
            out, expected = kernel(), exact()
            if device == "cuda":
                ratios.append(_time(exact) / _time(kernel))
        error = ((out.float() - expected).abs() / (atol + rtol * expected.abs())).max().item()
        worst[small.op] = max(worst.get(small.op, 0.0), error)
    tuned = ncompass(
        "kernels", "tune", "--op", "matmul", "--shapes", "a=64x64,b=64x64;a=128x64,b=64x32",
        "--json", cwd=REPO, device=device,
    )  # fmt: skip
    choices = json.loads(tuned.stdout)
    within = all(value <= 1 for value in worst.values())
    figure = ", ".join(f"{op} err/bound {value:.2f}" for op, value in sorted(worst.items()))
    figure += f"; tune: {len(choices.get('shapes', choices))} shapes"
    if ratios:
        figure += f"; PyTorch time / kernel time: median {statistics.median(ratios):.2f}x"
    return judged(device, within, figure, "every op within the float32 tolerance")


def _time(call: Callable[[], Any], repeat: int = 20) -> float:
    import torch

    call()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(repeat):
        call()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / repeat


# ---------------------------------------------------------------------------------------------
# 6. a process tree: torch.multiprocessing.spawn with 2 processes

SPAWN_PROGRAM = (
    PROLOGUE
    + f"""\
import torch.multiprocessing as mp
from tinyformer.model import TinyTransformer, TransformerConfig, generate

def work(index):
    device = DEVICE if DEVICE == "cpu" else f"cuda:{{index % torch.cuda.device_count()}}"
    model = TinyTransformer(TransformerConfig(layers=2, dim=128)).to(device).eval()
    prompt = torch.randint(0, 256, (2, 16), device=device)
    with torch.no_grad():
        generate(model, prompt, 4)
    {_sync()}

if __name__ == "__main__":
    mp.spawn(work, nprocs=2)
    print("done", flush=True)
"""
)


def check_process_tree(device: str) -> Outcome:
    """Both spawned processes' markers in the run's merged trace, each on its own track."""
    with tempfile.TemporaryDirectory() as folder:
        trace = profiled(
            SPAWN_PROGRAM, Path(folder), device, config=str(REPO / "configs/attn.yaml")
        )
        document = json.loads(trace.read_text())
        events = trace_events(trace)
    processes = document.get("ncompass_processes", []) if isinstance(document, dict) else []
    marked = {
        event.get("pid")
        for event in events
        if event.get("cat") == "user_annotation" and str(event.get("name", "")).startswith("attn")
    }
    figure = f"{len(processes)} processes listed, markers in {len(marked)} process tracks"
    return judged(device, len(marked) >= 2, figure, "markers of both spawned processes")


# ---------------------------------------------------------------------------------------------
# 7. the roofline: a cuBLAS GEMM near the table's peak, called compute-bound

ROOFLINE_PROGRAM = (
    PROLOGUE
    + f"""\
from torch.profiler import record_function
size = 8192 if DEVICE == "cuda" else 512
dtype = torch.bfloat16 if DEVICE == "cuda" else torch.float32
a = torch.randn(size, size, device=DEVICE, dtype=dtype)
b = torch.randn(size, size, device=DEVICE, dtype=dtype)
for _ in range(3):
    a @ b  # warm: cuBLAS picks its kernel
{_sync()}
with record_function("gemm"):
    for _ in range(20):
        a @ b
    {_sync()}
print("done", flush=True)
"""
)


def check_roofline(device: str) -> Outcome:
    """A cuBLAS GEMM reaches at least 60 % of the table's peak and is called compute-bound."""
    with tempfile.TemporaryDirectory() as folder:
        trace = profiled(ROOFLINE_PROGRAM, Path(folder), device, "--record-shapes")
        structured = summary(trace, device)["structured"]
    gemm = next(row for row in structured["markers"] if row["name"] == "gemm")
    efficiency = gemm["efficiency"] or {}
    device_row = structured.get("device") or {}
    share = efficiency.get("of_peak")
    figure = (
        f"gemm: {efficiency.get('flops_per_s') or 0:.3g} FLOP/s, {efficiency.get('bound')}, "
        f"{0 if share is None else share:.0%} of the {device_row.get('source')} peak "
        f"({device_row.get('name')})"
    )
    if device != "cuda":  # the path ran and judged the GEMM; the 60 % is a GPU's table figure
        return judged(device, share is not None, figure, "a bound and a share of peak")
    holds = (
        efficiency.get("bound") == "compute"
        and share is not None
        and share >= 0.6
        and device_row.get("source") == "table"
    )
    return judged(device, holds, figure, "compute-bound at >= 60 % of the table's peak")


CHECKS: dict[str, Check] = {
    "transformers-run": Check(check_transformers_run, 90),
    "compiled": Check(check_compiled, 120),
    "nvtx": Check(check_nvtx, 90),
    "gpu-monitor": Check(check_gpu_monitor, 30),
    "kernels": Check(check_kernels, 90),
    "process-tree": Check(check_process_tree, 60),
    "roofline": Check(check_roofline, 90),
}


def run_check(name: str, device: str) -> Outcome:
    """Run one check in this process; an exception is its ``falls short`` with the reason."""
    if device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")
    try:
        return CHECKS[name].function(device)
    except Exception as error:  # a check that broke says how, in its row
        return Outcome("falls short", "", f"{type(error).__name__}: {str(error)[:400]}")
