"""The attention kernel against ``F.scaled_dot_product_attention`` in Triton's interpreter:
query and key lengths of any size (1, odd, longer or shorter than each other), head sizes
that are not powers of two, causal or not, transposed views, every candidate tile config."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from ncompass.kernels import execute
from ncompass.kernels.autotune.config import KernelConfig
from ncompass.kernels.autotune.spaces import attention_candidates
from ncompass.kernels.problems import AttentionProblem
from tests.kernels.checks import DTYPES, assert_matches_reference, randn

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("interpreter")]


@st.composite
def attention_cases(draw: st.DrawFn) -> tuple[AttentionProblem, KernelConfig, bool]:
    head_dim = draw(st.sampled_from([1, 8, 16, 24, 64, 80]))
    problem = AttentionProblem(
        batch=draw(st.integers(1, 2)),
        heads=draw(st.integers(1, 3)),
        q_len=draw(st.integers(1, 70)),
        kv_len=draw(st.integers(1, 70)),
        head_dim=head_dim,
        dtype=draw(st.sampled_from(sorted(DTYPES))),
        causal=draw(st.booleans()),
        scale=draw(st.sampled_from([head_dim**-0.5, 0.3])),
    )
    config = draw(st.sampled_from(attention_candidates(problem, interpreted=True)))
    return problem, config, draw(st.booleans())


@settings(max_examples=80, deadline=None)
@given(attention_cases())
def test_attention_matches_pytorch_for_any_lengths_dtype_and_config(
    case: tuple[AttentionProblem, KernelConfig, bool],
) -> None:
    problem, config, transposed = case
    b, h, length, kv, e = (problem.batch, problem.heads, problem.q_len, problem.kv_len, problem.head_dim)  # fmt: skip

    def tensor(seq: int, seed: int) -> torch.Tensor:
        if transposed:  # (batch, seq, heads, dim) seen as (batch, heads, seq, dim), as models do
            return randn(b, seq, h, e, dtype=problem.dtype, seed=seed).transpose(1, 2)
        return randn(b, h, seq, e, dtype=problem.dtype, seed=seed)

    q, k, v = tensor(length, 1), tensor(kv, 2), tensor(kv, 3)
    launch = execute.attention_launch(problem, q, k, v)
    launch.launch(config)
    expected = F.scaled_dot_product_attention(
        q.float(), k.float(), v.float(), is_causal=problem.causal, scale=problem.scale
    )
    assert_matches_reference(launch.output, expected, problem.dtype)
