"""The ``Origin`` guard: the service answers no request a web page of another origin sends.

A page the user visits can make the browser send a "simple" request (a POST of ``text/plain``
or a form) to a loopback service without asking it first (no CORS preflight): the page cannot
read the answer, but the request is carried out, so it could fill the service's storage or
evict the user's uploads. Browsers name the page's origin in the ``Origin`` header of such
requests, and programs (ncompass, curl) send none, so a request whose ``Origin`` is not the
service's own address is refused before it reaches a handler. Uploads are also refused in the
content types a form can send (see :func:`form_content_type`), whatever their origin.
"""

from __future__ import annotations

import urllib.parse

import orjson

from ncompass.service.body_limit import ASGIApp, Receive, Scope, Send

_DEFAULT_PORTS = {"http": 80, "https": 443}
# What a page may send cross-origin without a preflight (the CORS-safelisted content types).
_FORM_TYPES = frozenset({"text/plain", "application/x-www-form-urlencoded", "multipart/form-data"})


def is_own_origin(origin: str, host: str | None) -> bool:
    """Whether ``origin`` (``scheme://name[:port]``) names the host and port of ``host`` (the
    request's ``Host`` header): a page the service itself served (its ``/docs``)."""
    if host is None:
        return False
    page = urllib.parse.urlsplit(origin)
    target = urllib.parse.urlsplit(f"//{host}")
    if page.scheme not in _DEFAULT_PORTS or not page.hostname or page.path or page.query:
        return False
    try:
        page_port = page.port or _DEFAULT_PORTS[page.scheme]
        target_port = target.port or _DEFAULT_PORTS[page.scheme]
    except ValueError:  # a port that is not a number
        return False
    return page.hostname == target.hostname and page_port == target_port


def form_content_type(content_type: str | None) -> str | None:
    """The media type of ``content_type`` when it is one a page's form can send, else None."""
    if content_type is None:
        return None
    media = content_type.partition(";")[0].strip().lower()
    return media if media in _FORM_TYPES else None


class OriginCheck:
    """ASGI middleware answering 403 to a request whose ``Origin`` is another origin's."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        origin = _header(scope, b"origin")
        if origin is None or is_own_origin(origin, _header(scope, b"host")):
            await self.app(scope, receive, send)
            return
        body = orjson.dumps(
            {
                "detail": (
                    "this service does not answer requests from web pages of other origins "
                    f"({origin}); call it from a program (ncompass, curl), which sends no "
                    "Origin header"
                )
            }
        )
        await send(
            {
                "type": "http.response.start",
                "status": 403,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return str(value.decode("latin-1"))
    return None


__all__ = ["OriginCheck", "form_content_type", "is_own_origin"]
