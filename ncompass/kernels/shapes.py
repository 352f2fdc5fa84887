"""Op shapes as text (``ncompass kernels tune --shapes``) and the shapes of well-known models.

A shape is comma-separated ``name=value`` fields; sizes are ``x``-separated::

    conv2d      x=1x64x56x56,w=64x64x3x3,stride=1,padding=1[,bias=0]
    linear      x=2048x4096,w=11008x4096[,bias=0][,activation=silu]     (x may be N-D)
    matmul      a=512x1024,b=1024x256[,activation=relu]
    layer_norm  x=4096x4096        (normalised over the last dimension)
    rms_norm    x=4096x4096
    scaled_dot_product_attention  q=1x32x2048x128[,kv_len=4096][,causal=1]   (q: [B,]H,L,E)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ncompass.kernels.catalog import op_named
from ncompass.kernels.errors import KernelError
from ncompass.kernels.problems import ACTIVATIONS

_TENSORS: dict[str, tuple[str, ...]] = {
    "conv2d": ("x", "w"),
    "linear": ("x", "w"),
    "matmul": ("a", "b"),
    "layer_norm": ("x",),
    "rms_norm": ("x",),
    "scaled_dot_product_attention": ("q",),
}
_OPTIONS: dict[str, tuple[str, ...]] = {
    "conv2d": ("stride", "padding", "bias", "activation"),
    "linear": ("bias", "activation"),
    "matmul": ("activation",),
    "layer_norm": (),
    "rms_norm": (),
    "scaled_dot_product_attention": ("kv_len", "causal"),
}
_RANKS: dict[tuple[str, str], tuple[int, int]] = {
    ("conv2d", "x"): (4, 4),
    ("conv2d", "w"): (4, 4),
    ("linear", "x"): (1, 8),
    ("linear", "w"): (2, 2),
    ("matmul", "a"): (2, 2),
    ("matmul", "b"): (2, 2),
    ("layer_norm", "x"): (1, 8),
    ("rms_norm", "x"): (1, 8),
    ("scaled_dot_product_attention", "q"): (3, 4),
}


@dataclass(frozen=True)
class OpShape:
    """The tensor sizes and options of one op call.

    Attributes:
        op: The op (``conv2d``, ...).
        sizes: Tensor name -> sizes (``{"x": (1, 64, 56, 56), "w": (64, 64, 3, 3)}``).
        options: ``stride``/``padding``/``kv_len`` (ints), ``bias``/``causal`` (bools),
            ``activation`` (str).
        label: What the user or preset wrote.
    """

    op: str
    sizes: dict[str, tuple[int, ...]]
    options: dict[str, Any] = field(default_factory=dict)
    label: str = ""

    def arguments(
        self, dtype: Any, device: Any, seed: int = 0
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """Random inputs for this shape (scaled so outputs stay near 1): ``(args, kwargs)``."""
        import torch

        generator = torch.Generator().manual_seed(seed)

        def random(*size: int, scale: float = 1.0) -> Any:
            values = torch.randn(*size, generator=generator) * scale
            return values.to(device=device, dtype=dtype)

        bias = self.options.get("bias", True)
        activation = self.options.get("activation")
        if self.op == "conv2d":
            x, w = self.sizes["x"], self.sizes["w"]
            fan_in = w[1] * w[2] * w[3]
            args = (random(*x), random(*w, scale=fan_in**-0.5), random(w[0]) if bias else None)
            stride, padding = self.options.get("stride", 1), self.options.get("padding", 0)
            return (*args, stride, padding), {"activation": activation}
        if self.op == "linear":
            x, w = self.sizes["x"], self.sizes["w"]
            args = (random(*x), random(*w, scale=w[1] ** -0.5), random(w[0]) if bias else None)
            return args, {"activation": activation}
        if self.op == "matmul":
            a, b = self.sizes["a"], self.sizes["b"]
            return (random(*a), random(*b, scale=b[0] ** -0.5)), {"activation": activation}
        if self.op == "scaled_dot_product_attention":
            q = self.sizes["q"]
            kv = (*q[:-2], self.options.get("kv_len", q[-2]), q[-1])
            causal = self.options.get("causal", False)
            return (random(*q), random(*kv), random(*kv)), {"is_causal": causal}
        x = self.sizes["x"]
        cols = x[-1]
        if self.op == "layer_norm":
            return (random(*x), (cols,), random(cols), random(cols)), {}
        return (random(*x), (cols,), random(cols)), {}

    def flops(self) -> int:
        """Floating-point operations of a GEMM-shaped op (0 for the memory-bound norms)."""
        if self.op == "conv2d":
            (n, _, h, w), (k, c, r, s) = self.sizes["x"], self.sizes["w"]
            stride, padding = self.options.get("stride", 1), self.options.get("padding", 0)
            p = (h + 2 * padding - r) // stride + 1
            q = (w + 2 * padding - s) // stride + 1
            return int(2 * n * p * q * k * c * r * s)
        if self.op == "linear":
            rows = 1
            for size in self.sizes["x"][:-1]:
                rows *= size
            n, k = self.sizes["w"]
            return 2 * rows * n * k
        if self.op == "matmul":
            (m, k), (_, n) = self.sizes["a"], self.sizes["b"]
            return 2 * m * n * k
        if self.op == "scaled_dot_product_attention":
            q = self.sizes["q"]
            pairs = q[0] * (q[1] if len(q) == 4 else 1)
            full = 4 * pairs * q[-2] * int(self.options.get("kv_len", q[-2])) * q[-1]
            return full // 2 if self.options.get("causal") else full
        return 0

    def elements(self) -> int:
        """Elements of the main input (for the bandwidth of memory-bound ops)."""
        first = self.sizes[_TENSORS[self.op][0]]
        total = 1
        for size in first:
            total *= size
        return total


def parse_shape(op: str, text: str) -> OpShape:
    """Read one shape of ``op`` (see the module docstring for the syntax).

    Raises:
        KernelError: an unknown op, field or option, a malformed size, or a missing tensor.
    """
    op_named(op)
    sizes: dict[str, tuple[int, ...]] = {}
    options: dict[str, Any] = {}
    for part in (piece.strip() for piece in text.split(",") if piece.strip()):
        name, sep, value = part.partition("=")
        name = name.strip()
        if not sep:
            raise KernelError(f"{op} shape {text!r}: {part!r} is not name=value")
        if name in _TENSORS[op]:
            sizes[name] = _sizes(op, text, name, value)
        elif name in _OPTIONS[op]:
            options[name] = _option(op, text, name, value.strip())
        else:
            known = ", ".join((*_TENSORS[op], *_OPTIONS[op]))
            raise KernelError(f"{op} shape {text!r}: unknown field {name!r}; fields: {known}")
    missing = [name for name in _TENSORS[op] if name not in sizes]
    if missing:
        example = _EXAMPLES[op]
        raise KernelError(f"{op} shape {text!r} lacks {', '.join(missing)}; e.g. {example}")
    shape = OpShape(op, sizes, options, text)
    _check_consistent(shape)
    return shape


def parse_shapes(op: str, texts: tuple[str, ...]) -> list[OpShape]:
    """Every shape of ``texts`` (each may hold several, separated by ``;``)."""
    return [
        parse_shape(op, piece.strip())
        for text in texts
        for piece in text.split(";")
        if piece.strip()
    ]


_EXAMPLES = {
    "conv2d": "x=1x64x56x56,w=64x64x3x3,stride=1,padding=1",
    "linear": "x=2048x4096,w=11008x4096",
    "matmul": "a=512x1024,b=1024x256",
    "layer_norm": "x=4096x4096",
    "rms_norm": "x=4096x4096",
    "scaled_dot_product_attention": "q=1x32x2048x128,causal=1",
}


def _sizes(op: str, text: str, name: str, value: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(size) for size in value.strip().lower().split("x"))
    except ValueError:
        raise KernelError(
            f"{op} shape {text!r}: {name}={value!r} is not sizes like 64x3x3"
        ) from None
    low, high = _RANKS[(op, name)]
    if not low <= len(sizes) <= high or min(sizes) < 1:
        want = f"{low}" if low == high else f"{low} to {high}"
        raise KernelError(f"{op} shape {text!r}: {name} needs {want} positive sizes")
    return sizes


def _option(op: str, text: str, name: str, value: str) -> Any:
    if name == "activation":
        if value not in ACTIVATIONS:
            choices = ", ".join(ACTIVATIONS)
            raise KernelError(f"{op} shape {text!r}: activation {value!r} is not one of {choices}")
        return value
    if name in ("bias", "causal"):
        if value not in {"0", "1", "true", "false"}:
            raise KernelError(f"{op} shape {text!r}: {name} must be 0 or 1")
        return value in {"1", "true"}
    try:
        number = int(value)
    except ValueError:
        raise KernelError(f"{op} shape {text!r}: {name} must be an integer") from None
    if number < (1 if name in ("stride", "kv_len") else 0):
        raise KernelError(f"{op} shape {text!r}: {name}={number} is out of range")
    return number


def _check_consistent(shape: OpShape) -> None:
    sizes, op = shape.sizes, shape.op
    checks: dict[str, Callable[[], bool]] = {
        "conv2d": lambda: sizes["x"][1] == sizes["w"][1],
        "linear": lambda: sizes["x"][-1] == sizes["w"][1],
        "matmul": lambda: sizes["a"][1] == sizes["b"][0],
    }
    check = checks.get(op)
    if check is not None and not check():
        raise KernelError(f"{op} shape {shape.label!r}: the reduction sizes do not match")


def _conv(n: int, c: int, hw: int, k: int, rs: int, stride: int = 1) -> tuple[str, str]:
    padding = rs // 2
    return ("conv2d", f"x={n}x{c}x{hw}x{hw},w={k}x{c}x{rs}x{rs},stride={stride},padding={padding}")


def _resnet50(n: int) -> list[tuple[str, str]]:
    """The distinct convolutions of torchvision's ResNet-50 (v1.5) on 224x224 images."""
    return [
        _conv(n, 3, 224, 64, 7, 2),
        _conv(n, 64, 56, 64, 1),
        _conv(n, 64, 56, 64, 3),
        _conv(n, 64, 56, 256, 1),
        _conv(n, 256, 56, 64, 1),
        _conv(n, 256, 56, 128, 1),
        _conv(n, 128, 56, 128, 3, 2),
        _conv(n, 128, 28, 512, 1),
        _conv(n, 256, 56, 512, 1, 2),
        _conv(n, 512, 28, 128, 1),
        _conv(n, 128, 28, 128, 3),
        _conv(n, 512, 28, 256, 1),
        _conv(n, 256, 28, 256, 3, 2),
        _conv(n, 256, 14, 1024, 1),
        _conv(n, 512, 28, 1024, 1, 2),
        _conv(n, 1024, 14, 256, 1),
        _conv(n, 256, 14, 256, 3),
        _conv(n, 1024, 14, 512, 1),
        _conv(n, 512, 14, 512, 3, 2),
        _conv(n, 512, 7, 2048, 1),
        _conv(n, 1024, 14, 2048, 1, 2),
        _conv(n, 2048, 7, 512, 1),
        _conv(n, 512, 7, 512, 3),
    ]


