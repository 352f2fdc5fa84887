"""Where the Triton kernels can run: a CUDA device, or Triton's interpreter on the CPU.

Nothing here imports triton: whether it is installed is asked of the import system, and the
interpreter switch is read from the environment the way Triton reads it.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterable
from functools import cache
from typing import Any

from ncompass import environment_variables

_TRUE = {"1", "true", "on", "yes", "y"}


def interpreter_requested() -> bool:
    """Whether ``TRITON_INTERPRET`` asks Triton to interpret kernels (as Triton parses it)."""
    return os.environ.get(environment_variables.TRITON_INTERPRET, "").strip().lower() in _TRUE


@cache
def _installed(module: str) -> bool:
    # find_spec says None for a module set to None in sys.modules (how tests hide one)
    return sys.modules.get(module) is not None or importlib.util.find_spec(module) is not None


def triton_installed() -> bool:
    """Whether triton can be imported (answered without importing it)."""
    return _installed("triton")


TRITON_MISSING = "triton is not installed (pip install 'ncompass[kernels]')"
NO_DEVICE = (
    "no CUDA device: tensors on cpu "
    "(set TRITON_INTERPRET=1 to run the kernels in Triton's interpreter)"
)
LOADED_OUTSIDE_INTERPRETER = (
    "the kernels were loaded before TRITON_INTERPRET=1 was set; set it before the first kernel call"
)


def unavailable_reason(tensors: Iterable[Any | None], kernel_module: str) -> str | None:
    """Why the kernel in ``kernel_module`` cannot run on ``tensors`` here, or None if it can.

    Called on every op call, before anything else: it must stay cheap.

    Args:
        tensors: The call's tensors (None entries, for an absent bias, are skipped).
        kernel_module: The module defining the kernel; when it is already imported, its mode
            (compiled or interpreted, fixed when it was imported) must suit the device.
    """
    device = None
    for tensor in tensors:
        if tensor is None:
            continue
        if device is None:
            device = tensor.device
        elif tensor.device != device:
            return "tensors on different devices"
    if not triton_installed():
        return TRITON_MISSING
    assert device is not None
    if device.type == "cuda":
        return None  # compiled, or interpreted with copies through the host
    if device.type != "cpu":
        return f"tensors on {device.type}: the kernels need a CUDA device"
    loaded = sys.modules.get(kernel_module)
    if loaded is not None:
        if loaded.INTERPRETED:
            return None
        return LOADED_OUTSIDE_INTERPRETER if interpreter_requested() else NO_DEVICE
    if not interpreter_requested():
        return NO_DEVICE
    return None if _installed("numpy") else "Triton's interpreter needs numpy"


__all__ = ["interpreter_requested", "triton_installed", "unavailable_reason"]
