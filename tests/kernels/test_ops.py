"""The public ops: the kernel runs where its conditions hold, PyTorch (with a counted reason)
everywhere else, and both give PyTorch's answer."""

from __future__ import annotations

import logging

import pytest
import torch
import torch.nn.functional as F

from ncompass.kernels import ops, stats
from tests.kernels.checks import assert_matches_reference, randn

pytestmark = pytest.mark.usefixtures("interpreter")


def _fell_back(op: str, reason: str) -> None:
    op_stats = stats()[op]
    assert op_stats.kernel_calls == 0
    assert op_stats.fallbacks == {reason: 1}


def test_conv2d_runs_the_kernel_and_counts_it() -> None:
    x = randn(2, 3, 10, 11, dtype="float32")
    w = randn(6, 3, 3, 3, dtype="float32", scale=0.2, seed=1)
    b = randn(6, dtype="float32", seed=2)
    out = ops.conv2d(x, w, b, stride=(2, 1), padding=(1, 0))
    assert_matches_reference(out, F.conv2d(x, w, b, (2, 1), (1, 0)), "float32")
    assert stats()["conv2d"].kernel_calls == 1 and stats()["conv2d"].fallback_calls == 0


def test_conv2d_accepts_unbatched_input_and_padding_strings() -> None:
    x = randn(3, 8, 8, dtype="float16")
    w = randn(4, 3, 3, 3, dtype="float16", scale=0.2, seed=1)
    assert_matches_reference(ops.conv2d(x, w, padding="same"), F.conv2d(x.float(), w.float(), padding="same"), "float16")  # fmt: skip
    assert_matches_reference(ops.conv2d(x, w, padding="valid"), F.conv2d(x.float(), w.float()), "float16")  # fmt: skip
    assert stats()["conv2d"].kernel_calls == 2


