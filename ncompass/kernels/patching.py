"""Patch ``torch.nn.functional`` so that existing code runs the kernels (the seed's patch API).

``patch_conv2d()`` replaces ``torch.nn.functional.conv2d`` by :func:`ncompass.kernels.ops.conv2d`.
Every ``nn.Conv2d`` (built before or after) calls ``F.conv2d`` through the module, so all of them
take the kernel, with the usual fallback; ``unpatch_conv2d()`` restores PyTorch's function.
Code that bound the function earlier (``from torch.nn.functional import conv2d``) or calls
``torch.conv2d`` directly is not affected: swap those with a spec's ``replace:`` instead.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import torch.nn.functional as F

# importing ops imports ncompass.kernels.reference, which binds PyTorch's functions before
# anything here can replace them: fallbacks never call back into a patched op
from ncompass.kernels import ops
from ncompass.kernels.errors import KernelError

PATCHABLE: dict[str, Any] = {
    "conv2d": ops.conv2d,
    "linear": ops.linear,
    "layer_norm": ops.layer_norm,
    "rms_norm": ops.rms_norm,
    "scaled_dot_product_attention": ops.scaled_dot_product_attention,
}
"""``torch.nn.functional`` attribute -> the op that replaces it."""

_originals: dict[str, Any] = {}
_lock = threading.Lock()


def patch(*names: str) -> None:
    """Replace ``torch.nn.functional.<name>`` by the kernel op (all of them when none given).

    Patching twice is harmless.

    Raises:
        KernelError: a name that cannot be patched.
    """
    with _lock:
        for name in _names(names):
            if name not in _originals:
                _originals[name] = getattr(F, name)
                setattr(F, name, PATCHABLE[name])


def unpatch(*names: str) -> None:
    """Restore PyTorch's functions (all patched ones when none given)."""
    with _lock:
        for name in _names(names) if names else list(_originals):
            original = _originals.pop(name, None)
            if original is not None:
                setattr(F, name, original)


def patched_names() -> list[str]:
    """The ``torch.nn.functional`` names currently patched."""
    with _lock:
        return sorted(_originals)


@contextlib.contextmanager
def patched(*names: str) -> Iterator[None]:
    """Patch for the duration of a ``with`` block, then restore what this block patched."""
    with _lock:
        fresh = [name for name in _names(names) if name not in _originals]
    patch(*fresh)
    try:
        yield
    finally:
        if fresh:
            unpatch(*fresh)


def patch_conv2d() -> None:
    """Every ``F.conv2d`` call (so every ``nn.Conv2d``) runs the conv2d kernel."""
    patch("conv2d")


def unpatch_conv2d() -> None:
    """Restore PyTorch's ``F.conv2d``."""
    unpatch("conv2d")


def patch_linear() -> None:
    """Every ``F.linear`` call (so every ``nn.Linear``) runs the GEMM kernel."""
    patch("linear")


def unpatch_linear() -> None:
    """Restore PyTorch's ``F.linear``."""
    unpatch("linear")


def _names(names: tuple[str, ...]) -> list[str]:
    unknown = [name for name in names if name not in PATCHABLE]
    if unknown:
        raise KernelError(f"cannot patch {', '.join(unknown)}; patchable: {', '.join(PATCHABLE)}")
    return list(names) if names else list(PATCHABLE)


__all__ = [
    "PATCHABLE",
    "patch",
    "patch_conv2d",
    "patch_linear",
    "patched",
    "patched_names",
    "unpatch",
    "unpatch_conv2d",
    "unpatch_linear",
]
