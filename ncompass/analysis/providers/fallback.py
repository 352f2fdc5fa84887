"""The warning every provider gives when it hands a call to its fallback."""

from __future__ import annotations

import warnings

from ncompass.errors import NcompassWarning
from ncompass.warning_location import stacklevel_outside


class ProviderFallbackWarning(NcompassWarning):
    """A provider failed (service down, timeout, invalid answer) and its fallback answered."""


def warn_fallback(provider: str, what: str, reason: str, fallback: str) -> None:
    """Say which provider failed at what, why, and who answers instead.

    Args:
        provider: The failing provider, with its URL (``"analysis service at http://..."``).
        what: The call (``"summarize run.json"``).
        reason: What went wrong, ending with what the user can do when there is something.
        fallback: The name of the provider that answers instead.
    """
    warnings.warn(
        f"{provider}: {what} failed: {reason}; using the {fallback} provider instead",
        ProviderFallbackWarning,
        # Point at the user's code that led here, past ncompass's own frames.
        stacklevel=stacklevel_outside("ncompass"),
    )


__all__ = ["ProviderFallbackWarning", "warn_fallback"]
