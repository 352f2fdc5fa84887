"""The Triton kernels against cuBLAS / cuDNN (through PyTorch), side by side, as TFLOPS ratios.

    python benchmarks/bench_kernels.py [--preset NAME]... [--dtype float16] [--quick]
    python benchmarks/bench_kernels.py --interpreter-check      # no GPU: correctness only
    python benchmarks/bench_kernels.py --dispatch-overhead      # any machine: Python call cost

Shapes: the demo model (``tinyformer``), the convolutions of ResNet-50 (batch 32, 224x224) and
the layers of one Llama-2-7B decoder layer for 2048 tokens (``llama7b``) and 16 tokens
(``llama7b-decode``): see ``ncompass.kernels.shapes.PRESETS``.

On a CUDA device each shape is tuned first (the autotune cache keeps the choice), then the
ncompass op and its PyTorch peer are timed the same way: CUDA events around one call, L2 flushed
before each, median of 20. Both timings include the Python call, as a model would pay it.
cuDNN runs with ``torch.backends.cudnn.benchmark = True`` (it picks its algorithm too).
GEMMs, convolutions and attention are reported in TFLOPS, norms (memory-bound) in GB/s;
``ratio`` is the kernel's throughput over PyTorch's (above 1: the kernel is faster).

Without a GPU nothing can be timed: it says so and, with ``--interpreter-check``, runs scaled-down
versions of the shapes in Triton's interpreter and prints their error against PyTorch.

``--dispatch-overhead`` times the Python cost of one call on tiny CPU tensors (every op falls
back to PyTorch there, so the kernel itself is out of the picture): PyTorch's function, the
ncompass op called eagerly, and the op's ``torch.library`` custom op, which is what a
``torch.compile``d graph calls; median of interleaved rounds, in µs per call.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DEFAULT_PRESETS = ("tinyformer", "resnet50", "llama7b", "llama7b-decode")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", action="append", help=f"default: {', '.join(DEFAULT_PRESETS)}")
    parser.add_argument("--dtype", default="float16", choices=["float32", "float16", "bfloat16"])
    parser.add_argument("--quick", action="store_true", help="first 3 shapes of each preset")
    parser.add_argument(
        "--interpreter-check",
        action="store_true",
        help="without a GPU: check scaled-down shapes against PyTorch in Triton's interpreter",
    )
    parser.add_argument(
        "--dispatch-overhead",
        action="store_true",
        help="time a call's Python cost: PyTorch, the eager op, the compiled graph's custom op",
    )
    args = parser.parse_args()
    if args.dispatch_overhead:
        return _dispatch_overhead()
    presets = tuple(args.preset or DEFAULT_PRESETS)
    if args.interpreter_check:
        # must be set before the first kernel module is imported
        os.environ["TRITON_INTERPRET"] = "1"
        # correctness only: interpreter timings say nothing about a GPU, so do not tune there
        os.environ.setdefault("NCOMPASS_AUTOTUNE", "0")
    import torch

    from ncompass.kernels.backend import triton_installed

    if not triton_installed():
        print("triton is not installed (pip install -e '.[kernels]'): nothing to benchmark")
        return 0
    if torch.cuda.is_available() and not args.interpreter_check:
        return _bench_gpu(presets, args.dtype, args.quick)
    print("no CUDA GPU here: GPU speed is not measured (run this on a GPU machine).")
    if not args.interpreter_check:
        print("pass --interpreter-check to check the kernels' results in Triton's interpreter.")
        return 0
    return _check_interpreted(presets, args.dtype, args.quick)


def _bench_gpu(presets: tuple[str, ...], dtype_name: str, quick: bool) -> int:
    import torch

    from ncompass.kernels.autotune.timing import CudaEventTimer
    from ncompass.kernels.shapes import preset
    from ncompass.kernels.tuning import tune_shape

    torch.backends.cudnn.benchmark = True
    dtype = getattr(torch, dtype_name)
    device = torch.device("cuda", torch.cuda.current_device())
    timer = CudaEventTimer(warmup=5, repeat=20)
    print(f"{torch.cuda.get_device_name(device)}, {dtype_name}, torch {torch.__version__}")
    header = f"{'op':<11}{'shape':<46}{'ncompass':>15}{'pytorch':>16}{'ratio':>9}  config"
    ratios: list[float] = []
    for name in presets:
        print(f"\n{name}\n{header}")
        shapes = preset(name)[:3] if quick else preset(name)
        for shape in shapes:
            tuned = tune_shape(shape, dtype_name)
            args, kwargs = shape.arguments(dtype, device)
            kernel, peer = _op_call(shape.op, args, kwargs), _peer_call(shape.op, args, kwargs)
            with torch.no_grad():
                ours, theirs = timer.measure(kernel), timer.measure(peer)
            if shape.flops():
                unit, scale = "TFLOPS", shape.flops() / 1e12
            else:  # memory-bound: bytes read and written
                unit, scale = "GB/s", _bytes(shape, dtype) / 1e9
            ratio = theirs / ours
            ratios.append(ratio)
            config = tuned.choice.config.describe() if tuned.choice else f"PyTorch: {tuned.skipped}"
            print(
                f"{_column(shape.op):<11}{shape.label:<46}{scale / ours * 1e3:>8.1f} {unit:<6}"
                f"{scale / theirs * 1e3:>9.1f} {unit:<6}{ratio:>8.2f}x  {config}"
            )
    geomean = _geomean(ratios)
    print(f"\ngeometric mean of ratios: {geomean:.2f}x over {len(ratios)} shapes")
    return 0


def _check_interpreted(presets: tuple[str, ...], dtype_name: str, quick: bool) -> int:
    import torch

    from ncompass.kernels import stats
    from ncompass.kernels.shapes import preset
    from ncompass.kernels.tolerances import TOLERANCES

    dtype = getattr(torch, dtype_name)
    rtol, atol = TOLERANCES[dtype_name]
    print(f"Triton interpreter, {dtype_name}: scaled-down shapes vs PyTorch (float32 reference),")
    print(f"tolerance |err| <= {atol} + {rtol} * |ref|; seconds: one interpreted call")
    print(f"{'op':<11}{'scaled shape':<34}{'max |err|':>11}{'err/bound':>11}{'seconds':>9}")
    failures = 0
    seen: set[tuple[str, str]] = set()
    for name in presets:
        shapes = preset(name)[:3] if quick else preset(name)
        for shape in (_scaled_down(s) for s in shapes):
            if (shape.op, shape.label) in seen:
                continue
            seen.add((shape.op, shape.label))
            args, kwargs = shape.arguments(dtype, "cpu")
            kernel = _op_call(shape.op, args, kwargs)
            exact = _peer_call(shape.op, _as_float(args), kwargs)
            with torch.no_grad():
                start = time.perf_counter()
                out = kernel()
                elapsed = time.perf_counter() - start
                expected = exact()
            error = (out.float() - expected).abs()
            worst = (error / (atol + rtol * expected.abs())).max().item()
            failures += worst > 1
            print(
                f"{_column(shape.op):<11}{shape.label:<34}{error.max().item():>11.2e}{worst:>11.2f}"
                f"{elapsed:>9.2f}  {'ok' if worst <= 1 else 'OUT OF TOLERANCE'}"
            )
    calls = {op: s.kernel_calls for op, s in stats().items()}
    fallbacks = {op: s.fallbacks for op, s in stats().items() if s.fallbacks}
    print(f"\nkernel calls: {calls}; fallbacks: {fallbacks or 'none'}")
    return 1 if failures else 0


def _dispatch_overhead(rounds: int = 15, number: int = 2000) -> int:
    import statistics
    import timeit

    import torch
    import torch.nn.functional as F

    from ncompass.kernels import ops

    graph = torch.ops.ncompass  # what Inductor's code calls: the ops' custom ops

    x, w, b = torch.randn(4, 8), torch.randn(16, 8), torch.randn(16)
    q = torch.randn(1, 2, 4, 8)
    cases: dict[str, dict[str, Callable[[], Any]]] = {
        "linear": {
            "pytorch": lambda: F.linear(x, w, b),
            "ops (eager)": lambda: ops.linear(x, w, b),
            "custom op (compiled)": lambda: graph.linear(x, w, b, "none"),
        },
        "layer_norm": {
            "pytorch": lambda: F.layer_norm(x, (8,)),
            "ops (eager)": lambda: ops.layer_norm(x, (8,)),
            "custom op (compiled)": lambda: graph.layer_norm(x, [8], None, None, 1e-5),
        },
        "attention": {
            "pytorch": lambda: F.scaled_dot_product_attention(q, q, q, is_causal=True),
            "ops (eager)": lambda: ops.scaled_dot_product_attention(q, q, q, is_causal=True),
            "custom op (compiled)": lambda: graph.scaled_dot_product_attention(
                q, q, q, None, 0.0, True, None, False
            ),
        },
    }
    print(
        f"Python cost of one call, tiny CPU tensors (PyTorch fallback), torch {torch.__version__}"
    )
    print(f"median of {rounds} interleaved rounds of {number} calls, µs per call")
    print(f"{'op':<12}{'pytorch':>10}{'ops (eager)':>14}{'custom op':>12}{'custom/eager':>15}")
    with torch.no_grad():
        for op, calls in cases.items():
            times: dict[str, list[float]] = {name: [] for name in calls}
            for _ in range(rounds):
                for name, call in calls.items():
                    times[name].append(timeit.timeit(call, number=number) / number * 1e6)
            pytorch, eager, custom = (statistics.median(t) for t in times.values())
            print(f"{op:<12}{pytorch:>10.2f}{eager:>14.2f}{custom:>12.2f}{custom / eager:>14.2f}x")
        check = timeit.repeat(torch.compiler.is_compiling, number=100_000, repeat=rounds)
    print(
        f"the eager op's added check, torch.compiler.is_compiling(): "
        f"{statistics.median(check) / 100_000 * 1e6:.3f} µs"
    )
    return 0


def _op_call(op: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Callable[[], Any]:
    """The ncompass op on these arguments."""
    from ncompass.kernels import ops

    function = getattr(ops, op)
    return lambda: function(*args, **kwargs)


def _peer_call(op: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Callable[[], Any]:
    """The PyTorch peer (cuBLAS / cuDNN / ATen) on these arguments."""
    from ncompass.kernels import reference

    function = getattr(reference, op)
    extra = dict(kwargs)
    if "activation" in kwargs:  # the references spell "no activation" as "none"
        extra["activation"] = kwargs["activation"] or "none"
    return lambda: function(*args, **extra)


def _scaled_down(shape: Any) -> Any:
    """A shape the interpreter runs in about a second, keeping the op's geometry."""
    from ncompass.kernels.shapes import OpShape

    sizes = dict(shape.sizes)
    if shape.op == "conv2d":
        (_, c, h, _), (k, _, r, s) = sizes["x"], sizes["w"]
        side = min(h, max(r, 12))
        channels = min(c, 8)
        sizes = {"x": (1, channels, side, side), "w": (min(k, 16), channels, r, s)}
    elif shape.op == "linear":
        k = min(sizes["x"][-1], 256)
        sizes = {"x": (min(_rows(sizes["x"]), 48), k), "w": (min(sizes["w"][0], 192), k)}
    elif shape.op == "matmul":
        (m, k), (_, n) = sizes["a"], sizes["b"]
        sizes = {"a": (min(m, 48), min(k, 256)), "b": (min(k, 256), min(n, 192))}
    elif shape.op == "scaled_dot_product_attention":
        *_, length, head = sizes["q"]
        sizes = {"q": (1, 2, min(length, 48), head)}
    else:
        sizes = {"x": (min(_rows(sizes["x"]), 16), sizes["x"][-1])}
    label = ",".join(f"{name}={'x'.join(map(str, dims))}" for name, dims in sizes.items())
    return OpShape(shape.op, sizes, shape.options, label)


def _column(op: str) -> str:
    """The op's name in the tables' first column (11 characters)."""
    return "attention" if op == "scaled_dot_product_attention" else op


def _rows(size: tuple[int, ...]) -> int:
    rows = 1
    for dim in size[:-1]:
        rows *= dim
    return rows


def _as_float(args: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(arg.float() if hasattr(arg, "float") else arg for arg in args)


def _bytes(shape: Any, dtype: Any) -> int:
    import torch

    return 2 * shape.elements() * torch.empty((), dtype=dtype).element_size()


def _geomean(values: list[float]) -> float:
    import math

    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


if __name__ == "__main__":
    raise SystemExit(main())
