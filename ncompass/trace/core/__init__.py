"""Seed path ``ncompass.trace.core``: the rewrite configuration and switches (re-exports only)."""

from ncompass.importer.hook import disable_rewrites, enable_full_trace_mode, enable_rewrites
from ncompass.spec.models import RewriteConfig

__all__ = ["RewriteConfig", "disable_rewrites", "enable_full_trace_mode", "enable_rewrites"]
