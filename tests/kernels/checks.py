"""Comparing kernel outputs with their PyTorch references, at the documented tolerances."""

from __future__ import annotations

from typing import Any

import torch

from ncompass.kernels.tolerances import TOLERANCES

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def assert_matches_reference(out: Any, reference: Any, dtype: str) -> None:
    """``out`` (in ``dtype``) equals the float32 ``reference`` within the dtype's tolerance."""
    rtol, atol = TOLERANCES[dtype]
    assert out.dtype == DTYPES[dtype]
    torch.testing.assert_close(out.float(), reference.float(), rtol=rtol, atol=atol)


def randn(*size: int, dtype: str, scale: float = 1.0, seed: int = 0) -> Any:
    """Reproducible normal values, scaled, rounded to ``dtype``."""
    generator = torch.Generator().manual_seed(seed)
    return (torch.randn(*size, generator=generator) * scale).to(DTYPES[dtype])
