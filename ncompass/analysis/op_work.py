"""The work of one recorded operator: FLOPs and bytes from its ``Input Dims`` and ``Input type``.

The torch profiler with ``record_shapes=True`` writes, on every aten op, the shapes
(``Input Dims``), dtypes (``Input type``) and scalar arguments (``Concrete Inputs``) of its
inputs. From them:

- *Tensor FLOPs* (``tensor_flops``) follow ``torch.utils.flop_counter.FlopCounterMode``'s
  formulas for mm, addmm, bmm, baddbmm, linear, matmul-free convolution (forward and backward)
  and scaled-dot-product attention, for every attention backend, the CPU kernels included
  (which FlopCounterMode itself counts as 0); causal masks are counted in full, as it does.
- *Other FLOPs* are a documented count: elementwise ops 1 FLOP per output element, reductions
  1 per input element, softmax 5 and norms 8 per element (docs/analysis.md "Efficiency").
- *Bytes* are the sizes of the op's tensor inputs plus its output (where the shape is known):
  a lower bound on the memory traffic, since caches and re-reads are not seen.

Views and allocations do no work (0 FLOPs, 0 bytes).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

# Bytes per element of the dtype names the profiler writes in "Input type".
DTYPE_BYTES: dict[str, int] = {
    "float": 4,
    "double": 8,
    "c10::Half": 2,
    "c10::BFloat16": 2,
    "c10::Float8_e4m3fn": 1,
    "c10::Float8_e5m2": 1,
    "c10::Float8_e4m3fnuz": 1,
    "c10::Float8_e5m2fnuz": 1,
    "int": 4,
    "long int": 8,
    "short int": 2,
    "signed char": 1,
    "unsigned char": 1,
    "bool": 1,
    "c10::complex<float>": 8,
    "c10::complex<double>": 16,
}

# The peak-table key of a dtype name (the peaks are per dtype).
DTYPE_CLASS: dict[str, str] = {
    "float": "fp32",
    "double": "fp64",
    "c10::Half": "fp16",
    "c10::BFloat16": "bf16",
    "c10::Float8_e4m3fn": "fp8",
    "c10::Float8_e5m2": "fp8",
    "c10::Float8_e4m3fnuz": "fp8",
    "c10::Float8_e5m2fnuz": "fp8",
    "signed char": "int8",
    "unsigned char": "int8",
}

_MM = {"aten::mm", "aten::_scaled_mm"}
_ADDMM = {"aten::addmm"}
_BMM = {"aten::bmm"}
_BADDBMM = {"aten::baddbmm"}
_LINEAR = {"aten::linear"}
# (input, weight, bias, stride, padding, dilation, groups): conv{1,2,3}d
_CONV_ND = {"aten::conv1d", "aten::conv2d", "aten::conv3d"}
# (input, weight, bias, stride, padding, dilation, transposed, output_padding, groups, ...)
_CONVOLUTION = {"aten::convolution", "aten::_convolution", "aten::convolution_overrideable"}
# (input, weight, bias, stride, padding, output_padding, groups, dilation)
_CONV_TRANSPOSE = {"aten::conv_transpose1d", "aten::conv_transpose2d", "aten::conv_transpose3d"}
_CONV_BACKWARD = {"aten::convolution_backward"}
_SDPA = {
    "aten::scaled_dot_product_attention",
    "aten::_scaled_dot_product_flash_attention",
    "aten::_scaled_dot_product_flash_attention_for_cpu",
    "aten::_scaled_dot_product_efficient_attention",
    "aten::_scaled_dot_product_cudnn_attention",
    "aten::_scaled_dot_product_attention_math",
    "aten::_flash_attention_forward",
    "aten::_efficient_attention_forward",
}
_SDPA_BACKWARD = {
    "aten::_scaled_dot_product_flash_attention_backward",
    "aten::_scaled_dot_product_flash_attention_for_cpu_backward",
    "aten::_scaled_dot_product_efficient_attention_backward",
    "aten::_scaled_dot_product_cudnn_attention_backward",
}
_ELEMENTWISE = {
    "add", "sub", "rsub", "mul", "div", "neg", "abs", "relu", "gelu", "silu", "tanh", "sigmoid",
    "exp", "log", "sqrt", "rsqrt", "pow", "clamp", "clamp_min", "clamp_max", "where", "erf",
    "threshold_backward", "gelu_backward", "silu_backward", "tanh_backward",
    "sigmoid_backward", "hardtanh", "leaky_relu", "reciprocal", "sin", "cos", "masked_fill",
    "addcmul", "addcdiv", "lerp", "maximum", "minimum", "fill", "zero", "native_dropout",
    "eq", "ne", "lt", "le", "gt", "ge", "logical_not", "bitwise_not",
}  # fmt: skip
_REDUCTIONS = {"sum", "mean", "amax", "amin", "max", "min", "var", "std", "norm", "prod",
               "argmax", "argmin", "logsumexp", "all", "any"}  # fmt: skip
_SOFTMAX = {"softmax", "_softmax", "log_softmax", "_log_softmax", "_softmax_backward_data",
            "_log_softmax_backward_data", "_safe_softmax"}  # fmt: skip
_NORMS = {"layer_norm", "native_layer_norm", "native_layer_norm_backward", "group_norm",
          "native_group_norm", "batch_norm", "native_batch_norm", "_native_batch_norm_legit",
          "rms_norm", "_fused_rms_norm", "native_batch_norm_backward"}  # fmt: skip
# Ops that move memory without arithmetic: bytes, no FLOPs. Names as _base_name gives them
# (no aten::, no trailing _). Not contiguous/to: they return their input when it already fits,
# and the clone/_to_copy inside is recorded when they do copy.
# (dropout, too, returns its input in eval mode; native_dropout is the one that works.) Lookups
# (embedding, index_select, gather) read only the rows they pick: left out, not overcounted.
_COPIES = {"copy", "clone", "cat", "stack", "_to_copy", "repeat", "flip", "roll",
           "constant_pad_nd"}  # fmt: skip
# Ops that write into an input (copy_(dst, src), fill_): no separate output bytes.
_NO_OUTPUT = {"copy", "fill", "zero"}

TENSOR_FLOP_OPS = frozenset(
    _MM | _ADDMM | _BMM | _BADDBMM | _LINEAR | _CONV_ND | _CONVOLUTION | _CONV_TRANSPOSE
    | _CONV_BACKWARD | _SDPA | _SDPA_BACKWARD
)  # fmt: skip
"""The ops whose FLOPs follow FlopCounterMode (matrix products, convolutions, attention)."""


@dataclass(slots=True)
class OpWork:
    """The work one op call does: FLOPs (tensor ones among them) and bytes; its dtype class."""

    tensor_flops: float = 0.0
    flops: float = 0.0  # tensor FLOPs and the documented count of the rest
    bytes: float = 0.0
    dtype: str = ""  # the peak-table key of the first tensor input ("fp32", "bf16", ...)

    @property
    def does_work(self) -> bool:
        """Whether the op computes or moves anything (views and allocations do not)."""
        return self.flops > 0 or self.bytes > 0


_COUNTED: dict[str, bool] = {}


def counts_work(name: str) -> bool:
    """Whether ``name`` is an op whose work is counted (cheap: decided once per name)."""
    known = _COUNTED.get(name)
    if known is None:
        base = _base_name(name)
        known = _COUNTED[name] = name in TENSOR_FLOP_OPS or any(
            base in group for group in (_ELEMENTWISE, _REDUCTIONS, _SOFTMAX, _NORMS, _COPIES)
        )
    return known


def _base_name(name: str) -> str:
    short = name[6:] if name.startswith("aten::") else name
    return short[:-1] if short.endswith("_") and not short.endswith("__") else short


def op_work(name: str, dims: Any, types: Any, concrete: Any) -> OpWork | None:
    """The work of one op call from its recorded inputs, or None when it does none we count.

    Args:
        name: The op name (``aten::addmm``).
        dims: ``args["Input Dims"]``: one shape per input ([] for non-tensors).
        types: ``args["Input type"]``: one dtype name per input.
        concrete: ``args["Concrete Inputs"]``: scalar inputs as text ('' for tensors), or None.
    """
    if not isinstance(dims, list) or not isinstance(types, list):
        return None
    if not counts_work(name):
        return None
    base = _base_name(name)
    if name in _CONV_ND and not (isinstance(concrete, list) and len(concrete) > 4 and concrete[4]):
        return None  # padding="same"/"valid" is recorded as '': aten::convolution inside says
    shapes = [_shape(entry) for entry in dims]
    tensors = [
        (shape, types[index] if index < len(types) else "")
        for index, shape in enumerate(shapes)
        if shape is not None and isinstance(types[index] if index < len(types) else "", str)
        and (types[index] if index < len(types) else "") in DTYPE_BYTES
    ]  # fmt: skip
    texts = concrete if isinstance(concrete, list) else []
    work = OpWork(dtype=_first_dtype(tensors))
    input_bytes = sum(_numel(shape) * DTYPE_BYTES[dtype] for shape, dtype in tensors)
    input_bytes += _list_bytes(dims, types)
    element = DTYPE_BYTES.get(tensors[0][1], 4) if tensors else 4
    try:
        tensor_flops, out_shape = _tensor_flops(name, shapes, texts)
    except (
        AssertionError,
        IndexError,
        TypeError,
        ValueError,
        ZeroDivisionError,
    ):  # an odd call: count its bytes only
        tensor_flops, out_shape = 0.0, None
    if name in TENSOR_FLOP_OPS:
        work.tensor_flops = work.flops = tensor_flops
    elif base in _ELEMENTWISE:
        out_shape = _broadcast([shape for shape, _ in tensors])
        work.flops = float(_numel(out_shape)) if out_shape is not None else 0.0
    elif base in _REDUCTIONS:
        work.flops = float(_numel(tensors[0][0])) if tensors else 0.0
    elif base in _SOFTMAX:
        out_shape = tensors[0][0] if tensors else None
        work.flops = 5.0 * _numel(out_shape) if out_shape is not None else 0.0
    elif base in _NORMS:
        out_shape = tensors[0][0] if tensors else None
        work.flops = 8.0 * _numel(out_shape) if out_shape is not None else 0.0
    elif base in _COPIES and base not in _NO_OUTPUT:
        out_shape = tensors[0][0] if tensors and base != "cat" else None
        if base == "cat":  # the output is as large as the inputs together
            input_bytes *= 2
    output_bytes = 0 if out_shape is None or _base_name(name) in _NO_OUTPUT else (
        _numel(out_shape) * element
    )  # fmt: skip
    work.bytes = float(input_bytes + output_bytes)
    return work if work.does_work else None


def _shape(entry: Any) -> list[int] | None:
    """A tensor's shape, or None for a non-tensor input (an empty list, or a list of shapes)."""
    if not isinstance(entry, list) or not entry:
        return None
    if all(isinstance(size, int) and not isinstance(size, bool) for size in entry):
        return entry
    return None


