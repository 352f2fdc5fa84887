"""The conv2d kernel: an implicit GEMM over NCHW tensors (no im2col buffer is built).

Row ``m`` of the GEMM is output pixel ``(n, p, q)``; column ``j`` is output channel ``j``; the
reduction index ``k`` is ``(c, r, s)``, the same order as a contiguous ``(K, C, R, S)`` weight,
so the weight is read as a plain ``K x CRS`` matrix and the input tile is gathered through the
window arithmetic (zero outside the padded border).
"""

# Triton reads kernel annotations (tl.constexpr) as meaning: parameters stay unannotated.
# mypy: disable-error-code="untyped-decorator, no-untyped-def"

from __future__ import annotations

from typing import Any

import triton
import triton.language as tl

from ncompass.kernels.autotune.config import KernelConfig
from ncompass.kernels.jit._common import accumulate, activate, grouped_tile
from ncompass.kernels.jit._launch import input_precision, is_interpreted, upcast_operands
from ncompass.kernels.problems import Conv2dProblem


@triton.jit
def conv2d_kernel(
    x_ptr, w_ptr, bias_ptr, out_ptr,
    BATCH, C, H, W, K, R, S, P, Q,
    stride_h, stride_w, pad_h, pad_w,
    HAS_BIAS: tl.constexpr, ACTIVATION: tl.constexpr,
    UPCAST: tl.constexpr, INPUT_PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):  # fmt: skip
    """One ``BLOCK_M`` pixels x ``BLOCK_N`` channels tile of the output."""
    gemm_m = BATCH * P * Q
    gemm_k = C * R * S
    tile_m, tile_n = grouped_tile(tl.program_id(0), gemm_m, K, BLOCK_M, BLOCK_N, GROUP_M)
    pixels = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)
    channels = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)
    image = pixels // (P * Q)
    position = pixels % (P * Q)
    top = (position // Q) * stride_h - pad_h
    left = (position % Q) * stride_w - pad_w
    pixel_ok = pixels < gemm_m
    channel_ok = channels < K
    acc = tl.full((BLOCK_M, BLOCK_N), 0.0, tl.float32)
    for k0 in range(0, gemm_k, BLOCK_K):
        depth = k0 + tl.arange(0, BLOCK_K)
        depth_ok = depth < gemm_k
        c = depth // (R * S)
        r = (depth % (R * S)) // S
        s = depth % S
        h = top[:, None] + r[None, :]
        w = left[:, None] + s[None, :]
        inside = (h >= 0) & (h < H) & (w >= 0) & (w < W)
        x_offsets = ((image[:, None] * C + c[None, :]) * H + h) * W + w
        x_mask = pixel_ok[:, None] & depth_ok[None, :] & inside
        x = tl.load(x_ptr + x_offsets, mask=x_mask, other=0.0)
        w_offsets = channels[None, :] * gemm_k + depth[:, None]
        weights = tl.load(
            w_ptr + w_offsets, mask=depth_ok[:, None] & channel_ok[None, :], other=0.0
        )
        acc = accumulate(x, weights, acc, UPCAST, INPUT_PRECISION)
    if HAS_BIAS:
        acc += tl.load(bias_ptr + channels, mask=channel_ok, other=0.0).to(tl.float32)[None, :]
    acc = activate(acc, ACTIVATION)
    out_offsets = (image[:, None] * K + channels[None, :]) * (P * Q) + position[:, None]
    out_mask = pixel_ok[:, None] & channel_ok[None, :]
    tl.store(out_ptr + out_offsets, acc.to(out_ptr.dtype.element_ty), mask=out_mask)


INTERPRETED = is_interpreted(conv2d_kernel)


def launch(
    x: Any, weight: Any, bias: Any | None, out: Any, problem: Conv2dProblem, config: KernelConfig
) -> None:
    """Run the convolution of contiguous NCHW ``x`` with ``weight`` into ``out`` with ``config``."""
    gemm = problem.gemm()
    tiles = triton.cdiv(gemm.m, config["BLOCK_M"]) * triton.cdiv(gemm.n, config["BLOCK_N"])
    conv2d_kernel[(tiles,)](
        x, weight, out if bias is None else bias, out,
        problem.batch, problem.in_channels, problem.height, problem.width,
        problem.out_channels, problem.kernel_h, problem.kernel_w, problem.out_h, problem.out_w,
        problem.stride_h, problem.stride_w, problem.pad_h, problem.pad_w,
        HAS_BIAS=bias is not None,
        ACTIVATION=problem.activation,
        UPCAST=upcast_operands(problem.dtype, INTERPRETED),
        INPUT_PRECISION=input_precision(problem.dtype, INTERPRETED, "conv"),
        **config.launch_options(),
    )  # fmt: skip


__all__ = ["INTERPRETED", "conv2d_kernel", "launch"]
