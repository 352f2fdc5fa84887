"""Choose the analysis provider for a session (or for the service's own jobs)."""

from __future__ import annotations

import os
import warnings

from ncompass import environment_variables
from ncompass.analysis.providers.base import AnalysisProvider
from ncompass.analysis.providers.builtin import BuiltinProvider
from ncompass.analysis.providers.fallback import ProviderFallbackWarning

ANALYSIS_URL_ENV = environment_variables.NCOMPASS_ANALYSIS_URL


def make_provider(base_url: str | None = None) -> AnalysisProvider:
    """The provider for ``base_url`` (or ``$NCOMPASS_ANALYSIS_URL``); the local one otherwise.

    A remote provider falls back to the built-in engine, with a warning, when the service is
    unreachable or fails. With ``$NCOMPASS_LLM_URL`` set, an LLM writes the narrative (and may
    propose markers) over whichever of the two computes the numbers.
    """
    url = base_url or os.environ.get(ANALYSIS_URL_ENV)
    if url:
        from ncompass.analysis.providers.remote import RemoteProvider

        return _with_llm(RemoteProvider(url, fallback=BuiltinProvider()))
    return make_local_provider()


def make_local_provider() -> AnalysisProvider:
    """The built-in engine, with the LLM narrative when ``$NCOMPASS_LLM_URL`` is set.

    Never remote: this is also what ``ncompass serve`` runs its jobs with, so a service cannot
    end up calling itself through ``$NCOMPASS_ANALYSIS_URL``.
    """
    return _with_llm(BuiltinProvider())


def _with_llm(provider: AnalysisProvider) -> AnalysisProvider:
    from ncompass.analysis.providers._chat import LLMSettings

    try:
        settings = LLMSettings.from_env()
    except ValueError as error:
        warnings.warn(f"{error}; the LLM provider is off", ProviderFallbackWarning, stacklevel=3)
        return provider
    if settings is None:
        return provider
    from ncompass.analysis.providers.llm import LLMProvider

    return LLMProvider(settings, wrapped=provider)


__all__ = ["ANALYSIS_URL_ENV", "make_local_provider", "make_provider"]