def test_conv2d_fused_activation() -> None:
    x, w = randn(1, 2, 5, 5, dtype="float32"), randn(3, 2, 3, 3, dtype="float32", seed=1)
    out = ops.conv2d(x, w, None, 1, 1, activation="relu")
    assert_matches_reference(out, F.relu(F.conv2d(x, w, None, 1, 1)), "float32")


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"groups": 3}, "groups != 1"),
        ({"dilation": 2}, "dilation != 1"),
        ({"dtype": torch.float64}, "dtype float64 (supported: float32, float16, bfloat16)"),
        ({"channels_last": True}, "input is not contiguous"),
        (
            {"padding": "same", "kernel": 2},
            "padding='same' with an even kernel (asymmetric padding)",
        ),
    ],
)
@pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel lengths")
def test_conv2d_outside_its_conditions_falls_back_with_the_reason(
    change: dict[str, object], reason: str
) -> None:
    dtype = change.get("dtype", torch.float32)
    kernel = int(change.get("kernel", 3))  # type: ignore[call-overload]
    groups = int(change.get("groups", 1))  # type: ignore[call-overload]
    x = torch.randn(1, 6, 9, 9, dtype=dtype)
    if change.get("channels_last"):
        x = x.to(memory_format=torch.channels_last)
    w = torch.randn(6, 6 // groups, kernel, kernel, dtype=dtype)
    args = {"stride": change.get("stride", 1), "padding": change.get("padding", 1)}
    args |= {"dilation": change.get("dilation", 1), "groups": groups}
    out = ops.conv2d(x, w, None, **args)  # type: ignore[arg-type]
    assert torch.equal(out, F.conv2d(x, w, None, **args))  # type: ignore[arg-type]
    _fell_back("conv2d", reason)


def test_conv2d_same_padding_with_stride_raises_pytorchs_error() -> None:
    with pytest.raises(RuntimeError, match="padding='same' is not supported for strided"):
        ops.conv2d(torch.randn(1, 2, 6, 6), torch.randn(2, 2, 3, 3), stride=2, padding="same")
    assert stats()["conv2d"].fallbacks == {"padding='same' with stride != 1": 1}


def test_autograd_falls_back_and_keeps_gradients() -> None:
    x = torch.randn(2, 8, requires_grad=True)
    w = torch.randn(4, 8, requires_grad=True)
    ops.linear(x, w).sum().backward()
    assert x.grad is not None and w.grad is not None
    _fell_back("linear", "needs autograd: the kernels are forward-only (torch.no_grad() or inference_mode)")  # fmt: skip
    with torch.no_grad():
        ops.linear(x, w)
    assert stats()["linear"].kernel_calls == 1


def test_mismatched_shapes_raise_pytorchs_own_error() -> None:
    with pytest.raises(RuntimeError, match="mat1 and mat2 shapes cannot be multiplied"):
        ops.linear(torch.randn(2, 8), torch.randn(4, 7))
    assert stats()["linear"].fallbacks == {"shapes do not match": 1}


def test_mixed_dtypes_fall_back() -> None:
    with pytest.raises(RuntimeError):
        ops.linear(torch.randn(2, 8), torch.randn(4, 8, dtype=torch.float16))
    assert stats()["linear"].fallbacks == {"mixed dtypes": 1}


def test_linear_keeps_leading_dimensions_and_reads_the_weight_in_place() -> None:
    x = randn(2, 3, 5, 24, dtype="bfloat16")
    w = randn(40, 24, dtype="bfloat16", scale=0.2, seed=1)
    b = randn(40, dtype="bfloat16", seed=2)
    out = ops.linear(x, w, b, activation="gelu_tanh")
    assert out.shape == (2, 3, 5, 40)
    expected = F.gelu(F.linear(x.float(), w.float(), b.float()), approximate="tanh")
    assert_matches_reference(out, expected, "bfloat16")
    vector = ops.linear(x[0, 0, 0], w)
    assert vector.shape == (40,)
    assert_matches_reference(vector, F.linear(x[0, 0, 0].float(), w.float()), "bfloat16")


def test_gemm_operands_may_be_strided_views() -> None:
    x = randn(8, 6, dtype="float32").t()  # (6, 8), column-major
    w = randn(3, 16, dtype="float32", seed=1)[:, ::2]  # (3, 8), every other column
    assert_matches_reference(ops.linear(x, w), F.linear(x, w), "float32")
    a = randn(5, 2, 7, dtype="float32", seed=2)[:, 1, :]  # (5, 7), rows 14 elements apart
    b = randn(9, 7, dtype="float32", seed=3).t()
    assert_matches_reference(ops.matmul(a, b), a @ b, "float32")
    assert stats()["linear"].kernel_calls == 1 and stats()["matmul"].kernel_calls == 1


def test_norm_of_a_non_contiguous_input_falls_back() -> None:
    x = torch.randn(8, 6).t()
    assert torch.equal(ops.layer_norm(x, (8,)), F.layer_norm(x, (8,)))
    _fell_back("layer_norm", "input is not contiguous")


def test_matmul_with_activation() -> None:
    a, b = randn(17, 33, dtype="float32"), randn(33, 9, dtype="float32", scale=0.2, seed=1)
    assert_matches_reference(ops.matmul(a, b, activation="silu"), F.silu(a @ b), "float32")
    assert stats()["matmul"].kernel_calls == 1


def test_layer_norm_over_several_trailing_dimensions() -> None:
    x = randn(4, 3, 5, 6, dtype="float16", scale=2.0) + 1
    weight, bias = randn(5, 6, dtype="float16", seed=1), randn(5, 6, dtype="float16", seed=2)
    out = ops.layer_norm(x, (5, 6), weight, bias, 1e-5)
    expected = F.layer_norm(x.float(), (5, 6), weight.float(), bias.float(), 1e-5)
    assert_matches_reference(out, expected, "float16")
    assert stats()["layer_norm"].kernel_calls == 1


def test_rms_norm_defaults_eps_like_pytorch() -> None:
    x = randn(7, 50, dtype="float32")
    weight = randn(50, dtype="float32", seed=1)
    assert_matches_reference(ops.rms_norm(x, [50], weight), F.rms_norm(x, [50], weight), "float32")
    assert_matches_reference(ops.rms_norm(x, 50), F.rms_norm(x, [50]), "float32")
    # tiny 16-bit values: the default eps must be float32's, as PyTorch computes in float32
    small = (randn(4, 64, dtype="float32", seed=2) * 1e-3).half()
    assert_matches_reference(
        ops.rms_norm(small, (64,)), F.rms_norm(small.float(), (64,)), "float16"
    )


def test_rows_longer_than_a_register_tile_fall_back() -> None:
    x = torch.randn(2, 20000)
    assert torch.equal(ops.layer_norm(x, (20000,)), F.layer_norm(x, (20000,)))
    _fell_back("layer_norm", "rows longer than 65536 bytes")


def test_unknown_activation_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="unknown activation 'tanh'; choose one of none, relu"):
        ops.linear(torch.randn(2, 4), torch.randn(3, 4), activation="tanh")


def test_first_fallback_of_each_reason_is_logged_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="ncompass.kernels"):
        for _ in range(3):
            ops.conv2d(torch.randn(1, 4, 5, 5), torch.randn(4, 2, 3, 3), groups=2)
    messages = [record.getMessage() for record in caplog.records]
    assert messages == ["conv2d falls back to PyTorch: groups != 1"]
    assert stats()["conv2d"].fallbacks == {"groups != 1": 3}
