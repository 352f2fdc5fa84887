"""What the kernels package offers: its ops, their conditions, and the kernels behind them.

Readable without torch or triton (``ncompass kernels list`` uses it).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ncompass.kernels.errors import KernelError

COMMON_CONDITIONS = (
    "float32, float16 or bfloat16, the same for every tensor",
    "tensors that span fewer than 2**31 elements (the kernels index with int32)",
    "no autograd: forward only (torch.no_grad() or inference_mode)",
    "a CUDA device, or CPU tensors with TRITON_INTERPRET=1 (Triton's interpreter)",
)


@dataclass(frozen=True)
class KernelOp:
    """One public op of ``ncompass.kernels.ops``.

    Attributes:
        name: The op (``conv2d``, ``linear``, ...).
        kernel: The Triton kernel it runs (ops may share one: ``linear`` and ``matmul``).
        summary: One line on what it computes.
        reference: The PyTorch function it replaces and falls back to.
        conditions: What a call needs to run the kernel (besides ``COMMON_CONDITIONS``).
    """

    name: str
    kernel: str
    summary: str
    reference: str
    conditions: tuple[str, ...]


OPS: dict[str, KernelOp] = {
    op.name: op
    for op in (
        KernelOp(
            "conv2d",
            "conv2d",
            "2-D convolution as an implicit GEMM (NCHW), optional bias and fused activation",
            "torch.nn.functional.conv2d",
            (
                "4-D NCHW input and (K, C, R, S) weight, both contiguous (not channels_last)",
                "groups=1, dilation=1",
                "stride and padding: ints or pairs; padding 'valid', or 'same' with an odd "
                "kernel and stride 1",
            ),
        ),
        KernelOp(
            "linear",
            "gemm",
            "x @ weight.T + bias with an optional fused activation",
            "torch.nn.functional.linear",
            ("input (..., K), weight (N, K), bias (N,); any strides (transposes are free)",),
        ),
        KernelOp(
            "matmul",
            "gemm",
            "a @ b for 2-D operands with an optional fused activation",
            "torch.matmul",
            ("2-D operands (M, K) and (K, N), any strides",),
        ),
        KernelOp(
            "layer_norm",
            "norm",
            "LayerNorm over the trailing dimensions, one pass, float32 statistics",
            "torch.nn.functional.layer_norm",
            (
                "contiguous input, normalised rows of at most 65536 bytes",
                "weight and bias of the normalized shape",
            ),
        ),
        KernelOp(
            "rms_norm",
            "norm",
            "RMSNorm over the trailing dimensions, one pass, float32 statistics",
            "torch.nn.functional.rms_norm",
            (
                "contiguous input, normalised rows of at most 65536 bytes",
                "weight of the normalized shape",
            ),
        ),
        KernelOp(
            "scaled_dot_product_attention",
            "attention",
            "softmax(q @ k.T * scale) @ v in one pass (online softmax), optionally causal",
            "torch.nn.functional.scaled_dot_product_attention",
            (
                "q (batch, heads, L, E) or (batch, L, E); k, v (..., S, E) with the same "
                "leading sizes; any strides",
                "head size E at most 256; no attn_mask (is_causal is fine), dropout_p=0, "
                "enable_gqa=False",
            ),
        ),
    )
}

KERNEL_MODULES: dict[str, str] = {
    "gemm": "ncompass.kernels.jit.gemm",
    "conv2d": "ncompass.kernels.jit.conv2d",
    "norm": "ncompass.kernels.jit.norm",
    "attention": "ncompass.kernels.jit.attention",
}

# Device functions and launch choices every kernel uses: part of every kernel's source hash.
_SHARED_MODULES = ("ncompass.kernels.jit._common", "ncompass.kernels.jit._launch")


def op_named(name: str) -> KernelOp:
    """The op called ``name``.

    Raises:
        KernelError: no such op (the message lists the ops).
    """
    op = OPS.get(name)
    if op is None:
        raise KernelError(f"no kernel op {name!r}; choose one of {', '.join(OPS)}")
    return op


@cache
def kernel_source_hash(kernel: str) -> str:
    """A hash of the source files ``kernel`` is built from (16 hex digits).

    Read from the files, not the imported modules, so it is known without importing triton.
    """
    digest = hashlib.sha256()
    for module in (KERNEL_MODULES[kernel], *_SHARED_MODULES):
        spec = importlib.util.find_spec(module)
        assert spec is not None and spec.origin is not None, module
        digest.update(Path(spec.origin).read_bytes())
    return digest.hexdigest()[:16]


def triton_version() -> str | None:
    """The installed Triton's version, or None (asked of the package metadata, not imported)."""
    try:
        return importlib.metadata.version("triton")
    except importlib.metadata.PackageNotFoundError:
        return None


__all__ = [
    "COMMON_CONDITIONS",
    "KERNEL_MODULES",
    "OPS",
    "KernelOp",
    "kernel_source_hash",
    "op_named",
    "triton_version",
]
