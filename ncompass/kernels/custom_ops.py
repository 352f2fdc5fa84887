"""The ops as ``torch.library`` custom ops (``torch.ops.ncompass.*``), for ``torch.compile``.

Dynamo cannot trace into an op's dispatch (a lock around the counts, Triton's launcher, the
interpreter's numpy code), so while it traces, each public op in :mod:`~ncompass.kernels.ops`
calls its custom op instead: one opaque node in the graph, with zero graph breaks. When the
compiled graph runs, the node calls the op itself, eagerly: the same conditions, tuned config,
PyTorch fallback, counts (:func:`ncompass.kernels.stats`) and profiler range as an eager call.

Shapes and dtypes for tracing (also with ``dynamic=True``) come from the PyTorch reference run
on fake tensors, so they are PyTorch's by construction. Outputs are contiguous on both sides:
Inductor plans the memory after the node from the fake output's strides.

The ops are forward-only (no autograd formula is registered): a traced call that needs autograd
is traced as the PyTorch reference instead, as an eager call falls back to it.

Importing this module registers the ops (``ncompass.kernels.ops`` imports it, so importing
``ncompass`` does not); importing it again, after its module was dropped, reuses them. They
need torch 2.4 or later (``torch.library.custom_op``); with an older torch the ops never take
this path and Dynamo traces into them, as it did before they existed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor

from ncompass.kernels import reference

NAMESPACE = "ncompass"

SUPPORTED: bool = hasattr(torch.library, "custom_op")
"""Whether this torch can define the custom ops (2.4 and later)."""

_Op = Callable[..., Any]


def _never_compiling() -> bool:
    return False


is_compiling: Callable[[], bool] = torch.compiler.is_compiling if SUPPORTED else _never_compiling
"""What the ops ask before each call; Dynamo answers True while it traces (torch's own check)."""


def _custom_op(name: str, schema: str, implementation: _Op, fake: _Op) -> _Op:
    """``torch.ops.ncompass.<name>``, defined on first use and reused afterwards.

    The schema is written out rather than inferred from annotations, which this module's
    ``from __future__ import annotations`` turns into strings some torch versions cannot read.
    """
    if not SUPPORTED:
        return implementation  # never called while tracing: is_compiling() says False
    qualname = f"{NAMESPACE}::{name}"
    defined = getattr(torch._library.custom_ops, "OPDEFS", {}).get(qualname)
    if defined is not None:
        return defined  # type: ignore[no-any-return]
    if hasattr(torch.ops.ncompass, name):  # defined, where torch does not keep definitions
        return getattr(torch.ops.ncompass, name).default  # type: ignore[no-any-return]
    op = torch.library.custom_op(qualname, implementation, mutates_args=(), schema=schema)
    op.register_fake(fake)
    return op  # type: ignore[no-any-return]


def _owned(out: Tensor) -> Tensor:
    """``out`` in the contiguous layout the fake output promises."""
    return out.contiguous()


def _fake(out: Tensor) -> Tensor:
    return torch.empty_like(out, memory_format=torch.contiguous_format)


def _eager() -> Any:
    # ops imports this module to call the custom ops; the ops call back into it at run time
    from ncompass.kernels import ops

    return ops


# -- linear, matmul ---------------------------------------------------------------------------


def _linear(input: Tensor, weight: Tensor, bias: Tensor | None, activation: str) -> Tensor:
    return _owned(_eager().linear(input, weight, bias, activation=activation))


def _linear_fake(input: Tensor, weight: Tensor, bias: Tensor | None, activation: str) -> Tensor:
    return _fake(reference.linear(input, weight, bias, activation))


def _matmul(a: Tensor, b: Tensor, activation: str) -> Tensor:
    return _owned(_eager().matmul(a, b, activation=activation))


def _matmul_fake(a: Tensor, b: Tensor, activation: str) -> Tensor:
    return _fake(reference.matmul(a, b, activation))


# -- conv2d -----------------------------------------------------------------------------------


def _conv2d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None,
    stride: Sequence[int],
    padding: Sequence[int],
    padding_name: str | None,
    dilation: Sequence[int],
    groups: int,
    activation: str,
) -> Tensor:
    pad: Any = padding_name or list(padding)
    out = _eager().conv2d(
        input, weight, bias, list(stride), pad, list(dilation), groups, activation=activation
    )
    return _owned(out)