def _list_bytes(dims: list[Any], types: list[Any]) -> int:
    """Bytes of TensorList inputs (``cat``'s): a list of shapes under one dtype-less type."""
    total = 0
    for index, entry in enumerate(dims):
        kind = types[index] if index < len(types) else ""
        if kind == "TensorList" and isinstance(entry, list):
            for shape in entry:
                if isinstance(shape, list) and all(isinstance(size, int) for size in shape):
                    total += _numel(shape) * 4  # the list's dtype is not recorded: 4 bytes
    return total


def _first_dtype(tensors: Sequence[tuple[list[int], str]]) -> str:
    for _, dtype in tensors:
        if dtype in DTYPE_CLASS:
            return DTYPE_CLASS[dtype]
    return "fp32" if not tensors else DTYPE_CLASS.get(tensors[0][1], "fp32")


def _numel(shape: Sequence[int] | None) -> int:
    return math.prod(shape) if shape else (1 if shape is not None else 0)


def _broadcast(shapes: Sequence[list[int]]) -> list[int] | None:
    if not shapes:
        return None
    rank = max(len(shape) for shape in shapes)
    out = [1] * rank
    for shape in shapes:
        for offset, size in enumerate(reversed(shape)):
            position = rank - 1 - offset
            out[position] = max(out[position], size)
    return out


