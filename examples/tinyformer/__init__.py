"""A tiny decoder-only transformer used by the ncompass demo and tests (runs in seconds on CPU)."""

from tinyformer.model import Attention, Block, TinyTransformer, TransformerConfig

__all__ = ["Attention", "Block", "TinyTransformer", "TransformerConfig"]
