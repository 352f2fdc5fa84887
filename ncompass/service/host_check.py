"""The ``Host`` guard: the service answers only to the names it was started under.

A web page can reach a loopback service through a name its owner controls (DNS rebinding: the
name first resolves to the page's server, then to 127.0.0.1), and the browser then treats the
service's answers as the page's own. Such requests carry the attacker's name in ``Host``, so
anything but the bound address, ``localhost`` and the names given with ``--allow-host`` is
refused before it reaches a handler.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

import orjson

from ncompass.service.body_limit import ASGIApp, Receive, Scope, Send

_WILDCARDS = ("0.0.0.0", "::", "")


class AllowedHosts:
    """The ``Host`` names (without port) the service answers to.

    Args:
        bound: The address the service listens on (``--host``). A wildcard (``0.0.0.0``,
            ``::``) also admits every IP address: a literal address cannot be rebound.
        extra: More names clients may use (``--allow-host``), e.g. the machine's DNS name.
    """

    def __init__(self, bound: str, extra: Iterable[str] = ()) -> None:
        self.any_address = bound in _WILDCARDS
        names = {"localhost", bound, *extra}
        if _normalized(bound) == "localhost":
            names |= {"127.0.0.1", "::1"}  # what "localhost" is bound as
        self.names = frozenset(_normalized(name) for name in names if name not in _WILDCARDS)

    def admits(self, host_header: str | None) -> bool:
        """Whether a request with this ``Host`` header (``None``: none sent) is answered."""
        if host_header is None:
            # HTTP/1.0 without Host: no browser sends that, so no page can be behind it.
            return True
        name = _normalized(_without_port(host_header))
        if name in self.names:
            return True
        return self.any_address and _is_ip(name)

    def describe(self) -> str:
        """The admitted names, for messages."""
        shown = ", ".join(sorted(self.names))
        return shown + (" and any IP address" if self.any_address else "")


class HostCheck:
    """ASGI middleware answering 400 to a request whose ``Host`` is not admitted."""

    def __init__(self, app: ASGIApp, allowed: AllowedHosts) -> None:
        self.app = app
        self.allowed = allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.allowed.admits(_host_header(scope)):
            await self.app(scope, receive, send)
            return
        body = orjson.dumps(
            {
                "detail": (
                    f"this service does not answer to the host name "
                    f"{_host_header(scope)!r}; it answers to {self.allowed.describe()} "
                    "(start it with --allow-host NAME to add one)"
                )
            }
        )
        await send(
            {
                "type": "http.response.start",
                "status": 400,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


def _host_header(scope: Scope) -> str | None:
    for key, value in scope.get("headers", []):
        if key == b"host":
            return str(value.decode("latin-1"))
    return None


def _without_port(host: str) -> str:
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    if host.count(":") == 1:
        return host.partition(":")[0]
    return host


def _normalized(name: str) -> str:
    name = name.strip().strip("[]").rstrip(".").lower()
    try:
        return str(ipaddress.ip_address(name))
    except ValueError:
        return name


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


__all__ = ["AllowedHosts", "HostCheck"]
