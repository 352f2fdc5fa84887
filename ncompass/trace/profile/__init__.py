"""Seed paths of the range context classes (``ncompass.trace.profile.torch``, ``.nvtx``).

Re-exports only; the classes live in :mod:`ncompass.runtime`.
"""

from ncompass.runtime.context_managers import NvtxContext, TorchRecordContext

__all__ = ["NvtxContext", "TorchRecordContext"]
