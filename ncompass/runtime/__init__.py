"""Range contexts called by rewritten code (torch, nvtx, torch+nvtx, noop, custom).

A marker that nothing records costs about what a bare NVTX push/pop pair costs; see
``docs/runtime.md``. Importing this package never imports torch or nvtx.
"""

from ncompass.runtime.base import RangeContextWarning
from ncompass.runtime.colors import parse_color
from ncompass.runtime.context_managers import NvtxContext, TorchRecordContext
from ncompass.runtime.contexts import BUILTIN_CONTEXTS, ResolvedContext, resolve_context
from ncompass.runtime.sites import bind

__all__ = [
    "BUILTIN_CONTEXTS",
    "NvtxContext",
    "RangeContextWarning",
    "ResolvedContext",
    "TorchRecordContext",
    "bind",
    "parse_color",
    "resolve_context",
]
