"""The analysis service behind ``ncompass serve`` (needs the ``server`` extra: FastAPI, uvicorn).

Clients upload a trace once, then run summarize, analyze, filter and propose-markers jobs on it
by upload id and poll them by job id; :class:`~ncompass.analysis.providers.RemoteProvider` is
the client. Nothing here is imported by ``import ncompass``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ncompass.service.limits import ServiceLimits

if TYPE_CHECKING:
    from ncompass.service.app import create_app
    from ncompass.service.server import BackgroundService

_LAZY = {
    "create_app": "ncompass.service.app",
    "BackgroundService": "ncompass.service.server",
}


def __getattr__(name: str) -> Any:
    # FastAPI and uvicorn are imported only when the app or a server is asked for.
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'ncompass.service' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module_name), name)


__all__ = ["BackgroundService", "ServiceLimits", "create_app"]
