"""The ops: PyTorch-compatible functions that run a Triton kernel when they can.

Each op has the signature of the PyTorch function it stands for (plus a keyword-only
``activation`` on the GEMM-shaped ones), so a spec can swap ``F.conv2d``, ``F.linear`` or
``F.scaled_dot_product_attention`` for it.
A call checks the kernel's conditions (:mod:`~ncompass.kernels.conditions`) and where the kernel
can run (:mod:`~ncompass.kernels.backend`); if either says no, it runs the PyTorch reference and
counts the reason (:func:`ncompass.kernels.stats`).

While a torch profiler records, each call is a ``user_annotation`` range named
``ncompass.kernels.<op>[triton]`` or ``ncompass.kernels.<op>[pytorch]``, so a trace shows which
path ran inside the user's own markers.

Under ``torch.compile`` each op is traced as its ``torch.library`` custom op
(:mod:`~ncompass.kernels.custom_ops`): one node in the graph, which runs the call as above when
the graph runs.

Example:
    >>> from ncompass.kernels import ops
    >>> out = ops.conv2d(x, w, b, stride=(1, 1), padding=(1, 1))
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any, cast

import torch

from ncompass.kernels import conditions, custom_ops, execute, reference
from ncompass.kernels.backend import unavailable_reason
from ncompass.kernels.catalog import KERNEL_MODULES, OPS
from ncompass.kernels.custom_ops import is_compiling
from ncompass.kernels.stats import record_fallback, record_kernel

_IDLE = contextlib.nullcontext()


def conv2d(
    input: Any,
    weight: Any,
    bias: Any | None = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
    *,
    activation: str | None = None,
) -> Any:
    """``torch.nn.functional.conv2d`` (then ``activation``) on the implicit-GEMM kernel.

    3-D (unbatched) inputs are treated as a batch of one, as PyTorch does.
    """
    act = conditions.check_activation(activation)
    if input.dim() == 3 and weight.dim() == 4:
        batched = input.unsqueeze(0)
        return conv2d(batched, weight, bias, stride, padding, dilation, groups, activation=act)[0]
    if is_compiling():
        if custom_ops.needs_autograd(input, weight, bias):
            return reference.conv2d(input, weight, bias, stride, padding, dilation, groups, act)
        arguments = custom_ops.conv2d_arguments(stride, padding, dilation)
        return CUSTOM_OPS.conv2d(input, weight, bias, *arguments, groups, act)
    return _dispatch(
        "conv2d",
        (input, weight, bias),
        lambda: conditions.conv2d_problem(
            input, weight, bias, stride, padding, dilation, groups, act
        ),
        lambda problem: execute.conv2d_launch(problem, input, weight, bias),
        lambda: reference.conv2d(input, weight, bias, stride, padding, dilation, groups, act),
    )


def linear(
    input: Any, weight: Any, bias: Any | None = None, *, activation: str | None = None
) -> Any:
    """``torch.nn.functional.linear`` (then ``activation``) on the GEMM kernel.

    ``input`` is ``(..., K)``, any layout; the weight is read transposed in place, never copied.
    """
    act = conditions.check_activation(activation)
    if is_compiling():
        if custom_ops.needs_autograd(input, weight, bias):
            return reference.linear(input, weight, bias, act)
        return CUSTOM_OPS.linear(input, weight, bias, act)
    leading = tuple(input.shape[:-1])

    def problem() -> Any:
        if input.dim() == 0:
            return "shapes do not match"
        if input.numel() == 0:
            return "empty tensor"
        return conditions.gemm_problem(_rows(input), weight, bias, act, b_is_weight=True)

    return _dispatch(
        "linear",
        (input, weight, bias),
        problem,
        lambda problem: execute.gemm_launch(problem, _rows(input), weight.t(), bias),
        lambda: reference.linear(input, weight, bias, act),
        lambda out: out.reshape(*leading, out.shape[-1]),
    )


def matmul(a: Any, b: Any, *, activation: str | None = None) -> Any:
    """``a @ b`` (then ``activation``) for 2-D operands on the GEMM kernel."""
    act = conditions.check_activation(activation)
    if is_compiling():
        if custom_ops.needs_autograd(a, b):
            return reference.matmul(a, b, act)
        return CUSTOM_OPS.matmul(a, b, act)
    return _dispatch(
        "matmul",
        (a, b),
        lambda: conditions.gemm_problem(a, b, None, act, b_is_weight=False),
        lambda problem: execute.gemm_launch(problem, a, b, None),
        lambda: reference.matmul(a, b, act),
    )


def layer_norm(
    input: Any,
    normalized_shape: Sequence[int] | int,
    weight: Any | None = None,
    bias: Any | None = None,
    eps: float = 1e-5,
) -> Any:
    """``torch.nn.functional.layer_norm`` on the fused row-normalisation kernel."""
    if is_compiling():
        if custom_ops.needs_autograd(input, weight, bias):
            return reference.layer_norm(input, normalized_shape, weight, bias, eps)
        shape = custom_ops.norm_shape(normalized_shape)
        return CUSTOM_OPS.layer_norm(input, shape, weight, bias, eps)
    return _dispatch(
        "layer_norm",
        (input, weight, bias),
        lambda: conditions.norm_problem(input, normalized_shape, weight, bias, eps, rms=False),
        lambda problem: execute.norm_launch(problem, input, weight, bias),
        lambda: reference.layer_norm(input, normalized_shape, weight, bias, eps),
    )


def rms_norm(
    input: Any,
    normalized_shape: Sequence[int] | int,
    weight: Any | None = None,
    eps: float | None = None,
) -> Any:
    """``torch.nn.functional.rms_norm`` on the fused row-normalisation kernel.

    ``eps=None`` means the machine epsilon of the computation type, as in PyTorch (float32's
    for float16 and bfloat16 inputs).
    """
    if is_compiling():
        if custom_ops.needs_autograd(input, weight):
            return reference.rms_norm(input, normalized_shape, weight, eps)
        shape = custom_ops.norm_shape(normalized_shape)
        return CUSTOM_OPS.rms_norm(input, shape, weight, eps)

    def problem() -> Any:
        resolved = eps
        if resolved is None:
            # PyTorch takes the epsilon of the type it computes in: float32 for 16-bit inputs
            computed_in = torch.promote_types(input.dtype, torch.float32)
            resolved = torch.finfo(computed_in).eps if computed_in.is_floating_point else 0.0
        return conditions.norm_problem(input, normalized_shape, weight, None, resolved, rms=True)

    return _dispatch(
        "rms_norm",
        (input, weight),
        problem,
        lambda problem: execute.norm_launch(problem, input, weight, None),
        lambda: reference.rms_norm(input, normalized_shape, weight, eps),
    )


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
    """``torch.nn.functional.scaled_dot_product_attention`` on the one-pass attention kernel.

    The kernel runs unmasked or causal attention without dropout; other calls run PyTorch.
    """
    if is_compiling():
        if custom_ops.needs_autograd(query, key, value, attn_mask):
            return reference.scaled_dot_product_attention(
                query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa
            )
        return CUSTOM_OPS.scaled_dot_product_attention(
            query, key, value, attn_mask, float(dropout_p), bool(is_causal), scale, enable_gqa
        )
    if enable_gqa and query.dim() == 4 and key.dim() == 4 and value.dim() == 4:
        grouped = _grouped_heads(query, key), _grouped_heads(query, value)
        if all(states.shape[-3] == query.shape[-3] for states in grouped):
            (key, value), enable_gqa = grouped, False
    return _dispatch(
        "scaled_dot_product_attention",
        (query, key, value, attn_mask),
        lambda: conditions.attention_problem(
            query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa
        ),
        lambda problem: execute.attention_launch(problem, query, key, value),
        lambda: reference.scaled_dot_product_attention(
            query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa
        ),
        lambda out: out.reshape(query.shape) if query.dim() == 3 else out,
    )


def _grouped_heads(query: Any, states: Any) -> Any:
    """``states`` (key or value) with each of its heads repeated for the query heads that share
    it, as ``enable_gqa=True`` means (transformers 5 passes it instead of repeating them itself);
    unchanged when the head counts do not divide (the fallback then says why)."""
    heads, groups = query.shape[-3], states.shape[-3]
    if groups == heads or groups == 0 or heads % groups:
        return states
    return states.repeat_interleave(heads // groups, dim=-3)


def _rows(input: Any) -> Any:
    """``input`` as ``(rows, K)``: a view whenever its layout allows (as in F.linear)."""
    return input.reshape(-1, input.shape[-1])


def _dispatch(
    op: str,
    tensors: tuple[Any, ...],
    problem: Callable[[], Any],
    launch: Callable[[Any], execute.KernelLaunch],
    fallback: Callable[[], Any],
    finish: Callable[[Any], Any] | None = None,
) -> Any:
    """Run ``launch(problem())`` if a device can run the kernel and it supports the call, and
    return its output (through ``finish``, which restores the caller's shape).

    Where the kernels can run is checked first: it is the cheapest check, and on a machine
    without a GPU it is the one that fails, so falling back costs little there. A cached config
    the kernel's search space cannot give is refused before the ``[triton]`` range opens.
    """
    reason = unavailable_reason(tensors, _KERNEL_MODULES[op])
    supported = problem() if reason is None else reason
    if isinstance(supported, str):
        return _fall_back(op, supported, fallback)
    built = launch(supported)
    refused = built.unusable_choice()
    if refused is not None:
        return _fall_back(op, refused, fallback)
    record_kernel(op)
    with _marker(f"ncompass.kernels.{op}[triton]"):
        out = built.run()
    return out if finish is None else finish(out)


def _fall_back(op: str, reason: str, fallback: Callable[[], Any]) -> Any:
    record_fallback(op, reason)
    if torch.autograd.profiler._is_profiler_enabled:
        with _marker(f"ncompass.kernels.{op}[pytorch]"):
            return fallback()
    return fallback()


def _marker(name: str) -> contextlib.AbstractContextManager[Any]:
    """A profiler range while a torch profiler records; nothing otherwise."""
    # the flag torch's own record_function paths read; True only while a profiler runs
    if torch.autograd.profiler._is_profiler_enabled:
        return cast("contextlib.AbstractContextManager[Any]", torch.profiler.record_function(name))
    return _IDLE


_KERNEL_MODULES = {op: KERNEL_MODULES[spec.kernel] for op, spec in OPS.items()}

CUSTOM_OPS = custom_ops.define(
    {
        "conv2d": conv2d,
        "linear": linear,
        "matmul": matmul,
        "layer_norm": layer_norm,
        "rms_norm": rms_norm,
        "scaled_dot_product_attention": scaled_dot_product_attention,
    }
)
"""What the ops call while Dynamo traces: ``torch.ops.ncompass.<op>``, which run the ops above."""


__all__ = ["conv2d", "layer_norm", "linear", "matmul", "rms_norm", "scaled_dot_product_attention"]
