"""The public surface of ``ncompass.kernels``, pinned."""

from __future__ import annotations

import ncompass.kernels
from tests.kernels.conftest import run_python

PUBLIC = [
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


def test_public_names_are_pinned_and_resolve() -> None:
    assert sorted(ncompass.kernels.__all__) == PUBLIC
    for name in PUBLIC:
        assert getattr(ncompass.kernels, name) is not None
    assert set(PUBLIC) <= set(dir(ncompass.kernels))


def test_kernel_errors_are_ncompass_errors() -> None:
    assert issubclass(ncompass.kernels.KernelError, ncompass.NcompassError)


def test_patch_is_the_function_whatever_was_imported_before() -> None:
    code = (
        "import ncompass.kernels.patching\n"
        "from ncompass.kernels import patched\n"
        "from ncompass.kernels import patch\n"
        "print(callable(patch) and patch.__module__)"
    )
    assert run_python(code, {}).stdout.strip() == "ncompass.kernels.patching"
