"""Seed path ``ncompass.trace.profile.torch``: re-exports the torch range contexts.

Importing this module does not import torch.
"""

from ncompass.capture.decorator import TorchProfilerContext
from ncompass.runtime.context_managers import TorchRecordContext

__all__ = ["TorchProfilerContext", "TorchRecordContext"]