def _llama7b(tokens: int) -> list[tuple[str, str]]:
    """The layers of one Llama-2-7B decoder layer (and the head) for ``tokens`` tokens."""
    return [
        ("linear", f"x={tokens}x4096,w=4096x4096,bias=0"),  # q, k, v, o projections
        ("linear", f"x={tokens}x4096,w=11008x4096,bias=0"),  # gate and up projections
        ("linear", f"x={tokens}x11008,w=4096x11008,bias=0"),  # down projection
        ("linear", f"x={tokens}x4096,w=32000x4096,bias=0"),  # lm head
        ("rms_norm", f"x={tokens}x4096"),
        ("scaled_dot_product_attention", f"q=1x32x{tokens}x128,causal=1"),  # prefill
    ]


PRESETS: dict[str, list[tuple[str, str]]] = {
    # the demo (examples/tiny_transformer.py): batch 2, up to 40 tokens, dim 128, vocab 512
    "tinyformer": [
        ("linear", "x=2x40x128,w=384x128"),
        ("linear", "x=2x40x128,w=128x128"),
        ("linear", "x=2x40x128,w=512x128"),
        ("linear", "x=2x40x512,w=128x512"),
        ("linear", "x=2x40x128,w=512x128,bias=0"),
        ("layer_norm", "x=2x40x128"),
    ],
    "resnet50": _resnet50(32),
    "llama7b": _llama7b(2048),
    "llama7b-decode": _llama7b(16),
}
"""Named lists of (op, shape) for ``ncompass kernels tune --preset`` and the benchmark."""


def preset(name: str) -> list[OpShape]:
    """The shapes of a preset.

    Raises:
        KernelError: no such preset.
    """
    entries = PRESETS.get(name)
    if entries is None:
        raise KernelError(f"no preset {name!r}; choose one of {', '.join(PRESETS)}")
    return [parse_shape(op, text) for op, text in entries]


__all__ = ["PRESETS", "OpShape", "parse_shape", "parse_shapes", "preset"]
