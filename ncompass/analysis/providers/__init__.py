"""Analysis providers: who writes a trace's summary (and may propose markers).

The built-in engine (default: offline, deterministic) is :class:`BuiltinProvider`. Others sit
behind the same protocol (:mod:`.base`): a remote ``ncompass serve`` service, an LLM that writes
the narrative. :func:`make_provider` picks one from a base URL and the environment.
"""

from __future__ import annotations

from ncompass.analysis.providers.base import AnalysisProvider, MarkerRequest
from ncompass.analysis.providers.builtin import BuiltinProvider
from ncompass.analysis.providers.select import ANALYSIS_URL_ENV, make_provider

__all__ = [
    "ANALYSIS_URL_ENV",
    "AnalysisProvider",
    "BuiltinProvider",
    "MarkerRequest",
    "make_provider",
]
