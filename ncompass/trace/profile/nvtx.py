"""Seed path ``ncompass.trace.profile.nvtx``: re-exports :class:`NvtxContext`."""

from ncompass.runtime.context_managers import NvtxContext

__all__ = ["NvtxContext"]