_INTS = re.compile(r"-?\d+")


def _ints(texts: Sequence[Any], index: int, rank: int, default: int) -> list[int]:
    """An int-list argument from ``Concrete Inputs`` (``'[2, 2]'`` or ``'2'``), per dimension."""
    text = texts[index] if index < len(texts) and isinstance(texts[index], str) else ""
    values = [int(value) for value in _INTS.findall(text)]
    if not values:
        return [default] * rank
    return values * rank if len(values) == 1 else values


def _flag(texts: Sequence[Any], index: int) -> bool:
    return index < len(texts) and isinstance(texts[index], str) and texts[index] == "True"


def _mm(a: list[int], b: list[int]) -> float:
    m, k = a[-2], a[-1]
    return 2.0 * m * k * b[-1]


def _bmm(a: list[int], b: list[int]) -> float:
    batch, m, k = a
    return 2.0 * batch * m * k * b[2]


def _conv_count(x: list[int], w: list[int], out: list[int], transposed: bool) -> float:
    """FlopCounterMode's ``conv_flop_count``."""
    conv_shape = (x if transposed else out)[2:]
    c_out, c_in, *kernel = w
    return 2.0 * math.prod(conv_shape) * math.prod(kernel) * x[0] * c_out * c_in


def _conv_out(
    x: list[int], w: list[int], stride: list[int], padding: list[int], dilation: list[int]
) -> list[int]:
    spatial = [
        (size + 2 * padding[axis] - dilation[axis] * (w[2 + axis] - 1) - 1) // stride[axis] + 1
        for axis, size in enumerate(x[2:])
    ]
    return [x[0], w[0], *spatial]


