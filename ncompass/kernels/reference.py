"""The PyTorch reference of every kernel: what the tests compare with and what fallbacks run.

The PyTorch functions are bound when this module is imported (before any ``patch_*`` can
replace them in ``torch.nn.functional``), so a fallback never calls back into a patched op.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F

_conv2d = torch.conv2d
_linear = F.linear
_layer_norm = F.layer_norm
_rms_norm = F.rms_norm
_scaled_dot_product_attention = F.scaled_dot_product_attention
_relu = F.relu
_gelu = F.gelu
_silu = F.silu


def activate(x: Any, activation: str) -> Any:
    """``x`` through the named activation (``none`` returns it unchanged)."""
    if activation == "none":
        return x
    if activation == "relu":
        return _relu(x)
    if activation == "gelu":
        return _gelu(x)
    if activation == "gelu_tanh":
        return _gelu(x, approximate="tanh")
    if activation == "silu":
        return _silu(x)
    raise ValueError(f"unknown activation {activation!r}")


def conv2d(
    input: Any,
    weight: Any,
    bias: Any | None = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
    activation: str = "none",
) -> Any:
    """``torch.nn.functional.conv2d`` followed by the activation."""
    return activate(_conv2d(input, weight, bias, stride, padding, dilation, groups), activation)


def linear(input: Any, weight: Any, bias: Any | None = None, activation: str = "none") -> Any:
    """``torch.nn.functional.linear`` followed by the activation."""
    return activate(_linear(input, weight, bias), activation)


def matmul(a: Any, b: Any, activation: str = "none") -> Any:
    """``a @ b`` followed by the activation."""
    return activate(torch.matmul(a, b), activation)


def layer_norm(
    input: Any,
    normalized_shape: Sequence[int] | int,
    weight: Any | None = None,
    bias: Any | None = None,
    eps: float = 1e-5,
) -> Any:
    """``torch.nn.functional.layer_norm``."""
    shape = [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)
    return _layer_norm(input, shape, weight, bias, eps)


def rms_norm(
    input: Any,
    normalized_shape: Sequence[int] | int,
    weight: Any | None = None,
    eps: float | None = None,
) -> Any:
    """``torch.nn.functional.rms_norm``."""
    shape = [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)
    return _rms_norm(input, shape, weight, eps)


def scaled_dot_product_attention(
    query: Any,
    key: Any,
    value: Any,
    attn_mask: Any | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> Any:
    """``torch.nn.functional.scaled_dot_product_attention``."""
    return _scaled_dot_product_attention(
        query, key, value, attn_mask, dropout_p, is_causal, scale=scale, enable_gqa=enable_gqa
    )


__all__ = [
    "activate",
    "conv2d",
    "layer_norm",
    "linear",
    "matmul",
    "rms_norm",
    "scaled_dot_product_attention",
]
