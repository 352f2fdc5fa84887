"""The support conditions of each kernel, checked on a call's arguments.

Each ``*_problem`` function returns the call's :mod:`~ncompass.kernels.problems` value when the
kernel supports it, or the reason it does not (a short, stable string: it is what
``ncompass.kernels.stats()`` counts). Arguments PyTorch itself would reject (mismatched shapes)
are "unsupported" too, so the fallback raises PyTorch's own error.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from functools import cache
from typing import Any

from ncompass.kernels.problems import (
    ACTIVATIONS,
    DTYPES,
    AttentionProblem,
    Conv2dProblem,
    GemmProblem,
    NormProblem,
)

INDEX_LIMIT = 2**31 - 1
"""The kernels compute offsets in int32: larger tensors fall back."""

NORM_ROW_BYTES = 65536
"""A normalised row is held in registers of one program: at most this many bytes of it."""

ATTENTION_HEAD_DIM = 256
"""A program holds a block of queries and its output rows whole: heads up to this size."""


def check_activation(activation: str | None) -> str:
    """The activation's canonical name (``None`` is ``"none"``).

    Raises:
        ValueError: not one the kernels (and their references) know.
    """
    name = "none" if activation is None else activation
    if name not in ACTIVATIONS:
        raise ValueError(
            f"unknown activation {activation!r}; choose one of {', '.join(ACTIVATIONS)}"
        )
    return name


def tensor_reason(
    named: Sequence[tuple[str, Any | None]], strided: Collection[str] = ()
) -> str | None:
    """Why these tensors cannot go to a kernel (dtype, layout, autograd, size), or None.

    Args:
        named: The call's tensors by argument name (None for an absent bias).
        strided: Names the kernel reads through their strides (any layout will do).
    """
    import torch

    present = [(name, tensor) for name, tensor in named if tensor is not None]
    dtype = present[0][1].dtype
    if any(tensor.dtype != dtype for _, tensor in present):
        return "mixed dtypes"
    name = _dtype_name(dtype)
    if name not in DTYPES:
        return f"dtype {name} (supported: {', '.join(DTYPES)})"
    for name, tensor in present:
        if tensor.is_contiguous():
            if tensor.numel() > INDEX_LIMIT:
                return f"{name} spans more than 2**31 - 1 elements"
        elif name not in strided:
            return f"{name} is not contiguous"
        elif _extent(tensor) > INDEX_LIMIT:
            return f"{name} spans more than 2**31 - 1 elements"
    if torch.is_grad_enabled() and any(tensor.requires_grad for _, tensor in present):
        return "needs autograd: the kernels are forward-only (torch.no_grad() or inference_mode)"
    if any(tensor.numel() == 0 for _, tensor in present):
        return "empty tensor"
    return None


def _extent(tensor: Any) -> int:
    """The furthest element offset the kernel computes (strided views can reach far)."""
    pairs = zip(tensor.shape, tensor.stride(), strict=True)
    return 1 + sum(int(size - 1) * abs(int(stride)) for size, stride in pairs)


def dtype_name(tensor: Any) -> str:
    """``float16`` for a ``torch.float16`` tensor."""
    return _dtype_name(tensor.dtype)


@cache
def _dtype_name(dtype: Any) -> str:
    return str(dtype).rpartition(".")[2]


def conv2d_problem(
    input: Any,
    weight: Any,
    bias: Any | None,
    stride: Any,
    padding: Any,
    dilation: Any,
    groups: int,
    activation: str,
) -> Conv2dProblem | str:
    """The convolution as a problem, or why the conv2d kernel does not support it."""
    if groups != 1:
        return "groups != 1"
    if _pair(dilation) != (1, 1):
        return "dilation != 1"
    if input.dim() != 4 or weight.dim() != 4:
        return "input is not 4-D NCHW"
    batch, channels, height, width = input.shape
    out_channels, weight_channels, kernel_h, kernel_w = weight.shape
    if weight_channels != channels or (bias is not None and tuple(bias.shape) != (out_channels,)):
        return "shapes do not match"
    strides = _pair(stride)
    if strides is None or min(strides) < 1:
        return "stride is not one or two positive ints"
    pads = _padding(padding, (kernel_h, kernel_w), strides)
    if isinstance(pads, str):
        return pads
    reason = tensor_reason([("input", input), ("weight", weight), ("bias", bias)])
    if reason is not None:
        return reason
    problem = Conv2dProblem(
        batch, channels, height, width, out_channels, kernel_h, kernel_w, *strides, *pads,
        dtype=dtype_name(input), has_bias=bias is not None, activation=activation,
    )  # fmt: skip
    if problem.out_h < 1 or problem.out_w < 1:
        return "shapes do not match"
    out_elements = batch * out_channels * problem.out_h * problem.out_w
    if out_elements > INDEX_LIMIT:
        return "output has more than 2**31 - 1 elements"
    return problem


def gemm_problem(
    a: Any, b: Any, bias: Any | None, activation: str, *, b_is_weight: bool
) -> GemmProblem | str:
    """``a[M, K] @ b`` as a problem, or why not.

    ``b`` is ``[N, K]`` when ``b_is_weight`` (a linear layer's weight), else ``[K, N]``.
    """
    if a.dim() != 2 or b.dim() != 2:
        return "operands are not 2-D"
    m, k = a.shape
    n, b_k = b.shape if b_is_weight else (b.shape[1], b.shape[0])
    if b_k != k or (bias is not None and tuple(bias.shape) != (n,)):
        return "shapes do not match"
    # the GEMM kernel reads both operands through their strides: transposes cost nothing
    reason = tensor_reason([("input", a), ("other", b), ("bias", bias)], strided=("input", "other"))
    if reason is not None:
        return reason
    if m * n > INDEX_LIMIT:
        return "output has more than 2**31 - 1 elements"
    return GemmProblem(m, n, k, dtype_name(a), has_bias=bias is not None, activation=activation)


def norm_problem(
    input: Any,
    normalized_shape: Sequence[int] | int,
    weight: Any | None,
    bias: Any | None,
    eps: float,
    *,
    rms: bool,
) -> NormProblem | str:
    """Normalisation over the trailing ``normalized_shape`` as a problem, or why not."""
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if not shape or tuple(input.shape[-len(shape) :]) != shape or input.dim() < len(shape):
        return "shapes do not match"
    for tensor in (weight, bias):
        if tensor is not None and tuple(tensor.shape) != shape:
            return "shapes do not match"
    reason = tensor_reason([("input", input), ("weight", weight), ("bias", bias)])
    if reason is not None:
        return reason
    cols = 1
    for size in shape:
        cols *= size
    if cols * input.element_size() > NORM_ROW_BYTES:
        return f"rows longer than {NORM_ROW_BYTES} bytes"
    return NormProblem(
        rows=input.numel() // cols,
        cols=cols,
        dtype=dtype_name(input),
        rms=rms,
        eps=float(eps),
        has_weight=weight is not None,
        has_bias=bias is not None,
    )


def attention_problem(
    query: Any,
    key: Any,
    value: Any,
    attn_mask: Any | None,
    dropout_p: float,
    is_causal: bool,
    scale: float | None,
    enable_gqa: bool,
) -> AttentionProblem | str:
    """Scaled dot-product attention as a problem, or why the attention kernel does not run it.

    ``query`` is ``(batch, heads, L, E)`` or ``(batch, L, E)``, ``key`` and ``value``
    ``(..., S, E)`` with the same leading sizes (no broadcasting); any strides.
    """
    if attn_mask is not None:
        return "attn_mask is given (only is_causal masks)"
    if dropout_p != 0.0:
        return "dropout_p != 0"
    if enable_gqa:
        return "enable_gqa=True"
    if query.dim() not in (3, 4) or key.dim() != query.dim() or value.dim() != query.dim():
        return "inputs are not 3-D or 4-D (batch, [heads,] seq, dim)"
    lead = tuple(query.shape[:-2])
    head_dim = query.shape[-1]
    if tuple(key.shape[:-2]) != lead or tuple(value.shape[:-2]) != lead:
        return "batch or head sizes differ (broadcasting)"
    if key.shape[-1] != head_dim or value.shape[-2] != key.shape[-2]:
        return "shapes do not match"
    if value.shape[-1] != head_dim:
        return "value's head size differs from the query's"
    if head_dim > ATTENTION_HEAD_DIM:
        return f"head size above {ATTENTION_HEAD_DIM}"
    named = [("query", query), ("key", key), ("value", value)]
    reason = tensor_reason(named, strided=("query", "key", "value"))
    if reason is not None:
        return reason
    batch, heads = (lead[0], lead[1]) if len(lead) == 2 else (lead[0], 1)
    q_len, kv_len = query.shape[-2], key.shape[-2]
    if batch * heads * q_len * head_dim > INDEX_LIMIT:
        return "output has more than 2**31 - 1 elements"
    return AttentionProblem(
        batch, heads, q_len, kv_len, head_dim,
        dtype=dtype_name(query),
        causal=bool(is_causal),
        scale=float(scale) if scale is not None else head_dim**-0.5,
    )  # fmt: skip


def _pair(value: Any) -> tuple[int, int] | None:
    """``(v, v)`` for an int, the pair for a 2-sequence of ints, else None."""
    if isinstance(value, int):
        return (value, value)
    if isinstance(value, Sequence) and len(value) == 2 and all(isinstance(v, int) for v in value):
        return (value[0], value[1])
    if isinstance(value, Sequence) and len(value) == 1 and isinstance(value[0], int):
        return (value[0], value[0])
    return None


def _padding(
    padding: Any, kernel: tuple[int, int], stride: tuple[int, int]
) -> tuple[int, int] | str:
    """Symmetric padding per side, from ints or PyTorch's ``"valid"`` / ``"same"``."""
    if padding == "valid":
        return (0, 0)
    if padding == "same":
        if stride != (1, 1):
            return "padding='same' with stride != 1"
        if any(size % 2 == 0 for size in kernel):
            return "padding='same' with an even kernel (asymmetric padding)"
        return (kernel[0] // 2, kernel[1] // 2)
    pads = _pair(padding)
    if pads is None or min(pads) < 0:
        return "padding is not one or two non-negative ints"
    return pads


__all__ = [
    "ATTENTION_HEAD_DIM",
    "INDEX_LIMIT",
    "NORM_ROW_BYTES",
    "attention_problem",
    "check_activation",
    "conv2d_problem",
    "dtype_name",
    "gemm_problem",
    "norm_problem",
    "tensor_reason",
]
