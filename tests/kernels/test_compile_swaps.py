"""Kernel swaps under ``torch.compile``: the swap specs' ops compile with ``fullgraph=True``
(zero graph breaks), give the eager results, and really run the Triton kernels (in the
interpreter), counted by ``ncompass.kernels.stats()`` from inside the compiled graph."""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import pytest
import torch
from torch._dynamo.utils import counters

from ncompass.importer.hook import disable_rewrites, enable_rewrites
from ncompass.importer.targets import unmet_requirement
from ncompass.kernels import Linear, OpStats, custom_ops, ops, reset_stats, stats
from ncompass.kernels.autotune.tuner import reset_autotuner
from ncompass.spec.merge import merge_specs
from ncompass.spec.models import RewriteConfig
from tests.kernels.checks import assert_matches_reference
from tests.kernels.conftest import HAS_TRITON, REPO

pytestmark = pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")


@dataclass
class CompiledRun:
    """One callable run eagerly, then compiled: outputs, counts, and what Dynamo saw."""

    eager: Any
    compiled: Any
    eager_stats: dict[str, OpStats]
    compiled_stats: dict[str, OpStats]
    graph_breaks: int
    graphs: int
    profiled: set[str]


@pytest.fixture(scope="module")
def interpreted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[pytest.MonkeyPatch]:
    """Triton's interpreter, a private autotune cache and no tuning, for the whole module."""
    pytest.importorskip("numpy", reason="Triton's interpreter needs numpy")
    for name in ("gemm", "conv2d", "norm", "attention"):
        module = sys.modules.get(f"ncompass.kernels.jit.{name}")
        assert module is None or module.INTERPRETED, "kernels were loaded outside the interpreter"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TRITON_INTERPRET", "1")
        patch.setenv("NCOMPASS_AUTOTUNE", "0")
        patch.setenv("NCOMPASS_AUTOTUNE_DIR", str(tmp_path_factory.mktemp("autotune")))
        reset_autotuner()
        yield patch
        reset_autotuner()


def _eager_then_compiled(
    call: Callable[[Any], Any], inputs: list[Any], **compile_options: Any
) -> CompiledRun:
    """Run ``call`` on each input eagerly, then compiled, counting kernel calls and graphs."""
    with torch.no_grad():
        reset_stats()
        eager = [call(x) for x in inputs]
        eager_stats = stats()
        torch._dynamo.reset()
        counters.clear()
        reset_stats()
        compiled_call = torch.compile(call, **compile_options)
        compiled = [compiled_call(x) for x in inputs]
        compiled_stats = stats()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
            compiled_call(inputs[0])
    profiled = {event.name for event in profile.events()}
    breaks = sum(counters["graph_break"].values())
    graphs = counters["stats"]["unique_graphs"]
    torch._dynamo.reset()
    return CompiledRun(eager, compiled, eager_stats, compiled_stats, breaks, graphs, profiled)


@contextlib.contextmanager
def imported_under(name: str, spec: RewriteConfig) -> Iterator[ModuleType]:
    """``name`` imported afresh under ``spec``; the module imported before is put back after.

    Rewrites stay enabled inside: disabling them restores the module's original code.
    """
    parent, _, child = name.rpartition(".")
    before = sys.modules.pop(name, None)
    enable_rewrites(spec)
    try:
        yield importlib.import_module(name)
    finally:
        disable_rewrites()
        sys.modules.pop(name, None)
        if before is not None:
            sys.modules[name] = before
            if parent in sys.modules:
                setattr(sys.modules[parent], child, before)


def _spec(*names: str) -> RewriteConfig:
    return merge_specs([RewriteConfig.from_yaml(REPO / "configs" / name) for name in names])


# -- the demo model, swap_linear.yaml + swap_layernorm.yaml, compiled whole -------------------


@pytest.fixture(scope="module")
def demo(interpreted: pytest.MonkeyPatch) -> CompiledRun:
    """The demo model with every nn.Linear and nn.LayerNorm swapped, eager then compiled."""
    interpreted.syspath_prepend(str(REPO / "examples"))
    sys.modules.pop("tinyformer.model", None)
    with imported_under("tinyformer.model", _spec("swap_linear.yaml", "swap_layernorm.yaml")) as m:
        torch.manual_seed(0)
        model = m.TinyTransformer(m.TransformerConfig(layers=1, dim=32, heads=2)).eval()
        assert type(model.blocks[0].mlp.fc1) is Linear
        tokens = torch.randint(0, 512, (2, 9), generator=torch.Generator().manual_seed(1))
        return _eager_then_compiled(model, [tokens], fullgraph=True)


def test_swapped_demo_model_compiles_whole_without_graph_breaks(demo: CompiledRun) -> None:
    assert demo.graph_breaks == 0
    assert demo.graphs == 1


def test_compiled_swapped_demo_model_gives_the_eager_logits(demo: CompiledRun) -> None:
    assert_matches_reference(demo.compiled[0], demo.eager[0], "float32")


