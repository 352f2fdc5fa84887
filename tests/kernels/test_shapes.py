"""Shapes as text (``ncompass kernels tune --shapes``), model presets, the catalog, and the
support conditions that need no kernel to check."""

from __future__ import annotations

import re

import pytest
import torch

from ncompass.kernels.catalog import OPS, kernel_source_hash, op_named
from ncompass.kernels.conditions import gemm_problem
from ncompass.kernels.errors import KernelError
from ncompass.kernels.shapes import PRESETS, parse_shape, parse_shapes, preset


def test_conv2d_shape_with_options() -> None:
    shape = parse_shape("conv2d", "x=1x64x56x56, w=64x64x3x3, stride=2, padding=1, bias=0")
    assert shape.sizes == {"x": (1, 64, 56, 56), "w": (64, 64, 3, 3)}
    assert shape.options == {"stride": 2, "padding": 1, "bias": False}
    assert shape.flops() == 2 * 28 * 28 * 64 * 64 * 9


def test_several_shapes_in_one_option() -> None:
    shapes = parse_shapes("linear", ("x=2x40x128,w=384x128;x=8x4096,w=4096x4096,activation=silu",))
    assert [s.sizes["x"] for s in shapes] == [(2, 40, 128), (8, 4096)]
    assert shapes[1].options == {"activation": "silu"}


@pytest.mark.parametrize(
    ("op", "text", "message"),
    [
        ("conv3d", "x=1", "no kernel op 'conv3d'; choose one of conv2d, linear, matmul"),
        ("conv2d", "x=1x3x8x8", "lacks w; e.g. x=1x64x56x56,w=64x64x3x3"),
        ("conv2d", "x=1x3x8x8,w=4x3x3", "w needs 4 positive sizes"),
        ("conv2d", "x=1x3x8x8,w=4x4x3x3", "the reduction sizes do not match"),
        ("linear", "x=8xK,w=4x8", "x='8xK' is not sizes like 64x3x3"),
        (
            "linear",
            "x=8x8,w=4x8,groups=2",
            "unknown field 'groups'; fields: x, w, bias, activation",
        ),
        ("linear", "x=8x8,w=4x8,bias=maybe", "bias must be 0 or 1"),
        ("conv2d", "x=1x3x8x8,w=4x3x3x3,stride=0", "stride=0 is out of range"),
        ("matmul", "a=4x4,oops", "'oops' is not name=value"),
        ("matmul", "a=4x4 b=4x4", "a='4x4 b=4x4' is not sizes like 64x3x3"),
        ("matmul", "a=4x4,b=4x4,activation=swish", "activation 'swish' is not one of none, relu"),
    ],
)
def test_malformed_shapes_say_what_is_wrong(op: str, text: str, message: str) -> None:
    with pytest.raises(KernelError, match=re.escape(message)):
        parse_shape(op, text)


def test_presets_are_real_layer_shapes() -> None:
    for name in PRESETS:
        assert preset(name)
    resnet = preset("resnet50")
    assert len(resnet) == 23 and all(s.op == "conv2d" for s in resnet)
    stem = resnet[0]
    assert stem.sizes == {"x": (32, 3, 224, 224), "w": (64, 3, 7, 7)}
    assert stem.options == {"stride": 2, "padding": 3}
    llama = {s.label for s in preset("llama7b")}
    assert "x=2048x4096,w=11008x4096,bias=0" in llama
    with pytest.raises(KernelError, match="no preset 'gpt5'"):
        preset("gpt5")


def test_random_arguments_fit_the_op() -> None:
    args, kwargs = parse_shape("conv2d", "x=1x3x8x8,w=4x3x3x3,padding=1").arguments(
        torch.float16, "cpu"
    )
    assert args[0].shape == (1, 3, 8, 8) and args[0].dtype == torch.float16
    assert args[2].shape == (4,) and args[3:] == (1, 1) and kwargs == {"activation": None}


def test_catalog_names_every_op_and_hashes_kernel_sources() -> None:
    assert list(OPS) == [
        "conv2d",
        "linear",
        "matmul",
        "layer_norm",
        "rms_norm",
        "scaled_dot_product_attention",
    ]
    assert op_named("linear").kernel == op_named("matmul").kernel == "gemm"
    hashes = {kernel_source_hash(kernel) for kernel in ("gemm", "conv2d", "norm")}
    assert len(hashes) == 3 and all(len(h) == 16 for h in hashes)


def test_strided_views_that_reach_past_int32_offsets_fall_back() -> None:
    # meta tensors: the layout of a 16 GB tensor without its memory
    wide = torch.empty(3, 2**31, device="meta")[:, :8]
    reason = gemm_problem(wide, torch.empty(8, 4, device="meta"), None, "none", b_is_weight=False)
    assert reason == "input spans more than 2**31 - 1 elements"


def test_attention_shapes_give_query_key_and_value() -> None:
    shape = parse_shape("scaled_dot_product_attention", "q=2x4x10x16,kv_len=12,causal=1")
    (q, k, v), kwargs = shape.arguments(torch.float32, "cpu")
    assert q.shape == (2, 4, 10, 16) and k.shape == v.shape == (2, 4, 12, 16)
    assert kwargs == {"is_causal": True}
    assert shape.flops() == 4 * 8 * 10 * 12 * 16 // 2
    llama = [s for s in preset("llama7b") if s.op == "scaled_dot_product_attention"]
    assert [s.label for s in llama] == ["q=1x32x2048x128,causal=1"]
    with pytest.raises(KernelError, match="causal must be 0 or 1"):
        parse_shape("scaled_dot_product_attention", "q=1x4x16,causal=yes")
