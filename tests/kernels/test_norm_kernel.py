"""The row-normalisation kernel against ``F.layer_norm`` / ``F.rms_norm`` in Triton's
interpreter: rows of any length (1, odd, not a power of two), with and without affine
parameters, several rows per program."""

from __future__ import annotations

import pytest
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from ncompass.kernels import execute
from ncompass.kernels.autotune.config import KernelConfig
from ncompass.kernels.autotune.spaces import norm_candidates
from ncompass.kernels.problems import NormProblem
from tests.kernels.checks import DTYPES, assert_matches_reference, randn

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("interpreter")]


@st.composite
def norm_cases(draw: st.DrawFn) -> tuple[NormProblem, KernelConfig]:
    rms = draw(st.booleans())
    problem = NormProblem(
        rows=draw(st.integers(1, 70)),
        cols=draw(st.integers(1, 700)),
        dtype=draw(st.sampled_from(sorted(DTYPES))),
        rms=rms,
        eps=draw(st.sampled_from([1e-5, 1e-6])),
        has_weight=draw(st.booleans()),
        has_bias=not rms and draw(st.booleans()),
    )
    return problem, draw(st.sampled_from(norm_candidates(problem, interpreted=True)))


@settings(max_examples=100, deadline=None)
@given(norm_cases())
def test_norms_match_pytorch_for_any_row_length_dtype_and_config(
    case: tuple[NormProblem, KernelConfig],
) -> None:
    problem, config = case
    # an offset mean and a large spread: LayerNorm must centre before it squares
    x = randn(problem.rows, problem.cols, dtype=problem.dtype, scale=3.0, seed=1) + 5
    weight = randn(problem.cols, dtype=problem.dtype, seed=2) if problem.has_weight else None
    bias = randn(problem.cols, dtype=problem.dtype, seed=3) if problem.has_bias else None
    launch = execute.norm_launch(problem, x, weight, bias)
    launch.launch(config)
    w = weight.float() if weight is not None else None
    if problem.rms:
        expected = F.rms_norm(x.float(), (problem.cols,), w, problem.eps)
    else:
        b = bias.float() if bias is not None else None
        expected = F.layer_norm(x.float(), (problem.cols,), w, b, problem.eps)
    assert_matches_reference(launch.output, expected, problem.dtype)
