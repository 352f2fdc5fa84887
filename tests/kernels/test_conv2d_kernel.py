"""The implicit-GEMM conv2d kernel against ``F.conv2d`` in Triton's interpreter: any stride,
padding, filter and image size (1x1 images, filters as large as the padded image, batch 1),
every candidate config."""

from __future__ import annotations

import pytest
import torch.nn.functional as F
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ncompass.kernels import execute, reference
from ncompass.kernels.autotune.config import KernelConfig
from ncompass.kernels.autotune.spaces import conv2d_candidates
from ncompass.kernels.problems import Conv2dProblem
from tests.kernels.checks import DTYPES, assert_matches_reference, randn

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("interpreter")]


@st.composite
def conv_cases(draw: st.DrawFn) -> tuple[Conv2dProblem, KernelConfig]:
    kernel_h, kernel_w = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    pad_h, pad_w = draw(st.integers(0, 2)), draw(st.integers(0, 2))
    # the padded image must hold one window
    height = draw(st.integers(max(1, kernel_h - 2 * pad_h), 14))
    width = draw(st.integers(max(1, kernel_w - 2 * pad_w), 14))
    problem = Conv2dProblem(
        batch=draw(st.integers(1, 3)),
        in_channels=draw(st.integers(1, 6)),
        height=height,
        width=width,
        out_channels=draw(st.integers(1, 20)),
        kernel_h=kernel_h,
        kernel_w=kernel_w,
        stride_h=draw(st.integers(1, 3)),
        stride_w=draw(st.integers(1, 3)),
        pad_h=pad_h,
        pad_w=pad_w,
        dtype=draw(st.sampled_from(sorted(DTYPES))),
        has_bias=draw(st.booleans()),
        activation=draw(st.sampled_from(["none", "relu"])),
    )
    config = draw(st.sampled_from(conv2d_candidates(problem, interpreted=True)))
    return problem, config


def _check(problem: Conv2dProblem, config: KernelConfig) -> None:
    fan_in = problem.in_channels * problem.kernel_h * problem.kernel_w
    x = randn(problem.batch, problem.in_channels, problem.height, problem.width, dtype=problem.dtype, seed=1)  # fmt: skip
    weight = randn(problem.out_channels, problem.in_channels, problem.kernel_h, problem.kernel_w, dtype=problem.dtype, scale=fan_in**-0.5, seed=2)  # fmt: skip
    bias = randn(problem.out_channels, dtype=problem.dtype, seed=3) if problem.has_bias else None
    launch = execute.conv2d_launch(problem, x, weight, bias)
    launch.launch(config)
    expected = F.conv2d(
        x.float(),
        weight.float(),
        bias.float() if bias is not None else None,
        (problem.stride_h, problem.stride_w),
        (problem.pad_h, problem.pad_w),
    )
    assert launch.output.shape == expected.shape
    assert_matches_reference(launch.output, reference.activate(expected, problem.activation), problem.dtype)  # fmt: skip


def _conv(n: int, c: int, h: int, w: int, k: int, r: int, s: int, stride: int, pad: int, dtype: str) -> Conv2dProblem:  # fmt: skip
    return Conv2dProblem(n, c, h, w, k, r, s, stride, stride, pad, pad, dtype, True, "none")


@settings(max_examples=100, deadline=None)
@given(conv_cases())
@example((_conv(1, 3, 9, 9, 8, 3, 3, 1, 1, "float32"), KernelConfig.of(BLOCK_M=64, BLOCK_N=16, BLOCK_K=16, GROUP_M=8)))  # fmt: skip
@example((_conv(2, 4, 7, 7, 16, 7, 7, 2, 3, "float16"), KernelConfig.of(BLOCK_M=16, BLOCK_N=16, BLOCK_K=32, GROUP_M=1)))  # fmt: skip
@example((_conv(1, 5, 1, 1, 3, 1, 1, 1, 0, "bfloat16"), KernelConfig.of(BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, GROUP_M=1)))  # fmt: skip
def test_conv2d_matches_pytorch_for_any_geometry_dtype_and_config(
    case: tuple[Conv2dProblem, KernelConfig],
) -> None:
    _check(*case)


def test_resnet_stem_geometry_on_a_small_image() -> None:
    # ResNet-50's first layer (7x7, stride 2, padding 3, 3 -> 64 channels) on a 20x20 image
    _check(_conv(1, 3, 20, 20, 64, 7, 7, 2, 3, "float32"), KernelConfig.of(BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, GROUP_M=8))  # fmt: skip
