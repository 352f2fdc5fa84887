"""How close a kernel's output must be to its PyTorch reference, per dtype.

Outputs are compared as ``|out - ref| <= atol + rtol * |ref|`` (``torch.testing.assert_close``),
where ``ref`` is the reference computed in float32 from the same (already rounded) inputs, and
inputs are scaled so outputs are of order one. The kernels accumulate in float32 in another
order than PyTorch, then round once to the output dtype: the bounds are a few units in the last
place of each dtype (float16 has 11 significant bits, bfloat16 8), with margin.
"""

from __future__ import annotations

TOLERANCES: dict[str, tuple[float, float]] = {
    "float32": (1e-4, 1e-4),
    "float16": (1e-2, 1e-2),
    "bfloat16": (3e-2, 3e-2),
}
"""dtype name -> (rtol, atol)."""

__all__ = ["TOLERANCES"]
