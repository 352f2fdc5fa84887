"""Seed path ``ncompass.trace``: the nCompass SDK's public names (re-exports only).

Names are imported on first use, so ``ncompass.trace.profile.*`` stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ncompass._lazy import lazy_exports

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


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())


__all__ = [
    "ProfilingSession",
    "RewriteConfig",
    "disable_rewrites",
    "enable_full_trace_mode",
    "enable_rewrites",
]
