"""The model: causal self-attention, an MLP, pre-norm residual blocks.

Nothing here knows about ncompass: the demo specs in ``configs/`` instrument it at import time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class TransformerConfig:
    """Sizes of the model."""

    vocab: int = 512
    dim: int = 128
    heads: int = 4
    layers: int = 4
    max_seq: int = 256


class Attention(nn.Module):
    """Causal multi-head self-attention written out step by step."""

    def __init__(self, config: TransformerConfig, layer_idx: int) -> None:
        super().__init__()
        self.layer_idx = layer_idx
        self.heads = config.heads
        self.head_dim = config.dim // config.heads
        self.qkv_proj = nn.Linear(config.dim, 3 * config.dim)
        self.out_proj = nn.Linear(config.dim, config.dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, dim = x.shape
        qkv = self.qkv_proj(x)
        q, k, v = qkv.split(dim, dim=-1)
        q = q.view(batch, seq, self.heads, self.head_dim).transpose(1, 2)
        k = k.view(batch, seq, self.heads, self.head_dim).transpose(1, 2)
        v = v.view(batch, seq, self.heads, self.head_dim).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        causal = torch.ones(seq, seq, dtype=torch.bool, device=x.device).triu(1)
        scores = scores.masked_fill(causal, float("-inf"))
        weights = scores.softmax(dim=-1)
        out = weights @ v
        out = out.transpose(1, 2).reshape(batch, seq, dim)
        return self.out_proj(out)


class MLP(nn.Module):
    """Two linear layers with a GELU between them."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.fc1 = nn.Linear(config.dim, 4 * config.dim)
        self.fc2 = nn.Linear(4 * config.dim, config.dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = self.fc1(x)
        hidden = F.gelu(hidden)
        return self.fc2(hidden)


class Block(nn.Module):
    """Pre-norm residual block: attention, then MLP."""

    def __init__(self, config: TransformerConfig, layer_idx: int) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(config.dim)
        self.attn = Attention(config, layer_idx)
        self.ln2 = nn.LayerNorm(config.dim)
        self.mlp = MLP(config)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        x = x + self.mlp(self.ln2(x))
        return x


class TinyTransformer(nn.Module):
    """Token and position embeddings, a stack of blocks, a language-model head."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.config = config
        self.tokens = nn.Embedding(config.vocab, config.dim)
        self.positions = nn.Embedding(config.max_seq, config.dim)
        self.blocks = nn.ModuleList(Block(config, i) for i in range(config.layers))
        self.norm = nn.LayerNorm(config.dim)
        self.head = nn.Linear(config.dim, config.vocab, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        seq = tokens.shape[1]
        positions = torch.arange(seq, device=tokens.device)
        x = self.tokens(tokens) + self.positions(positions)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def generate(model: TinyTransformer, prompt: torch.Tensor, new_tokens: int) -> torch.Tensor:
    """Greedy decoding without a cache (deliberately wasteful: there is something to find)."""
    tokens = prompt
    for _ in range(new_tokens):
        logits = model(tokens[:, -model.config.max_seq :])
        next_token = logits[:, -1].argmax(dim=-1, keepdim=True)
        tokens = torch.cat([tokens, next_token], dim=1)
    return tokens