def _conv2d_fake(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None,
    stride: Sequence[int],
    padding: Sequence[int],
    padding_name: str | None,
    dilation: Sequence[int],
    groups: int,
    activation: str,
) -> Tensor:
    pad: Any = padding_name or list(padding)
    out = reference.conv2d(
        input, weight, bias, list(stride), pad, list(dilation), groups, activation
    )
    return _fake(out)


def conv2d_arguments(stride: Any, padding: Any, dilation: Any) -> tuple[Any, ...]:
    """``F.conv2d``'s ``stride``, ``padding``, ``dilation`` as the custom op takes them.

    Returns:
        ``(stride, padding, padding_name, dilation)``: int lists, and ``"same"`` or
        ``"valid"`` (with padding ``[0, 0]``) for a named padding.
    """
    if isinstance(padding, str):
        return _ints(stride), [0, 0], padding, _ints(dilation)
    return _ints(stride), _ints(padding), None, _ints(dilation)


def _ints(value: Any) -> list[int]:
    return [value, value] if isinstance(value, int) else list(value)


# -- norms ------------------------------------------------------------------------------------


def _layer_norm(
    input: Tensor,
    normalized_shape: Sequence[int],
    weight: Tensor | None,
    bias: Tensor | None,
    eps: float,
) -> Tensor:
    return _owned(_eager().layer_norm(input, list(normalized_shape), weight, bias, eps))


def _layer_norm_fake(
    input: Tensor,
    normalized_shape: Sequence[int],
    weight: Tensor | None,
    bias: Tensor | None,
    eps: float,
) -> Tensor:
    return _fake(reference.layer_norm(input, list(normalized_shape), weight, bias, eps))


def _rms_norm(
    input: Tensor, normalized_shape: Sequence[int], weight: Tensor | None, eps: float | None
) -> Tensor:
    return _owned(_eager().rms_norm(input, list(normalized_shape), weight, eps))


def _rms_norm_fake(
    input: Tensor, normalized_shape: Sequence[int], weight: Tensor | None, eps: float | None
) -> Tensor:
    return _fake(reference.rms_norm(input, list(normalized_shape), weight, eps))


def norm_shape(normalized_shape: Sequence[int] | int) -> list[int]:
    """``normalized_shape`` as the custom ops take it (an int list)."""
    return [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)


# -- attention --------------------------------------------------------------------------------


def _attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None,
    dropout_p: float,
    is_causal: bool,
    scale: float | None,
    enable_gqa: bool,
) -> Tensor:
    ops = _eager()
    out = ops.scaled_dot_product_attention(
        query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa
    )
    return _owned(out)


def _attention_fake(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None,
    dropout_p: float,
    is_causal: bool,
    scale: float | None,
    enable_gqa: bool,
) -> Tensor:
    out = reference.scaled_dot_product_attention(
        query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa
    )
    return _fake(out)


linear = _custom_op(
    "linear",
    "(Tensor input, Tensor weight, Tensor? bias, str activation) -> Tensor",
    _linear,
    _linear_fake,
)
matmul = _custom_op(
    "matmul", "(Tensor a, Tensor b, str activation) -> Tensor", _matmul, _matmul_fake
)
conv2d = _custom_op(
    "conv2d",
    "(Tensor input, Tensor weight, Tensor? bias, int[] stride, int[] padding, str? padding_name,"
    " int[] dilation, int groups, str activation) -> Tensor",
    _conv2d,
    _conv2d_fake,
)
layer_norm = _custom_op(
    "layer_norm",
    "(Tensor input, SymInt[] normalized_shape, Tensor? weight, Tensor? bias, float eps) -> Tensor",
    _layer_norm,
    _layer_norm_fake,
)
rms_norm = _custom_op(
    "rms_norm",
    "(Tensor input, SymInt[] normalized_shape, Tensor? weight, float? eps) -> Tensor",
    _rms_norm,
    _rms_norm_fake,
)
scaled_dot_product_attention = _custom_op(
    "scaled_dot_product_attention",
    "(Tensor query, Tensor key, Tensor value, Tensor? attn_mask, float dropout_p, bool is_causal,"
    " float? scale, bool enable_gqa) -> Tensor",
    _attention,
    _attention_fake,
)


def needs_autograd(*tensors: Tensor | None) -> bool:
    """Whether a call on ``tensors`` records autograd (then the kernels do not apply)."""
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


__all__ = [
    "NAMESPACE",
    "SUPPORTED",
    "conv2d",
    "conv2d_arguments",
    "is_compiling",
    "layer_norm",
    "linear",
    "matmul",
    "needs_autograd",
    "norm_shape",
    "rms_norm",
    "scaled_dot_product_attention",
]
