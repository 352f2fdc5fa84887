"""``ops.scaled_dot_product_attention``: the kernel for unmasked and causal attention, PyTorch
(with the reason counted) for everything else, and swapped in for ``F.scaled_dot_product_attention``
by a spec or the patch API."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from ncompass.kernels import ops, patched, stats
from tests.kernels.checks import assert_matches_reference, randn
from tests.support.modules import ModuleLab

pytestmark = pytest.mark.usefixtures("interpreter")

OP = "scaled_dot_product_attention"


def _qkv(*lead: int, q_len: int = 6, kv_len: int = 9, dim: int = 16) -> list[torch.Tensor]:
    return [
        randn(*lead, length, dim, dtype="float32", seed=seed)
        for seed, length in enumerate((q_len, kv_len, kv_len))
    ]


def test_causal_attention_runs_the_kernel_and_counts_it() -> None:
    q, k, v = _qkv(2, 3, q_len=11, kv_len=11)
    out = ops.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert_matches_reference(out, F.scaled_dot_product_attention(q, k, v, is_causal=True), "float32")  # fmt: skip
    assert stats()[OP].kernel_calls == 1 and stats()[OP].fallback_calls == 0


def test_three_dimensional_inputs_and_an_explicit_scale() -> None:
    q, k, v = _qkv(4)
    out = ops.scaled_dot_product_attention(q, k, v, scale=0.25)
    assert out.shape == (4, 6, 16)
    assert_matches_reference(out, F.scaled_dot_product_attention(q, k, v, scale=0.25), "float32")
    assert stats()[OP].kernel_calls == 1


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"attn_mask": True}, "attn_mask is given (only is_causal masks)"),
        ({"dropout_p": 0.5}, "dropout_p != 0"),
        ({"broadcast": True}, "batch or head sizes differ (broadcasting)"),
        ({"value_dim": 8}, "value's head size differs from the query's"),
        ({"dim": 512}, "head size above 256"),
        ({"dtype": torch.float64}, "dtype float64 (supported: float32, float16, bfloat16)"),
        (
            {"grad": True},
            "needs autograd: the kernels are forward-only (torch.no_grad() or inference_mode)",
        ),
    ],
)
def test_attention_outside_its_conditions_falls_back_with_the_reason(
    change: dict[str, object], reason: str
) -> None:
    torch.manual_seed(0)
    dtype = change.get("dtype", torch.float32)
    dim = int(change.get("dim", 16))  # type: ignore[call-overload]
    q = torch.randn(2, 2, 5, dim, dtype=dtype, requires_grad=bool(change.get("grad")))  # type: ignore[arg-type]
    k = torch.randn(1 if change.get("broadcast") else 2, 2, 7, dim, dtype=dtype)  # type: ignore[arg-type]
    v = torch.randn(k.shape[0], 2, 7, int(change.get("value_dim", dim)), dtype=dtype)  # type: ignore[call-overload, arg-type]
    mask = torch.ones(5, 7, dtype=torch.bool).tril() if change.get("attn_mask") else None
    kwargs = {"attn_mask": mask, "enable_gqa": bool(change.get("enable_gqa", False))}
    dropout = float(change.get("dropout_p", 0.0))  # type: ignore[arg-type]
    torch.manual_seed(1)
    out = ops.scaled_dot_product_attention(q, k, v, dropout_p=dropout, **kwargs)  # type: ignore[arg-type]
    torch.manual_seed(1)
    expected = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout, **kwargs)  # type: ignore[arg-type]
    assert torch.equal(out, expected)
    assert stats()[OP].fallbacks == {reason: 1} and stats()[OP].kernel_calls == 0


@pytest.mark.parametrize("kv_heads", [1, 2, 4])
def test_grouped_query_attention_runs_the_kernel_on_repeated_heads(kv_heads: int) -> None:
    # transformers 5 passes enable_gqa=True with fewer key/value heads than query heads
    q = randn(2, 4, 6, 16, dtype="float32", seed=0)
    k, v = (randn(2, kv_heads, 9, 16, dtype="float32", seed=seed) for seed in (1, 2))
    out = ops.scaled_dot_product_attention(q, k, v, is_causal=False, enable_gqa=True)
    expected = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    assert_matches_reference(out, expected, "float32")
    assert stats()[OP].kernel_calls == 1 and stats()[OP].fallback_calls == 0


def test_patched_functional_attention_runs_the_kernel() -> None:
    q, k, v = _qkv(1, 2)
    with patched(OP):
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert F.scaled_dot_product_attention is not ops.scaled_dot_product_attention
    assert_matches_reference(out, F.scaled_dot_product_attention(q, k, v, is_causal=True), "float32")  # fmt: skip
    assert stats()[OP].kernel_calls == 1


ATTENTION_MODULE = """
import torch
import torch.nn.functional as F


def attend(x, heads):
    batch, seq, dim = x.shape
    q, k, v = (x.view(batch, seq, heads, dim // heads).transpose(1, 2) for _ in range(3))
    out = F.scaled_dot_product_attention(q, k * 0.5, v, is_causal=True)
    return out.transpose(1, 2).reshape(batch, seq, dim)
"""


def test_a_spec_swaps_the_functional_call_in_a_module(lab: ModuleLab) -> None:
    lab.write("attention_user", ATTENTION_MODULE)
    x = randn(2, 13, 32, dtype="float32")
    expected = lab.load("attention_user").attend(x, 2)
    spec = {
        "targets": [
            {
                "module": "attention_user",
                "replace": [
                    {
                        "name": "torch.nn.functional.scaled_dot_product_attention",
                        "with": f"ncompass.kernels.ops:{OP}",
                    }
                ],
            }
        ]
    }
    swapped = lab.load("attention_user", spec)
    with torch.no_grad():
        out = swapped.attend(x, 2)
    assert_matches_reference(out, expected, "float32")
    assert stats()[OP].kernel_calls == 1
