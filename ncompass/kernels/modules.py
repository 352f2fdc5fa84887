"""``torch.nn`` modules whose forward runs the kernels (the seed's ``TraceaConv2d`` and kin).

Each subclasses the ``torch.nn`` module it stands for, so parameters, ``state_dict`` keys,
``isinstance`` checks and ``repr`` stay the same; only ``forward`` changes. A spec swaps them in
with ``replace: [{name: torch.nn.Conv2d, with: "ncompass.kernels:Conv2d"}]``.
"""

from __future__ import annotations

from typing import Any

import torch.nn.functional as F
from torch import nn

from ncompass.kernels import ops
from ncompass.kernels.conditions import check_activation


class Conv2d(nn.Conv2d):  # type: ignore[misc]  # torch is untyped for mypy here
    """``nn.Conv2d`` on the implicit-GEMM kernel (PyTorch where the kernel does not apply)."""

    def _conv_forward(self, input: Any, weight: Any, bias: Any | None) -> Any:
        padding: Any = self.padding
        if self.padding_mode != "zeros":
            # as nn.Conv2d does: pad explicitly, then convolve without padding
            input = F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            padding = 0
        return ops.conv2d(input, weight, bias, self.stride, padding, self.dilation, self.groups)


class Linear(nn.Linear):  # type: ignore[misc]  # torch is untyped for mypy here
    """``nn.Linear`` on the GEMM kernel, with an optional fused activation.

    Args:
        in_features: Size of each input sample.
        out_features: Size of each output sample.
        bias: Learn an additive bias.
        device: Where the parameters live.
        dtype: Their dtype.
        activation: Fused after the bias: ``relu``, ``gelu``, ``gelu_tanh``, ``silu`` or None.
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
        *,
        activation: str | None = None,
    ) -> None:
        super().__init__(in_features, out_features, bias, device, dtype)
        self.activation = check_activation(activation)

    def forward(self, input: Any) -> Any:
        """``activation(input @ weight.T + bias)``."""
        return ops.linear(input, self.weight, self.bias, activation=self.activation)

    def extra_repr(self) -> str:
        base = str(super().extra_repr())
        return base if self.activation == "none" else f"{base}, activation={self.activation}"


class LayerNorm(nn.LayerNorm):  # type: ignore[misc]  # torch is untyped for mypy here
    """``nn.LayerNorm`` on the fused row-normalisation kernel."""

    def forward(self, input: Any) -> Any:
        """Normalise over ``normalized_shape``."""
        return ops.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)


class RMSNorm(nn.RMSNorm):  # type: ignore[misc]  # torch is untyped for mypy here
    """``nn.RMSNorm`` on the fused row-normalisation kernel."""

    def forward(self, x: Any) -> Any:
        """Normalise over ``normalized_shape``."""
        return ops.rms_norm(x, self.normalized_shape, self.weight, self.eps)


__all__ = ["Conv2d", "LayerNorm", "Linear", "RMSNorm"]
