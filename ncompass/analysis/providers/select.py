"""Choose the analysis provider for a session (or for the service's own jobs)."""

from __future__ import annotations

import os

from ncompass.analysis.providers.base import AnalysisProvider
from ncompass.analysis.providers.builtin import BuiltinProvider

ANALYSIS_URL_ENV = "NCOMPASS_ANALYSIS_URL"


def make_provider(base_url: str | None = None) -> AnalysisProvider:
    """The provider for ``base_url`` (or ``$NCOMPASS_ANALYSIS_URL``); the local one otherwise.

    A remote provider falls back to the built-in engine, with a warning, when the service is
    unreachable or fails.
    """
    url = base_url or os.environ.get(ANALYSIS_URL_ENV)
    if url:
        from ncompass.analysis.providers.remote import RemoteProvider

        return RemoteProvider(url, fallback=BuiltinProvider())
    return make_local_provider()


def make_local_provider() -> AnalysisProvider:
    """The built-in engine.

    Never remote: this is also what ``ncompass serve`` runs its jobs with, so a service cannot
    end up calling itself through ``$NCOMPASS_ANALYSIS_URL``.
    """
    return BuiltinProvider()


__all__ = ["ANALYSIS_URL_ENV", "make_local_provider", "make_provider"]
