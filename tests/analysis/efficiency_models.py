"""Real models profiled on CPU with shapes and one marker per module, and FlopCounterMode's
per-module counts of the same forward pass: the reference the efficiency figures must meet."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import ProfilerActivity, profile, record_function
from torch.utils.flop_counter import FlopCounterMode


def _marked(model: torch.nn.Module) -> list[Any]:
    """A ``record_function`` range around every module's forward, named by its path."""
    handles = []
    for name, module in model.named_modules():
        label = name or type(model).__name__  # the root's marker: its class, as FlopCounterMode

        def enter(mod: Any, args: Any, label: str = label) -> None:
            mod._ncompass_range = record_function(label)
            mod._ncompass_range.__enter__()

        def leave(mod: Any, args: Any, out: Any) -> None:
            mod._ncompass_range.__exit__(None, None, None)

        handles += [module.register_forward_pre_hook(enter), module.register_forward_hook(leave)]
    return handles


def profile_model(
    model: torch.nn.Module, run: Callable[[], Any], trace: Path, *, backward: bool = False
) -> tuple[dict[str, float], float]:
    """Profile ``run`` with shapes into ``trace``; return FlopCounterMode's per-marker counts
    of a forward pass and its total (of forward and backward when ``backward``).

    FlopCounterMode counts the CPU attention kernels as 0, so its reference runs the math
    backend, whose two matrix products are exactly its attention formula.
    """
    handles = _marked(model)
    grad = torch.enable_grad() if backward else torch.no_grad()
    with grad, profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        out = run()
        if backward:
            out.sum().backward()
    prof.export_chrome_trace(str(trace))
    for handle in handles:
        handle.remove()
    top = type(model).__name__
    total = 0.0
    if backward:  # the run's total: forward and backward (modules would get both)
        with grad, sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
            run().sum().backward()
        total = float(counter.get_total_flops())
    with torch.no_grad(), sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        run()
    counts = counter.get_flop_counts()
    per_marker = {}
    for key, ops in counts.items():
        if key == top:
            per_marker[top] = float(sum(ops.values()))
        elif key.startswith(top + "."):
            per_marker[key[len(top) + 1 :]] = float(sum(ops.values()))
    return per_marker, total or float(counter.get_total_flops())


def gpt2(attn: str) -> tuple[torch.nn.Module, Callable[[], Any]]:
    """A tiny random GPT-2 (eager or sdpa attention) and its forward on a batch of tokens."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(
        n_layer=2, n_embd=64, n_head=4, vocab_size=256, n_positions=64, attn_implementation=attn
    )
    model = GPT2LMHeadModel(config).eval()
    ids = torch.randint(0, 256, (2, 32))
    return model, lambda: model(ids).logits


def llama() -> tuple[torch.nn.Module, Callable[[], Any]]:
    """A tiny random Llama (grouped-query attention, sdpa) and its forward."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=256,
        max_position_embeddings=64,
        attn_implementation="sdpa",
    )
    model = LlamaForCausalLM(config).eval()
    ids = torch.randint(0, 256, (2, 32))
    return model, lambda: model(ids).logits


class ConvNet(torch.nn.Module):
    """Convolutions with stride, padding, groups and dilation, then a linear head."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 16, 3, stride=2, padding=1)
        self.grouped = torch.nn.Conv2d(16, 32, 3, padding=2, dilation=2, groups=4)
        self.same = torch.nn.Conv2d(32, 32, 5, padding="same")
        self.pool = torch.nn.AdaptiveAvgPool2d(1)
        self.head = torch.nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.stem(x))
        x = torch.relu(self.grouped(x))
        x = torch.relu(self.same(x))
        return self.head(self.pool(x).flatten(1))


def conv_net() -> tuple[torch.nn.Module, Callable[[], Any]]:
    """The conv net and its forward on a small batch of images."""
    torch.manual_seed(0)
    model = ConvNet()
    images = torch.randn(4, 3, 32, 32)
    return model, lambda: model(images)
