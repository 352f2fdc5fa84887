"""ncompass: instrument code you do not own, capture traces, and see where the time went.

The public objects are imported lazily on first attribute access, so ``import ncompass`` stays
cheap and never imports torch, libcst or the trace reader.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ncompass._lazy import lazy_exports
from ncompass._version import __version__
from ncompass.errors import (
    CaptureError,
    ContextError,
    NcompassError,
    NcompassWarning,
    RewriteError,
    SpecError,
    TraceError,
)

if TYPE_CHECKING:
    from ncompass.capture.decorator import capture_trace
    from ncompass.gpu import (
        GpuBackendError,
        GpuMonitor,
        GpuSample,
        GpuSummary,
        ProfiledResult,
        gpu_profile,
    )
    from ncompass.importer.hook import disable_rewrites, enable_full_trace_mode, enable_rewrites
    from ncompass.session.session import ProfilingSession
    from ncompass.spec.models import RewriteConfig

# public name -> module that defines it
_LAZY: dict[str, str] = {
    "RewriteConfig": "ncompass.spec.models",
    "capture_trace": "ncompass.capture.decorator",
    "ProfilingSession": "ncompass.session.session",
    "GpuBackendError": "ncompass.gpu",
    "GpuMonitor": "ncompass.gpu",
    "GpuSample": "ncompass.gpu",
    "GpuSummary": "ncompass.gpu",
    "ProfiledResult": "ncompass.gpu",
    "gpu_profile": "ncompass.gpu",
    "enable_rewrites": "ncompass.importer.hook",
    "disable_rewrites": "ncompass.importer.hook",
    "enable_full_trace_mode": "ncompass.importer.hook",
}


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())


__all__ = [
    "CaptureError",
    "ContextError",
    "GpuBackendError",
    "GpuMonitor",
    "GpuSample",
    "GpuSummary",
    "NcompassError",
    "NcompassWarning",
    "ProfiledResult",
    "ProfilingSession",
    "RewriteConfig",
    "RewriteError",
    "SpecError",
    "TraceError",
    "__version__",
    "capture_trace",
    "disable_rewrites",
    "enable_full_trace_mode",
    "enable_rewrites",
    "gpu_profile",
]
