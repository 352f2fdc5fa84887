"""Analysis providers: who writes a trace's summary (and may propose markers).

The built-in engine (default: offline, deterministic) is :class:`BuiltinProvider`. Others sit
behind the same protocol (:mod:`.base`): :class:`RemoteProvider`, the client of an
``ncompass serve`` service, and :class:`LLMProvider`, where a chat model writes the narrative.
Both fall back, with a :class:`ProviderFallbackWarning`, to the provider under them.
:func:`make_provider` picks one from a base URL and the environment.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ncompass._lazy import lazy_exports
from ncompass.analysis.providers.base import AnalysisProvider, MarkerRequest
from ncompass.analysis.providers.builtin import BuiltinProvider
from ncompass.analysis.providers.fallback import ProviderFallbackWarning
from ncompass.analysis.providers.select import (
    ANALYSIS_URL_ENV,
    make_local_provider,
    make_provider,
)

if TYPE_CHECKING:
    from ncompass.analysis.providers.llm import LLMProvider, LLMSettings
    from ncompass.analysis.providers.remote import RemoteProvider

_LAZY: dict[str, str] = {
    "LLMProvider": "ncompass.analysis.providers.llm",
    "LLMSettings": "ncompass.analysis.providers.llm",
    "RemoteProvider": "ncompass.analysis.providers.remote",
}


# The HTTP providers are loaded only when used: most sessions never need them.
__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())


__all__ = [
    "ANALYSIS_URL_ENV",
    "AnalysisProvider",
    "BuiltinProvider",
    "LLMProvider",
    "LLMSettings",
    "MarkerRequest",
    "ProviderFallbackWarning",
    "RemoteProvider",
    "make_local_provider",
    "make_provider",
]
