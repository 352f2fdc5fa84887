"""A small residual MLP for ``docs/compile.md``: every kind of marker, compiled whole.

``spec.yaml`` marks a function (with a templated name), a nested function, a call, a call in an
``if`` header and a line range; ``run.py`` compiles the model with ``torch.compile``.
"""

from __future__ import annotations

import torch
from torch import nn


def gated(x: torch.Tensor) -> torch.Tensor:
    """A sigmoid-gated activation, through a nested helper."""

    def gate(t: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(t) * 0.5

    return x * gate(x)


class Block(nn.Module):
    """Norm, up-projection, gated activation, down-projection, residual."""

    def __init__(self, width: int, index: int) -> None:
        super().__init__()
        self.index = index
        self.norm = nn.LayerNorm(width)
        self.up = nn.Linear(width, 2 * width)
        self.down = nn.Linear(2 * width, width)

    def uses_residual(self, x: torch.Tensor) -> bool:
        return self.index >= 0 and x.dim() == 2

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm(x)
        h = self.up(h)
        h = gated(h)
        h = self.down(h)
        if self.uses_residual(x):
            h = h + x
        return h


class CompiledMLP(nn.Module):
    """A stack of :class:`Block`."""

    def __init__(self, width: int = 32, depth: int = 2) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block(width, index) for index in range(depth))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return x
