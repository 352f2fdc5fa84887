"""The attention kernel behind ``scaled_dot_product_attention``: one pass, online softmax.

Each program computes ``BLOCK_M`` query rows of one (batch, head) pair. It walks the keys and
values in blocks of ``BLOCK_N``, keeping each row's running maximum and sum of exponentials
(FlashAttention's online softmax), so the ``L x S`` score matrix is never written to memory:
one read of ``q``, ``k`` and ``v``, one write of the output, where PyTorch's math path
materialises the scores and the probabilities. With ``CAUSAL`` the blocks wholly above the
diagonal are skipped.
"""

# Triton reads kernel annotations (tl.constexpr) as meaning: parameters stay unannotated.
# mypy: disable-error-code="untyped-decorator, no-untyped-def"

from __future__ import annotations

from typing import Any

import triton
import triton.language as tl

from ncompass.kernels.autotune.config import KernelConfig
from ncompass.kernels.jit._common import row_max, row_sum
from ncompass.kernels.jit._launch import input_precision, is_interpreted, upcast_operands
from ncompass.kernels.problems import AttentionProblem, next_power_of_2


@triton.jit
def attention_kernel(
    q_ptr, k_ptr, v_ptr, out_ptr,
    HEADS, Q_LEN, KV_LEN, HEAD_DIM, scale,
    stride_qb, stride_qh, stride_qm, stride_qd,
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    CAUSAL: tl.constexpr, UPCAST: tl.constexpr, INPUT_PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
):  # fmt: skip
    """Output rows ``[pid_m * BLOCK_M, (pid_m + 1) * BLOCK_M)`` of pair ``program_id(1)``."""
    pid_m = tl.program_id(0)
    pair = tl.program_id(1)
    batch = pair // HEADS
    head = pair % HEADS
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, BLOCK_D)
    row_ok = rows < Q_LEN
    dim_ok = dims < HEAD_DIM
    q_base = q_ptr + batch * stride_qb + head * stride_qh
    k_base = k_ptr + batch * stride_kb + head * stride_kh
    v_base = v_ptr + batch * stride_vb + head * stride_vh
    q_ptrs = q_base + rows[:, None] * stride_qm + dims[None, :] * stride_qd
    q = tl.load(q_ptrs, mask=row_ok[:, None] & dim_ok[None, :], other=0.0)
    if UPCAST:
        q = q.to(tl.float32)
    running_max = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    running_sum = tl.full((BLOCK_M,), 0.0, tl.float32)
    acc = tl.full((BLOCK_M, BLOCK_D), 0.0, tl.float32)
    end = KV_LEN
    if CAUSAL:
        # query i sees keys j <= i (PyTorch's top-left aligned mask): later blocks are skipped
        end = tl.minimum(KV_LEN, (pid_m + 1) * BLOCK_M)
    for start in range(0, end, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        col_ok = cols < KV_LEN
        k_ptrs = k_base + cols[None, :] * stride_kn + dims[:, None] * stride_kd
        k = tl.load(k_ptrs, mask=dim_ok[:, None] & col_ok[None, :], other=0.0)
        v_ptrs = v_base + cols[:, None] * stride_vn + dims[None, :] * stride_vd
        v = tl.load(v_ptrs, mask=col_ok[:, None] & dim_ok[None, :], other=0.0)
        if UPCAST:
            k = k.to(tl.float32)
            v = v.to(tl.float32)
        scores = tl.dot(q, k, input_precision=INPUT_PRECISION) * scale
        visible = col_ok[None, :]
        if CAUSAL:
            visible = visible & (cols[None, :] <= rows[:, None])
        # every row sees key 0 in the first block, so the maximum is finite from then on
        scores = tl.where(visible, scores, float("-inf"))
        new_max = tl.maximum(running_max, row_max(scores))
        rescale = tl.exp(running_max - new_max)
        probabilities = tl.exp(scores - new_max[:, None])
        running_sum = running_sum * rescale + row_sum(probabilities)
        acc = acc * rescale[:, None]
        acc = tl.dot(probabilities.to(v.dtype), v, acc, input_precision=INPUT_PRECISION)
        running_max = new_max
    out = acc / running_sum[:, None]
    out_ptrs = out_ptr + (pair * Q_LEN + rows[:, None]) * HEAD_DIM + dims[None, :]
    tl.store(out_ptrs, out.to(out_ptr.dtype.element_ty), mask=row_ok[:, None] & dim_ok[None, :])


INTERPRETED = is_interpreted(attention_kernel)


def launch(
    q: Any, k: Any, v: Any, out: Any, problem: AttentionProblem, config: KernelConfig
) -> None:
    """Attention of 4-D ``(batch, heads, seq, dim)`` views (any strides) into contiguous ``out``."""
    grid = (triton.cdiv(problem.q_len, config["BLOCK_M"]), problem.batch * problem.heads)
    attention_kernel[grid](
        q, k, v, out,
        problem.heads, problem.q_len, problem.kv_len, problem.head_dim, problem.scale,
        *q.stride(), *k.stride(), *v.stride(),
        CAUSAL=problem.causal,
        UPCAST=upcast_operands(problem.dtype, INTERPRETED),
        INPUT_PRECISION=input_precision(problem.dtype, INTERPRETED, "matmul"),
        BLOCK_D=max(16, next_power_of_2(problem.head_dim)),
        **config.launch_options(),
    )  # fmt: skip


__all__ = ["INTERPRETED", "attention_kernel", "launch"]
