"""Launch-time choices shared by the kernel modules."""

from __future__ import annotations

from typing import Any, Literal


def is_interpreted(kernel: Any) -> bool:
    """Whether ``@triton.jit`` made ``kernel`` for Triton's interpreter.

    Triton decides at decoration time (``TRITON_INTERPRET`` when the kernel module was
    imported), so the kernel object is the truth, not the environment now.
    """
    return type(kernel).__name__ == "InterpretedFunction"


def upcast_operands(dtype: str, interpreted: bool) -> bool:
    """Whether ``tl.dot`` operands must be float32 (bfloat16 in the interpreter)."""
    return interpreted and dtype == "bfloat16"


def input_precision(dtype: str, interpreted: bool, family: Literal["matmul", "conv"]) -> str:
    """``tl.dot``'s precision for float32 operands, following PyTorch's own TF32 switches.

    PyTorch uses TF32 for float32 matmuls only when ``torch.backends.cuda.matmul.allow_tf32``
    is set (off by default) and for convolutions when ``torch.backends.cudnn.allow_tf32`` is
    (on by default); doing the same keeps a swap from silently changing precision.
    """
    if dtype != "float32" or interpreted:
        return "ieee"
    import torch

    allowed = (
        torch.backends.cuda.matmul.allow_tf32
        if family == "matmul"
        else torch.backends.cudnn.allow_tf32
    )
    return "tf32" if allowed else "ieee"


__all__ = ["input_precision", "is_interpreted", "upcast_operands"]
