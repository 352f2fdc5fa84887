"""Seed path ``ncompass.trace``: the nCompass SDK's public names (re-exports only).

Names are imported on first use, so ``ncompass.trace.profile.*`` stays light.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ncompass.importer.hook import disable_rewrites, enable_full_trace_mode, enable_rewrites
    from ncompass.session.session import ProfilingSession
    from ncompass.spec.models import RewriteConfig

_LAZY: dict[str, str] = {
    "ProfilingSession": "ncompass.session.session",
    "RewriteConfig": "ncompass.spec.models",
    "disable_rewrites": "ncompass.importer.hook",
    "enable_full_trace_mode": "ncompass.importer.hook",
    "enable_rewrites": "ncompass.importer.hook",
}


def __getattr__(name: str) -> Any:
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'ncompass.trace' has no attribute {name!r}")
    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "ProfilingSession",
    "RewriteConfig",
    "disable_rewrites",
    "enable_full_trace_mode",
    "enable_rewrites",
]
