"""The ``@triton.jit`` kernels and their launchers, one module per kernel.

Importing any of these imports triton; the rest of ``ncompass.kernels`` imports them only when a
kernel is about to run. Importing this package alone imports nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ncompass._lazy import lazy_exports

if TYPE_CHECKING:
    from ncompass.kernels.jit import attention, conv2d, gemm, norm

# kernel module name -> module (each imports triton)
_LAZY: dict[str, str] = {
    "attention": "ncompass.kernels.jit.attention",
    "conv2d": "ncompass.kernels.jit.conv2d",
    "gemm": "ncompass.kernels.jit.gemm",
    "norm": "ncompass.kernels.jit.norm",
}

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())

__all__ = [
    "attention",
    "conv2d",
    "gemm",
    "norm",
]