def _conv_padding(texts: Sequence[Any], index: int, rank: int, x: list[int]) -> list[int]:
    text = texts[index] if index < len(texts) and isinstance(texts[index], str) else ""
    if "same" in text:  # stride 1: the output is as large as the input; padding left at 0
        return [-1] * rank
    return _ints(texts, index, rank, 0)


def _conv(
    x: list[int],
    w: list[int],
    texts: Sequence[Any],
    positions: tuple[int, int, int],
    transposed: bool,
) -> tuple[float, list[int] | None]:
    rank = len(x) - 2
    stride_at, padding_at, dilation_at = positions
    stride = _ints(texts, stride_at, rank, 1)
    dilation = _ints(texts, dilation_at, rank, 1)
    padding = _conv_padding(texts, padding_at, rank, x)
    if transposed:
        return _conv_count(x, w, [], True), None
    same = padding[0] == -1
    out = [x[0], w[0], *x[2:]] if same else _conv_out(x, w, stride, padding, dilation)
    return _conv_count(x, w, out, False), out


def _attention(q: list[int], k: list[int], v: list[int]) -> float:
    """FlopCounterMode's ``sdpa_flop_count``; 3-D inputs are one head."""
    if len(q) == 3:
        q, k, v = [q[0], 1, *q[1:]], [k[0], 1, *k[1:]], [v[0], 1, *v[1:]]
    b, h, s_q, d_q = q
    s_k, d_v = k[2], v[3]
    return _bmm([b * h, s_q, d_q], [b * h, d_q, s_k]) + _bmm([b * h, s_q, s_k], [b * h, s_k, d_v])


