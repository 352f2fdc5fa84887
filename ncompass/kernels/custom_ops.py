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

``ncompass.kernels.ops`` defines them with :func:`define` when it is imported (so importing
``ncompass`` does not); defining them again, after that module was dropped, reuses them. They
need torch 2.4 or later (``torch.library.custom_op``); with an older torch the ops never take
this path and Dynamo traces into them, as it did before they existed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from ncompass.kernels import reference

NAMESPACE = "ncompass"

SUPPORTED: bool = hasattr(torch.library, "custom_op")
"""Whether this torch can define the custom ops (2.4 and later)."""

_Op = Callable[..., Any]
_Call = Callable[..., Tensor]  # (the op or its reference, *the custom op's arguments) -> output


def _never_compiling() -> bool:
    return False


is_compiling: Callable[[], bool] = torch.compiler.is_compiling if SUPPORTED else _never_compiling
"""What the ops ask before each call; Dynamo answers True while it traces (torch's own check)."""


def _custom_op(name: str, schema: str, *, implementation: _Op, fake: _Op) -> _Op:
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


@dataclass(frozen=True)
class CustomOps:
    """The custom ops, one per op: ``torch.ops.ncompass.<op>`` (see :func:`define`)."""

    conv2d: _Op
    linear: _Op
    matmul: _Op
    layer_norm: _Op
    rms_norm: _Op
    scaled_dot_product_attention: _Op


def define(eager: Mapping[str, _Op]) -> CustomOps:
    """The custom ops, each running the op of the same name in ``eager`` when a graph runs it.

    Args:
        eager: The ops as called outside compiled code, by name; they have the signatures of
            the PyTorch references, which give the traced shapes.
    """
    defined = {
        name: _custom_op(
            name,
            schema,
            implementation=_running(call, eager[name]),
            fake=_tracing(call, getattr(reference, name)),
        )
        for name, (schema, call) in _CALLS.items()
    }
    return CustomOps(**defined)


def _running(call: _Call, function: _Op) -> _Op:
    def implementation(*args: Any) -> Tensor:
        # contiguous: the layout the fake output promised the graph
        return call(function, *args).contiguous()

    return implementation


def _tracing(call: _Call, function: _Op) -> _Op:
    def fake(*args: Any) -> Tensor:
        out = call(function, *args)
        return torch.empty_like(out, memory_format=torch.contiguous_format)

    return fake


def _conv2d(
    f: _Op,
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
    return f(input, weight, bias, list(stride), pad, list(dilation), groups, activation=activation)


def _linear(f: _Op, input: Tensor, weight: Tensor, bias: Tensor | None, activation: str) -> Tensor:
    return f(input, weight, bias, activation=activation)


def _matmul(f: _Op, a: Tensor, b: Tensor, activation: str) -> Tensor:
    return f(a, b, activation=activation)


def _layer_norm(
    f: _Op,
    input: Tensor,
    normalized_shape: Sequence[int],
    weight: Tensor | None,
    bias: Tensor | None,
    eps: float,
) -> Tensor:
    return f(input, list(normalized_shape), weight, bias, eps)


def _rms_norm(
    f: _Op,
    input: Tensor,
    normalized_shape: Sequence[int],
    weight: Tensor | None,
    eps: float | None,
) -> Tensor:
    return f(input, list(normalized_shape), weight, eps)


def _attention(
    f: _Op,
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None,
    dropout_p: float,
    is_causal: bool,
    scale: float | None,
    enable_gqa: bool,
) -> Tensor:
    return f(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)


# op -> (its custom op's schema, how the custom op's arguments call the op or its reference)
_CALLS: dict[str, tuple[str, _Call]] = {
    "conv2d": (
        "(Tensor input, Tensor weight, Tensor? bias, int[] stride, int[] padding,"
        " str? padding_name, int[] dilation, int groups, str activation) -> Tensor",
        _conv2d,
    ),
    "linear": ("(Tensor input, Tensor weight, Tensor? bias, str activation) -> Tensor", _linear),
    "matmul": ("(Tensor a, Tensor b, str activation) -> Tensor", _matmul),
    "layer_norm": (
        "(Tensor input, SymInt[] normalized_shape, Tensor? weight, Tensor? bias, float eps)"
        " -> Tensor",
        _layer_norm,
    ),
    "rms_norm": (
        "(Tensor input, SymInt[] normalized_shape, Tensor? weight, float? eps) -> Tensor",
        _rms_norm,
    ),
    "scaled_dot_product_attention": (
        "(Tensor query, Tensor key, Tensor value, Tensor? attn_mask, float dropout_p,"
        " bool is_causal, float? scale, bool enable_gqa) -> Tensor",
        _attention,
    ),
}


def conv2d_arguments(stride: Any, padding: Any, dilation: Any) -> tuple[Any, ...]:
    """``F.conv2d``'s ``stride``, ``padding``, ``dilation`` as the custom op takes them.

    Returns:
        ``(stride, padding, padding_name, dilation)``: int lists, and ``"same"`` or
        ``"valid"`` (with padding ``[0, 0]``) for a named padding.
    """
    if isinstance(padding, str):
        return _ints(stride), [0, 0], padding, _ints(dilation)
    return _ints(stride), _ints(padding), None, _ints(dilation)


def norm_shape(normalized_shape: Sequence[int] | int) -> list[int]:
    """``normalized_shape`` as the custom ops take it (an int list)."""
    return [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)


def _ints(value: Any) -> list[int]:
    return [value, value] if isinstance(value, int) else list(value)


def needs_autograd(*tensors: Tensor | None) -> bool:
    """Whether a call on ``tensors`` records autograd (then the kernels do not apply)."""
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


__all__ = [
    "NAMESPACE",
    "SUPPORTED",
    "CustomOps",
    "conv2d_arguments",
    "define",
    "is_compiling",
    "needs_autograd",
    "norm_shape",
]
