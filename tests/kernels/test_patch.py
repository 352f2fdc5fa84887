"""The seed's patch API under ncompass names: ``patch_conv2d()`` sends every ``F.conv2d`` (so
every ``nn.Conv2d``, old or new) through the kernel; ``unpatch_conv2d()`` restores PyTorch's."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from ncompass.kernels import (
    KernelError,
    ops,
    patch,
    patch_conv2d,
    patch_linear,
    patched,
    stats,
    unpatch,
    unpatch_conv2d,
    unpatch_linear,
)
from ncompass.kernels.patching import patched_names
from tests.kernels.checks import assert_matches_reference

pytestmark = pytest.mark.usefixtures("interpreter")

ORIGINAL_CONV2D = F.conv2d
ORIGINAL_LINEAR = F.linear


def test_patch_conv2d_reaches_modules_built_before_it() -> None:
    conv = nn.Conv2d(3, 4, 3, padding=1)
    x = torch.randn(1, 3, 6, 6)
    with torch.no_grad():
        expected = conv(x)
        patch_conv2d()
        assert F.conv2d is ops.conv2d
        assert_matches_reference(conv(x), expected, "float32")
        unpatch_conv2d()
        assert F.conv2d is ORIGINAL_CONV2D
        conv(x)
    assert stats()["conv2d"].kernel_calls == 1


def test_fallback_inside_a_patch_calls_the_original_not_itself() -> None:
    patch_conv2d()
    x, w = (
        torch.randn(1, 4, 5, 5, dtype=torch.float64),
        torch.randn(4, 2, 3, 3, dtype=torch.float64),
    )
    out = F.conv2d(x, w, groups=2)  # two reasons to fall back; must not recurse
    assert torch.equal(out, ORIGINAL_CONV2D(x, w, groups=2))
    assert stats()["conv2d"].fallback_calls == 1


def test_patch_linear_and_unpatch_everything() -> None:
    patch_linear()
    patch("layer_norm")
    assert patched_names() == ["layer_norm", "linear"]
    with torch.no_grad():
        nn.Linear(8, 3)(torch.randn(2, 8))
    assert stats()["linear"].kernel_calls == 1
    unpatch()
    assert patched_names() == [] and F.linear is ORIGINAL_LINEAR
    unpatch_linear()  # harmless when not patched


def test_patched_block_restores_only_what_it_patched() -> None:
    patch_linear()
    with patched("linear", "conv2d"):
        assert F.conv2d is ops.conv2d and F.linear is ops.linear
    assert F.conv2d is ORIGINAL_CONV2D
    assert F.linear is ops.linear  # patched before the block: still patched
    unpatch_linear()


def test_unknown_name_is_a_user_error() -> None:
    with pytest.raises(
        KernelError,
        match="cannot patch gelu; patchable: conv2d, linear, layer_norm, rms_norm, scaled_dot_",
    ):
        patch("gelu")
