"""The GEMM kernel behind ``linear`` and ``matmul``: tiled, grouped, with a fused epilogue."""

# Triton reads kernel annotations (tl.constexpr) as meaning: parameters stay unannotated.
# mypy: disable-error-code="untyped-decorator, no-untyped-def"

from __future__ import annotations

from typing import Any

import triton
import triton.language as tl

from ncompass.kernels.autotune.config import KernelConfig
from ncompass.kernels.jit._common import accumulate, activate, grouped_tile
from ncompass.kernels.jit._launch import input_precision, is_interpreted, upcast_operands
from ncompass.kernels.problems import GemmProblem


@triton.jit
def gemm_kernel(
    a_ptr, b_ptr, bias_ptr, out_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_om, stride_on,
    HAS_BIAS: tl.constexpr, ACTIVATION: tl.constexpr,
    UPCAST: tl.constexpr, INPUT_PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):  # fmt: skip
    """``out = act(a @ b + bias)`` for one ``BLOCK_M x BLOCK_N`` output tile."""
    tile_m, tile_n = grouped_tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    rows = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)
    depth = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rows[:, None] * stride_am + depth[None, :] * stride_ak
    b_ptrs = b_ptr + depth[:, None] * stride_bk + cols[None, :] * stride_bn
    acc = tl.full((BLOCK_M, BLOCK_N), 0.0, tl.float32)
    for k0 in range(0, K, BLOCK_K):
        # masked loads read zeros past the edges, so sizes need not be multiples of the tiles
        a = tl.load(a_ptrs, mask=(rows[:, None] < M) & (depth[None, :] < K - k0), other=0.0)
        b = tl.load(b_ptrs, mask=(depth[:, None] < K - k0) & (cols[None, :] < N), other=0.0)
        acc = accumulate(a, b, acc, UPCAST, INPUT_PRECISION)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    if HAS_BIAS:
        acc += tl.load(bias_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)[None, :]
    acc = activate(acc, ACTIVATION)
    out_ptrs = out_ptr + rows[:, None] * stride_om + cols[None, :] * stride_on
    tl.store(
        out_ptrs, acc.to(out_ptr.dtype.element_ty), mask=(rows[:, None] < M) & (cols[None, :] < N)
    )


INTERPRETED = is_interpreted(gemm_kernel)


def launch(
    a: Any, b: Any, bias: Any | None, out: Any, problem: GemmProblem, config: KernelConfig
) -> None:
    """Run ``out[M, N] = act(a[M, K] @ b[K, N] + bias)`` with ``config``.

    ``b`` may be any strided ``K x N`` view (``weight.t()`` of a linear layer costs nothing).
    """
    tiles = triton.cdiv(problem.m, config["BLOCK_M"]) * triton.cdiv(problem.n, config["BLOCK_N"])
    gemm_kernel[(tiles,)](
        a, b, out if bias is None else bias, out,
        problem.m, problem.n, problem.k,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), out.stride(0), out.stride(1),
        HAS_BIAS=bias is not None,
        ACTIVATION=problem.activation,
        UPCAST=upcast_operands(problem.dtype, INTERPRETED),
        INPUT_PRECISION=input_precision(problem.dtype, INTERPRETED, "matmul"),
        **config.launch_options(),
    )  # fmt: skip


__all__ = ["INTERPRETED", "gemm_kernel", "launch"]
