"""Triton kernels that stand in for PyTorch ops, with an autotuner and PyTorch fallbacks.

Ops (:mod:`ncompass.kernels.ops`): ``conv2d``, ``linear``, ``matmul``, ``layer_norm``,
``rms_norm``, ``scaled_dot_product_attention``, each with the signature of its PyTorch
counterpart. A call runs the Triton kernel when its support conditions hold (dtype, layout,
no autograd, a CUDA device or ``TRITON_INTERPRET=1``) and PyTorch otherwise; :func:`stats`
counts which, and why.

Swapping them into code you do not own:

- a spec: ``replace: [{name: torch.nn.Linear, with: "ncompass.kernels:Linear"}]``;
- the patch API: :func:`patch_conv2d` / :func:`unpatch_conv2d` (and ``linear``, ...);
- the modules :class:`Conv2d`, :class:`Linear`, :class:`LayerNorm`, :class:`RMSNorm`.

Importing this package imports neither torch nor triton; the names below load on first use.
The patch API lives in ``ncompass.kernels.patching``: a submodule named ``patch`` would shadow
the :func:`patch` function as soon as it was imported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ncompass._lazy import lazy_exports
from ncompass.kernels.errors import KernelError
from ncompass.kernels.stats import OpStats, reset_stats, stats

if TYPE_CHECKING:
    from ncompass.kernels import ops
    from ncompass.kernels.modules import Conv2d, LayerNorm, Linear, RMSNorm
    from ncompass.kernels.patching import (
        patch,
        patch_conv2d,
        patch_linear,
        patched,
        unpatch,
        unpatch_conv2d,
        unpatch_linear,
    )

# public name -> module that defines it
_LAZY: dict[str, str] = {
    "ops": "ncompass.kernels.ops",
    "Conv2d": "ncompass.kernels.modules",
    "LayerNorm": "ncompass.kernels.modules",
    "Linear": "ncompass.kernels.modules",
    "RMSNorm": "ncompass.kernels.modules",
    "patch": "ncompass.kernels.patching",
    "patch_conv2d": "ncompass.kernels.patching",
    "patch_linear": "ncompass.kernels.patching",
    "patched": "ncompass.kernels.patching",
    "unpatch": "ncompass.kernels.patching",
    "unpatch_conv2d": "ncompass.kernels.patching",
    "unpatch_linear": "ncompass.kernels.patching",
}


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())


__all__ = [
    "Conv2d",
    "KernelError",
    "LayerNorm",
    "Linear",
    "OpStats",
    "RMSNorm",
    "ops",
    "patch",
    "patch_conv2d",
    "patch_linear",
    "patched",
    "reset_stats",
    "stats",
    "unpatch",
    "unpatch_conv2d",
    "unpatch_linear",
]
