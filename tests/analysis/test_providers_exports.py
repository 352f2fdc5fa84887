"""The public surface of the providers and of the service package."""

from __future__ import annotations

import ncompass.analysis.providers as providers
import ncompass.service as service


def test_providers_export_exactly_these_names() -> None:
    assert providers.__all__ == [
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
    for name in providers.__all__:
        assert getattr(providers, name) is not None


def test_service_exports_exactly_these_names() -> None:
    assert service.__all__ == ["BackgroundService", "ServiceLimits", "create_app"]
    assert service.ServiceLimits().max_upload_bytes == 1024 * 1024 * 1024
