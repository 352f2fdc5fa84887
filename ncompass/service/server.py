"""Run the service with uvicorn: in the foreground (``ncompass serve``) or on a thread."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from ncompass._net import LOOPBACK, is_loopback
from ncompass.analysis.providers.base import AnalysisProvider
from ncompass.errors import NcompassError
from ncompass.service.limits import ServiceLimits


class ServiceStartError(NcompassError):
    """The service cannot listen where it was asked to, or does not come up."""


def listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0: any free port).

    Raises:
        ServiceStartError: The address is taken, unknown or not allowed.
    """
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(family, kind, proto)
    except OSError as error:
        raise ServiceStartError(f"cannot listen on {host}:{port}: {error}") from error
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as error:
        sock.close()
        raise ServiceStartError(
            f"cannot listen on {host}:{port}: {error.strerror or error}; choose another --port"
        ) from error
    return sock


def url_of(sock: socket.socket) -> str:
    """``http://host:port`` of a listening socket."""
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


def make_server(app: Any, log_level: str = "info") -> Any:
    """A uvicorn server for ``app`` (imported here so nothing else needs uvicorn)."""
    import uvicorn

    config = uvicorn.Config(app, log_level=log_level, lifespan="on", access_log=False)
    return uvicorn.Server(config)


class BackgroundService:
    """The analysis service on a thread of this process, on a free loopback port by default.

    For tests and notebooks; ``ncompass serve`` runs the same app in the foreground.

    Example:
        >>> with BackgroundService() as service:
        ...     provider = make_provider(service.url)

    Args:
        host: Address to listen on.
        port: Port (0: a free one).
        limits, storage_dir, provider, token, allow_hosts: As for
            :func:`ncompass.service.create_app`.
        start_timeout_s: How long to wait for the server to come up.
    """

    def __init__(
        self,
        *,
        host: str = LOOPBACK,
        port: int = 0,
        limits: ServiceLimits | None = None,
        storage_dir: Path | None = None,
        provider: AnalysisProvider | None = None,
        token: str | None = None,
        allow_hosts: tuple[str, ...] = (),
        start_timeout_s: float = 20.0,
    ) -> None:
        from ncompass.service.app import create_app

        self.app = create_app(
            limits=limits,
            storage_dir=storage_dir,
            provider=provider,
            token=token,
            host=host,
            allow_hosts=allow_hosts,
        )
        self._host = host
        self._port = port
        self._start_timeout_s = start_timeout_s
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self.url = ""

    def start(self) -> str:
        """Start serving; returns the base URL."""
        sock = listen(self._host, self._port)
        self.url = url_of(sock)
        self._server = make_server(self.app, log_level="warning")
        self._thread = threading.Thread(
            target=self._server.run,
            kwargs={"sockets": [sock]},
            name="ncompass-service",
            daemon=True,
        )
        self._thread.start()
        deadline = time.monotonic() + self._start_timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise ServiceStartError(f"the analysis service at {self.url} did not start")
            time.sleep(0.01)
        return self.url

    def stop(self) -> None:
        """Stop serving and wait for the server thread (and the running jobs)."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=30)
        self._thread = None

    def __enter__(self) -> BackgroundService:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


__all__ = [
    "LOOPBACK",
    "BackgroundService",
    "ServiceStartError",
    "is_loopback",
    "listen",
    "make_server",
    "url_of",
]
