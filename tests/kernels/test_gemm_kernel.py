"""The GEMM kernel against ``F.linear`` / ``torch.matmul`` in Triton's interpreter, for every
candidate config, odd sizes, one-row problems and every fused activation."""

from __future__ import annotations

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ncompass.kernels import execute, reference
from ncompass.kernels.autotune.config import KernelConfig
from ncompass.kernels.autotune.spaces import gemm_candidates
from ncompass.kernels.problems import ACTIVATIONS, GemmProblem
from tests.kernels.checks import DTYPES, assert_matches_reference, randn

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("interpreter")]


@st.composite
def gemm_cases(draw: st.DrawFn) -> tuple[GemmProblem, KernelConfig, bool]:
    problem = GemmProblem(
        m=draw(st.integers(1, 130)),
        n=draw(st.integers(1, 130)),
        k=draw(st.integers(1, 150)),
        dtype=draw(st.sampled_from(sorted(DTYPES))),
        has_bias=draw(st.booleans()),
        activation=draw(st.sampled_from(ACTIVATIONS)),
    )
    config = draw(st.sampled_from(gemm_candidates(problem, interpreted=True)))
    return problem, config, draw(st.booleans())


def _check(problem: GemmProblem, config: KernelConfig, weight_layout: bool) -> None:
    a = randn(problem.m, problem.k, dtype=problem.dtype, seed=1)
    scale = problem.k**-0.5
    if weight_layout:  # a linear layer's (N, K) weight, read through a transposed view
        weight = randn(problem.n, problem.k, dtype=problem.dtype, scale=scale, seed=2)
        b = weight.t()
    else:
        b = randn(problem.k, problem.n, dtype=problem.dtype, scale=scale, seed=2)
    bias = randn(problem.n, dtype=problem.dtype, seed=3) if problem.has_bias else None
    launch = execute.gemm_launch(problem, a, b, bias)
    launch.launch(config)
    expected = reference.activate(
        a.float() @ b.float() + (bias.float() if bias is not None else 0.0), problem.activation
    )
    assert_matches_reference(launch.output, expected, problem.dtype)


@settings(max_examples=100, deadline=None)
@given(gemm_cases())
@example((GemmProblem(1, 64, 64, "float16", True, "none"), KernelConfig.of(BLOCK_M=16, BLOCK_N=64, BLOCK_K=64, GROUP_M=1), True))  # fmt: skip
@example((GemmProblem(64, 64, 64, "float32", False, "gelu"), KernelConfig.of(BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, GROUP_M=8), False))  # fmt: skip
@example((GemmProblem(33, 17, 1, "bfloat16", True, "silu"), KernelConfig.of(BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, GROUP_M=8), True))  # fmt: skip
def test_gemm_matches_pytorch_for_any_shape_dtype_and_config(
    case: tuple[GemmProblem, KernelConfig, bool],
) -> None:
    _check(*case)


def test_grouped_tile_order_covers_every_tile_once() -> None:
    # 5 x 3 tiles with groups of 2 rows: a last, partial group must still be covered
    problem = GemmProblem(80, 48, 16, "float32", False, "none")
    _check(problem, KernelConfig.of(BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, GROUP_M=2), True)


def test_fused_activations_match_their_pytorch_functions() -> None:
    x = torch.linspace(-6, 6, 48).reshape(3, 16)
    identity = torch.eye(16)
    config = KernelConfig.of(BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, GROUP_M=1)
    for activation in ACTIVATIONS:
        launch = execute.gemm_launch(
            GemmProblem(3, 16, 16, "float32", False, activation), x, identity, None
        )
        launch.launch(config)
        assert_matches_reference(launch.output, reference.activate(x, activation), "float32")
