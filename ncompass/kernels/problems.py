"""The size of one kernel call, once its arguments passed the support conditions.

Problems are plain values (no tensors), so the autotuner, the cache and the CLI can describe a
call without torch. ``bucket()`` is the shape part of the autotune cache key: sizes rounded up to
a power of two, so one tuning serves the nearby sizes that would pick the same tiles.
"""

from __future__ import annotations

from dataclasses import dataclass

DTYPES = ("float32", "float16", "bfloat16")
"""The dtypes every kernel supports (names as ``str(torch.float16)`` ends)."""

ACTIVATIONS = ("none", "relu", "gelu", "gelu_tanh", "silu")
"""Activations the GEMM epilogues fuse (``gelu`` is the exact, erf form: PyTorch's default)."""


def next_power_of_2(value: int) -> int:
    """The smallest power of two ``>= value`` (1 for ``value <= 1``)."""
    return 1 if value <= 1 else 1 << (value - 1).bit_length()


@dataclass(frozen=True)
class GemmProblem:
    """``out[m, n] = act(a[m, k] @ b[k, n] + bias[n])``: linear and matmul."""

    m: int
    n: int
    k: int
    dtype: str
    has_bias: bool = False
    activation: str = "none"

    def bucket(self) -> str:
        """The shape part of the tuning key."""
        return f"m{next_power_of_2(self.m)}-n{next_power_of_2(self.n)}-k{next_power_of_2(self.k)}"

    def flops(self) -> int:
        """Floating-point operations of the product (2 per multiply-add)."""
        return 2 * self.m * self.n * self.k


@dataclass(frozen=True)
class Conv2dProblem:
    """A 2-D convolution, NCHW, groups=1, dilation=1, seen as an implicit GEMM.

    The GEMM has one row per output pixel (``batch * out_h * out_w``), one column per output
    channel, and a reduction over ``in_channels * kernel_h * kernel_w``.
    """

    batch: int
    in_channels: int
    height: int
    width: int
    out_channels: int
    kernel_h: int
    kernel_w: int
    stride_h: int
    stride_w: int
    pad_h: int
    pad_w: int
    dtype: str
    has_bias: bool = False
    activation: str = "none"

    @property
    def out_h(self) -> int:
        """Output height."""
        return (self.height + 2 * self.pad_h - self.kernel_h) // self.stride_h + 1

    @property
    def out_w(self) -> int:
        """Output width."""
        return (self.width + 2 * self.pad_w - self.kernel_w) // self.stride_w + 1

    def gemm(self) -> GemmProblem:
        """The implicit GEMM this convolution computes."""
        return GemmProblem(
            m=self.batch * self.out_h * self.out_w,
            n=self.out_channels,
            k=self.in_channels * self.kernel_h * self.kernel_w,
            dtype=self.dtype,
            has_bias=self.has_bias,
            activation=self.activation,
        )

    def bucket(self) -> str:
        """GEMM sizes, plus the filter and stride, which change the gather pattern."""
        window = f"r{self.kernel_h}x{self.kernel_w}-s{self.stride_h}x{self.stride_w}"
        return f"{self.gemm().bucket()}-{window}"

    def flops(self) -> int:
        """Floating-point operations of the convolution."""
        return self.gemm().flops()


@dataclass(frozen=True)
class NormProblem:
    """LayerNorm or RMSNorm over the last ``cols`` elements of ``rows`` rows."""

    rows: int
    cols: int
    dtype: str
    rms: bool
    eps: float
    has_weight: bool = True
    has_bias: bool = True

    def bucket(self) -> str:
        """The shape part of the tuning key (RMSNorm and LayerNorm are tuned apart)."""
        kind = "rms" if self.rms else "ln"
        return f"{kind}-rows{next_power_of_2(self.rows)}-cols{next_power_of_2(self.cols)}"

    def bytes_moved(self, element_size: int) -> int:
        """Bytes read and written: the kernel is memory-bound, so this is its cost measure."""
        return 2 * self.rows * self.cols * element_size


@dataclass(frozen=True)
class AttentionProblem:
    """``softmax(q @ k.T * scale [+ causal mask]) @ v`` for ``batch x heads`` pairs of
    ``q_len`` queries and ``kv_len`` keys of ``head_dim`` elements."""

    batch: int
    heads: int
    q_len: int
    kv_len: int
    head_dim: int
    dtype: str
    causal: bool
    scale: float

    def bucket(self) -> str:
        """The shape part of the tuning key (the head size is kept exact: it sets the tiles)."""
        pairs = next_power_of_2(self.batch * self.heads)
        sizes = f"bh{pairs}-l{next_power_of_2(self.q_len)}-s{next_power_of_2(self.kv_len)}"
        return f"{sizes}-d{self.head_dim}{'-causal' if self.causal else ''}"

    def flops(self) -> int:
        """Floating-point operations of the two products (the causal mask skips about half)."""
        full = 4 * self.batch * self.heads * self.q_len * self.kv_len * self.head_dim
        return full // 2 if self.causal else full


__all__ = [
    "ACTIVATIONS",
    "DTYPES",
    "AttentionProblem",
    "Conv2dProblem",
    "GemmProblem",
    "NormProblem",
    "next_power_of_2",
]
