"""Tuning ahead of time (``ncompass kernels tune``): measure now, not at a model's first call."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ncompass.kernels import conditions, execute
from ncompass.kernels.autotune.cache import UnusableCachedChoice
from ncompass.kernels.autotune.tuner import Choice, autotuner
from ncompass.kernels.backend import interpreter_requested, triton_installed, unavailable_reason
from ncompass.kernels.catalog import KERNEL_MODULES, op_named
from ncompass.kernels.errors import KernelError
from ncompass.kernels.shapes import OpShape


@dataclass(frozen=True)
class TuneResult:
    """The outcome for one shape and dtype.

    Attributes:
        shape: The shape.
        dtype: Its dtype name.
        choice: The config chosen (None when skipped).
        skipped: Why the kernel does not apply to this shape, if it does not.
        cache_file: Where the choice is stored.
        refused: The cached choice is outside the search space (``skipped`` says why).
    """

    shape: OpShape
    dtype: str
    choice: Choice | None
    skipped: str | None
    cache_file: Path | None
    refused: bool = False


def tuning_device() -> Any:
    """The torch device tuning runs on: CUDA, or the CPU under ``TRITON_INTERPRET=1``.

    Raises:
        KernelError: triton is missing, or there is no CUDA device and no interpreter.
    """
    if not triton_installed():
        raise KernelError("triton is not installed; pip install 'ncompass[kernels]'")
    import torch

    if interpreter_requested():
        return torch.device("cpu")
    if torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    raise KernelError(
        "no CUDA device to tune on; set TRITON_INTERPRET=1 to tune for Triton's interpreter "
        "(its timings are the CPU's and say nothing about a GPU)"
    )


def tune_shape(shape: OpShape, dtype: str, *, force: bool = False) -> TuneResult:
    """Choose (and cache) the config for ``shape`` in ``dtype`` on the tuning device.

    Args:
        shape: The op and sizes.
        dtype: ``float32``, ``float16`` or ``bfloat16``.
        force: Measure again even when a choice is cached.

    Raises:
        KernelError: no device to tune on, or an unknown dtype.
    """
    import torch

    device = tuning_device()
    torch_dtype = getattr(torch, dtype, None)
    if not isinstance(torch_dtype, torch.dtype):
        raise KernelError(f"unknown dtype {dtype!r}; use float32, float16 or bfloat16")
    args, kwargs = shape.arguments(torch_dtype, device)
    with torch.no_grad():
        launch = kernel_launch(shape.op, args, kwargs)
        if isinstance(launch, str):
            return TuneResult(shape, dtype, None, launch, None)
        cache_file = autotuner().cache.path(launch.key())
        try:
            choice = launch.choose(force=force)
        except UnusableCachedChoice as refused:
            why = f"{refused.reason}; --force tunes it again"
            return TuneResult(shape, dtype, None, why, cache_file, refused=True)
    return TuneResult(shape, dtype, choice, None, cache_file)


def kernel_launch(
    op: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> execute.KernelLaunch | str:
    """The kernel launch of ``op(*args, **kwargs)`` (as built by ``OpShape.arguments``), or why
    the kernel does not apply."""
    problem, build = _prepare(op, args, kwargs)
    if isinstance(problem, str):
        return problem
    tensors = [value for value in args if hasattr(value, "device")]
    reason = unavailable_reason(tensors, KERNEL_MODULES[op_named(op).kernel])
    return reason if reason is not None else build(problem)


def _prepare(
    op: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[Any, Callable[[Any], execute.KernelLaunch]]:
    """The call's problem (or why not) and how to build its launch."""
    problem: execute.Problem | str
    activation = conditions.check_activation(kwargs.get("activation"))
    if op == "scaled_dot_product_attention":
        q, k, v = args
        causal = bool(kwargs.get("is_causal", False))
        problem = conditions.attention_problem(q, k, v, None, 0.0, causal, None, False)
        return problem, lambda problem: execute.attention_launch(problem, q, k, v)
    if op == "conv2d":
        x, weight, bias, stride, padding = args
        problem = conditions.conv2d_problem(x, weight, bias, stride, padding, 1, 1, activation)
        return problem, lambda problem: execute.conv2d_launch(problem, x, weight, bias)
    if op == "linear":
        x, weight, bias = args
        rows = x.reshape(-1, x.shape[-1])
        problem = conditions.gemm_problem(rows, weight, bias, activation, b_is_weight=True)
        return problem, lambda problem: execute.gemm_launch(problem, rows, weight.t(), bias)
    if op == "matmul":
        a, b = args
        problem = conditions.gemm_problem(a, b, None, activation, b_is_weight=False)
        return problem, lambda problem: execute.gemm_launch(problem, a, b, None)
    rms = op == "rms_norm"
    x, shape, weight = args[:3]
    bias = None if rms else args[3]
    problem = conditions.norm_problem(x, shape, weight, bias, 1e-6 if rms else 1e-5, rms=rms)
    return problem, lambda problem: execute.norm_launch(problem, x, weight, bias)


__all__ = ["TuneResult", "kernel_launch", "tune_shape", "tuning_device"]
