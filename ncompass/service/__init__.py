"""The analysis service behind ``ncompass serve`` (needs the ``server`` extra: FastAPI, uvicorn).

Clients upload a trace once, then run summarize, analyze, filter and propose-markers jobs on it
by upload id and poll them by job id; :class:`~ncompass.analysis.providers.RemoteProvider` is
the client. Nothing here is imported by ``import ncompass``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ncompass._lazy import lazy_exports
from ncompass.service.limits import ServiceLimits

if TYPE_CHECKING:
    from ncompass.service.app import create_app
    from ncompass.service.server import BackgroundService

_LAZY: dict[str, str] = {
    "create_app": "ncompass.service.app",
    "BackgroundService": "ncompass.service.server",
}


# FastAPI and uvicorn are imported only when the app or a server is asked for.
__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())


__all__ = ["BackgroundService", "ServiceLimits", "create_app"]
