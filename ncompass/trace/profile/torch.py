"""Seed path ``ncompass.trace.profile.torch``: re-exports the torch range contexts.

Importing this module does not import torch.
"""

from ncompass.runtime.context_managers import TorchRecordContext

# --- TorchProfilerContext -------------------------------------------------------------------
# Owned by ncompass/capture (the profiler lifecycle). Add its re-export here, e.g.
#     from ncompass.capture.<module> import TorchProfilerContext
# and list it in __all__ below.
# ---------------------------------------------------------------------------------------------

__all__ = ["TorchRecordContext"]