def test_compiled_swapped_demo_model_runs_the_kernels_not_the_fallback(demo: CompiledRun) -> None:
    # qkv, out, fc1, fc2, head; ln1, ln2, the final norm: every call, from the compiled graph
    assert demo.compiled_stats == demo.eager_stats
    assert demo.compiled_stats["linear"] == OpStats(kernel_calls=5)
    assert demo.compiled_stats["layer_norm"] == OpStats(kernel_calls=3)


def test_compiled_swapped_calls_show_their_kernel_range_in_a_profile(demo: CompiledRun) -> None:
    assert {"ncompass.kernels.linear[triton]", "ncompass.kernels.layer_norm[triton]"} <= (
        demo.profiled
    )
    assert any(name.startswith("Torch-Compiled Region") for name in demo.profiled)


# -- swap_attention.yaml: transformers' sdpa attention, compiled with dynamic=True ------------


class _GroupedAttention(torch.nn.Module):
    """What transformers' attention function reads off the calling module."""

    num_key_value_groups = 2


@pytest.fixture(scope="module")
def attention(interpreted: pytest.MonkeyPatch) -> CompiledRun:
    """transformers' sdpa attention under the swap, eager then compiled for two lengths."""
    spec = _spec("swap_attention.yaml")
    reason = unmet_requirement(spec.targets[0].requires)
    if reason:
        pytest.skip(reason)
    module = _GroupedAttention()
    generator = torch.Generator().manual_seed(2)
    inputs = [
        (
            torch.randn(1, 4, length, 8, generator=generator),
            torch.randn(1, 2, length, 8, generator=generator),
            torch.randn(1, 2, length, 8, generator=generator),
        )
        for length in (5, 11)
    ]
    with imported_under("transformers.integrations.sdpa_attention", spec) as swapped:

        def attend(qkv: tuple[Any, Any, Any]) -> Any:
            return swapped.sdpa_attention_forward(module, *qkv, attention_mask=None)[0]

        return _eager_then_compiled(attend, inputs, fullgraph=True, dynamic=True)


def test_swapped_attention_compiles_once_for_every_length(attention: CompiledRun) -> None:
    assert attention.graph_breaks == 0
    assert attention.graphs == 1  # dynamic=True: both lengths run the same graph


def test_compiled_swapped_attention_matches_pytorch_on_the_kernel(attention: CompiledRun) -> None:
    for compiled, eager in zip(attention.compiled, attention.eager, strict=True):
        assert_matches_reference(compiled, eager, "float32")
    assert attention.compiled_stats["scaled_dot_product_attention"] == OpStats(kernel_calls=2)
    assert attention.eager_stats == attention.compiled_stats


# -- the custom ops themselves ----------------------------------------------------------------


@pytest.mark.usefixtures("interpreted")
def test_conv2d_and_matmul_compile_with_their_argument_forms() -> None:
    def convolve(xs: tuple[Any, ...]) -> tuple[Any, ...]:
        x, w, grouped, b = xs
        return (
            ops.conv2d(x, w, None, 1, "same", activation="silu"),
            ops.conv2d(x, w, None, (2, 2), [1]),
            ops.conv2d(x, grouped, None, 1, 1, 1, groups=3),  # falls back: groups != 1
            ops.matmul(x.flatten(1)[:, :12], b, activation="relu"),
        )

    generator = torch.Generator().manual_seed(3)
    x, b = torch.randn(2, 3, 6, 6, generator=generator), torch.randn(12, 5, generator=generator)
    w, grouped = torch.randn(4, 3, 3, 3, generator=generator), torch.randn(3, 1, 3, 3)
    run = _eager_then_compiled(convolve, [(x, w * 0.3, grouped, b)], fullgraph=True)
    assert run.graph_breaks == 0
    for compiled, eager in zip(run.compiled[0], run.eager[0], strict=True):
        assert_matches_reference(compiled, eager, "float32")
    assert run.compiled_stats == run.eager_stats
    assert run.compiled_stats["conv2d"] == OpStats(kernel_calls=2, fallbacks={"groups != 1": 1})


def test_a_call_needing_autograd_compiles_as_pytorch_and_trains() -> None:
    torch.manual_seed(0)
    swapped = Linear(8, 4)
    plain = torch.nn.Linear(8, 4)
    plain.load_state_dict(swapped.state_dict())
    x = torch.randn(3, 8)
    torch._dynamo.reset()
    loss = torch.compile(swapped, fullgraph=True)(x).square().sum()
    loss.backward()
    plain(x).square().sum().backward()
    torch._dynamo.reset()
    torch.testing.assert_close(swapped.weight.grad, plain.weight.grad)
    assert stats() == {}  # traced as PyTorch's op: no kernel call, no counted fallback


def test_defining_the_custom_ops_again_reuses_them() -> None:
    again = custom_ops.define({name: print for name in vars(ops.CUSTOM_OPS)})
    assert again == ops.CUSTOM_OPS
    assert torch.ops.ncompass.linear.default._schema.name == "ncompass::linear"
