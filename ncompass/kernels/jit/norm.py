"""The row-normalisation kernel behind ``layer_norm`` and ``rms_norm``.

Each program normalises ``BLOCK_M`` whole rows held in registers (``BLOCK_N`` is the row length
rounded up to a power of two), with statistics in float32 whatever the input dtype: one read and
one write of the tensor, where the unfused PyTorch composite of RMSNorm makes several passes.
"""

# Triton reads kernel annotations (tl.constexpr) as meaning: parameters stay unannotated.
# mypy: disable-error-code="untyped-decorator, no-untyped-def"

from __future__ import annotations

from typing import Any

import triton
import triton.language as tl

from ncompass.kernels.autotune.config import KernelConfig
from ncompass.kernels.jit._common import row_sum
from ncompass.kernels.jit._launch import is_interpreted
from ncompass.kernels.problems import NormProblem, next_power_of_2


@triton.jit
def norm_kernel(
    x_ptr, weight_ptr, bias_ptr, out_ptr,
    ROWS, COLS, eps,
    RMS: tl.constexpr, HAS_WEIGHT: tl.constexpr, HAS_BIAS: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):  # fmt: skip
    """Normalise rows ``[pid * BLOCK_M, (pid + 1) * BLOCK_M)``."""
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    col_ok = cols < COLS
    mask = (rows[:, None] < ROWS) & col_ok[None, :]
    offsets = rows[:, None] * COLS + cols[None, :]
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    if RMS:
        centred = x
    else:
        mean = row_sum(x) / COLS
        # padding columns must not count towards the variance
        centred = tl.where(mask, x - mean[:, None], 0.0)
    variance = row_sum(centred * centred) / COLS
    y = centred * tl.math.rsqrt(variance + eps)[:, None]
    if HAS_WEIGHT:
        y *= tl.load(weight_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)[None, :]
    if HAS_BIAS:
        y += tl.load(bias_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)[None, :]
    tl.store(out_ptr + offsets, y.to(out_ptr.dtype.element_ty), mask=mask)


INTERPRETED = is_interpreted(norm_kernel)


def launch(
    x: Any,
    weight: Any | None,
    bias: Any | None,
    out: Any,
    problem: NormProblem,
    config: KernelConfig,
) -> None:
    """Normalise the rows of contiguous ``x`` (viewed as ``rows x cols``) into ``out``."""
    norm_kernel[(triton.cdiv(problem.rows, config["BLOCK_M"]),)](
        x, out if weight is None else weight, out if bias is None else bias, out,
        problem.rows, problem.cols, problem.eps,
        RMS=problem.rms,
        HAS_WEIGHT=weight is not None,
        HAS_BIAS=bias is not None,
        BLOCK_N=next_power_of_2(problem.cols),
        **config.launch_options(),
    )  # fmt: skip


__all__ = ["INTERPRETED", "launch", "norm_kernel"]
