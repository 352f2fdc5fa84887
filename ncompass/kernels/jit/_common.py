"""Device functions shared by the kernels: tile order, the dot, the epilogue, row reductions.

The kernels use only builtins of ``triton.language``, never its own ``@jit`` functions
(``tl.cdiv``, ``tl.sum``, ``tl.sigmoid``, ``tl.zeros``): those are decorated when triton is first
imported, which the torch profiler does, often before ``TRITON_INTERPRET=1`` is set, and a kernel
made for the interpreter cannot call compiled ones. Equivalents defined here are decorated with
the kernels, in the same mode.
"""

# Triton reads kernel annotations (tl.constexpr) as meaning: parameters stay unannotated.
# mypy: disable-error-code="untyped-decorator, no-untyped-def"

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def grouped_tile(
    pid, rows, cols, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr
):
    """The (row, column) tile of program ``pid``, walking ``GROUP_M`` row tiles per column.

    Neighbouring programs then share both operand tiles in L2, instead of sweeping a whole row
    of output tiles that each need a different column of the right operand.
    """
    tiles_m = (rows + BLOCK_M - 1) // BLOCK_M
    tiles_n = (cols + BLOCK_N - 1) // BLOCK_N
    per_group = GROUP_M * tiles_n
    group = pid // per_group
    first_m = group * GROUP_M
    group_rows = tl.minimum(tiles_m - first_m, GROUP_M)
    tile_m = first_m + (pid % per_group) % group_rows
    tile_n = (pid % per_group) // group_rows
    return tile_m, tile_n


@triton.jit
def accumulate(a, b, acc, UPCAST: tl.constexpr, INPUT_PRECISION: tl.constexpr):
    """``acc + a @ b`` with a float32 accumulator.

    ``UPCAST`` converts the operands to float32 first. The launchers set it in Triton's
    interpreter for bfloat16, whose ``tl.dot`` multiplies the raw bit patterns there
    (triton-lang/triton#11584). Products of two 16-bit floats are exact in float32, so the
    result equals what tensor cores compute.
    """
    if UPCAST:
        a = a.to(tl.float32)
        b = b.to(tl.float32)
    return tl.dot(a, b, acc, input_precision=INPUT_PRECISION)


@triton.jit
def activate(x, ACTIVATION: tl.constexpr):
    """Apply the fused activation (``none``, ``relu``, ``gelu``, ``gelu_tanh``, ``silu``)."""
    if ACTIVATION == "relu":
        x = tl.maximum(x, 0.0)
    elif ACTIVATION == "gelu":
        x = 0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476))
    elif ACTIVATION == "gelu_tanh":
        inner = 0.7978845608028654 * (x + 0.044715 * x * x * x)
        # tanh(y) = 2 * sigmoid(2y) - 1: tl has no tanh on every backend
        x = 0.5 * x * (1.0 + (2.0 * sigmoid(2.0 * inner) - 1.0))
    elif ACTIVATION == "silu":
        x = x * sigmoid(x)
    return x


@triton.jit
def sigmoid(x):
    """``1 / (1 + exp(-x))``, as ``tl.sigmoid`` computes it."""
    return 1.0 / (1.0 + tl.exp(-x))


@triton.jit
def add(a, b):
    """The combine function of a sum."""
    return a + b


# tl.sum's own combine function: the interpreter recognises it and sums with numpy, where any
# other combine function is called element by element (~100x slower). It is only ever passed to
# tl.reduce, never called, so its mode does not matter; our `add` stands in if it is renamed.
SUM_COMBINE = getattr(tl.standard, "_sum_combine", add)


@triton.jit
def row_sum(x):
    """The sum of each row of a 2-D block (``tl.sum(x, axis=1)``)."""
    return tl.reduce(x, 1, SUM_COMBINE)


@triton.jit
def larger(a, b):
    """The combine function of a maximum."""
    return tl.maximum(a, b)


# As for the sum: the interpreter reduces tl.max's own combine function with numpy.
MAX_COMBINE = getattr(tl.standard, "_elementwise_max", larger)


@triton.jit
def row_max(x):
    """The maximum of each row of a 2-D block (``tl.max(x, axis=1)``)."""
    return tl.reduce(x, 1, MAX_COMBINE)