def _attention_backward(go: list[int], q: list[int], k: list[int], v: list[int]) -> float:
    """FlopCounterMode's ``sdpa_backward_flop_count``."""
    if len(q) == 3:
        go, q, k, v = ([s[0], 1, *s[1:]] for s in (go, q, k, v))
    b, h, s_q, d_q = q
    s_k, d_v = k[2], v[3]
    bh = b * h
    return (
        _bmm([bh, s_q, d_q], [bh, d_q, s_k])
        + _bmm([bh, s_q, d_v], [bh, d_v, s_k])
        + _bmm([bh, s_k, s_q], [bh, s_q, d_v])
        + _bmm([bh, s_q, s_k], [bh, s_k, d_q])
        + _bmm([bh, d_q, s_q], [bh, s_q, s_k])
    )


def _tensor_flops(
    name: str, shapes: list[list[int] | None], texts: Sequence[Any]
) -> tuple[float, list[int] | None]:
    """FLOPs and output shape of a FlopCounterMode-counted op ((0, None) for any other)."""
    s = shapes
    if name in _MM:
        a, b = s[0], s[1]
        assert a is not None and b is not None
        return _mm(a, b), [a[-2], b[-1]]
    if name in _ADDMM:
        a, b = s[1], s[2]
        assert a is not None and b is not None
        return _mm(a, b), [a[-2], b[-1]]
    if name in _BMM or name in _BADDBMM:
        a, b = (s[0], s[1]) if name in _BMM else (s[1], s[2])
        assert a is not None and b is not None
        return _bmm(a, b), [a[0], a[1], b[2]]
    if name in _LINEAR:  # input [..., in], weight [out, in]: the mm it decomposes into
        x, w = s[0], s[1]
        assert x is not None and w is not None
        rows = math.prod(x[:-1])
        return 2.0 * rows * x[-1] * w[0], [*x[:-1], w[0]]
    if name in _CONV_ND:
        x, w = s[0], s[1]
        assert x is not None and w is not None
        return _conv(x, w, texts, (3, 4, 5), False)
    if name in _CONVOLUTION:
        x, w = s[0], s[1]
        assert x is not None and w is not None
        return _conv(x, w, texts, (3, 4, 5), _flag(texts, 6))
    if name in _CONV_TRANSPOSE:
        x, w = s[0], s[1]
        assert x is not None and w is not None
        # conv_transpose weights are [c_in, c_out/groups, ...]: FlopCounterMode sees them so
        return _conv_count(x, w, [], True), None
    if name in _CONV_BACKWARD:
        go, x, w = s[0], s[1], s[2]
        assert go is not None and x is not None and w is not None
        transposed = _flag(texts, 7)
        mask_text = texts[10] if len(texts) > 10 and isinstance(texts[10], str) else ""
        mask = [part.strip() == "True" for part in mask_text.strip("[]").split(",")]
        mask = mask if len(mask) == 3 else [True, True, False]
        flops = 0.0
        if mask[0]:
            flops += _conv_count(go, w, x, not transposed)
        if mask[1]:
            t_go, t_x, t_w = ([shape[1], shape[0], *shape[2:]] for shape in (go, x, w))
            first, second = (t_go, t_x) if transposed else (t_x, t_go)
            flops += _conv_count(first, second, t_w, False)
        return flops, None
    if name in _SDPA:
        q, k, v = s[0], s[1], s[2]
        assert q is not None and k is not None and v is not None
        return _attention(q, k, v), [*q[:-1], v[-1]]
    if name in _SDPA_BACKWARD:
        go, q, k, v = s[0], s[1], s[2], s[3]
        assert go is not None and q is not None and k is not None and v is not None
        return _attention_backward(go, q, k, v), None
    return 0.0, None


__all__ = ["DTYPE_BYTES", "DTYPE_CLASS", "TENSOR_FLOP_OPS", "OpWork", "counts_work", "op_work"]
