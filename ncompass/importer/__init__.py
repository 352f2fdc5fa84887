"""The import hook: a meta-path finder and loader that rewrite target modules, with a code cache.

The surface is below; each name loads its module (and libcst) on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ncompass._lazy import lazy_exports

if TYPE_CHECKING:
    from ncompass.importer.hook import (
        FULL_TRACE_MARKER,
        NotRewrittenWarning,
        active_config,
        disable_rewrites,
        enable_full_trace_mode,
        enable_rewrites,
    )
    from ncompass.importer.inplace import ReimportWarning
    from ncompass.importer.registry import REGISTRY, MarkerRecord
    from ncompass.importer.script import ScriptNotFoundError, run_module, run_script
    from ncompass.importer.targets import SkippedTargetWarning
    from ncompass.importer.validate import TargetCheck, validate_spec

# public name -> module that defines it (imported on first use: the rewriter needs libcst)
_LAZY: dict[str, str] = {
    "FULL_TRACE_MARKER": "ncompass.importer.hook",
    "enable_rewrites": "ncompass.importer.hook",
    "disable_rewrites": "ncompass.importer.hook",
    "enable_full_trace_mode": "ncompass.importer.hook",
    "active_config": "ncompass.importer.hook",
    "NotRewrittenWarning": "ncompass.importer.hook",
    "ReimportWarning": "ncompass.importer.inplace",
    "SkippedTargetWarning": "ncompass.importer.targets",
    "TargetCheck": "ncompass.importer.validate",
    "validate_spec": "ncompass.importer.validate",
    "ScriptNotFoundError": "ncompass.importer.script",
    "run_module": "ncompass.importer.script",
    "run_script": "ncompass.importer.script",
    "REGISTRY": "ncompass.importer.registry",
    "MarkerRecord": "ncompass.importer.registry",
}

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())

__all__ = [
    "FULL_TRACE_MARKER",
    "REGISTRY",
    "MarkerRecord",
    "NotRewrittenWarning",
    "ReimportWarning",
    "ScriptNotFoundError",
    "SkippedTargetWarning",
    "TargetCheck",
    "active_config",
    "disable_rewrites",
    "enable_full_trace_mode",
    "enable_rewrites",
    "run_module",
    "run_script",
    "validate_spec",
]
