"""``ncompass.kernels.Conv2d`` / ``Linear`` / ``LayerNorm`` / ``RMSNorm``: drop-in ``torch.nn``
modules (same parameters and state dict) whose forward runs the kernels."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from ncompass.kernels import Conv2d, LayerNorm, Linear, RMSNorm, stats
from tests.kernels.checks import assert_matches_reference

pytestmark = pytest.mark.usefixtures("interpreter")


def _twin(ours: nn.Module, theirs: nn.Module) -> None:
    ours.load_state_dict(theirs.state_dict())
    assert isinstance(ours, type(theirs))
    assert ours.state_dict().keys() == theirs.state_dict().keys()


@pytest.mark.parametrize("padding_mode", ["zeros", "reflect", "circular"])
def test_conv2d_module_matches_nn_conv2d(padding_mode: str) -> None:
    torch.manual_seed(0)
    theirs = nn.Conv2d(3, 8, kernel_size=3, stride=2, padding=1, padding_mode=padding_mode)
    ours = Conv2d(3, 8, kernel_size=3, stride=2, padding=1, padding_mode=padding_mode)
    _twin(ours, theirs)
    x = torch.randn(2, 3, 9, 10)
    with torch.no_grad():
        assert_matches_reference(ours(x), theirs(x), "float32")
    assert stats()["conv2d"].kernel_calls == 1


def test_tracea_style_construction() -> None:
    # the seed's `TraceaConv2d(64, 128, kernel_size=3, padding=1)`, at a size the interpreter likes
    conv = Conv2d(4, 8, kernel_size=3, padding=1)
    with torch.no_grad():
        assert conv(torch.randn(1, 4, 6, 6)).shape == (1, 8, 6, 6)


def test_linear_module_with_a_fused_activation() -> None:
    torch.manual_seed(0)
    theirs = nn.Linear(24, 10)
    ours = Linear(24, 10, activation="gelu")
    _twin(ours, theirs)
    assert "activation=gelu" in repr(ours)
    assert repr(Linear(3, 4)) == repr(nn.Linear(3, 4))
    x = torch.randn(5, 24)
    with torch.no_grad():
        assert_matches_reference(ours(x), torch.nn.functional.gelu(theirs(x)), "float32")


def test_norm_modules_match_torch() -> None:
    torch.manual_seed(0)
    x = torch.randn(3, 7, 32) * 3 + 1
    for ours, theirs in (
        (LayerNorm(32), nn.LayerNorm(32)),
        (RMSNorm(32, eps=1e-6), nn.RMSNorm(32, eps=1e-6)),
    ):
        with torch.no_grad():
            theirs.weight.normal_()
            _twin(ours, theirs)
            assert_matches_reference(ours(x), theirs(x), "float32")
    assert stats()["layer_norm"].kernel_calls == 1 and stats()["rms_norm"].kernel_calls == 1


def test_training_falls_back_to_pytorch_and_learns() -> None:
    layer = Linear(4, 2)
    loss = layer(torch.randn(3, 4)).pow(2).sum()
    loss.backward()
    assert layer.weight.grad is not None
    assert stats()["linear"].kernel_calls == 0
