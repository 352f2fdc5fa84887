"""The request-size guard: every body is bounded, uploads by their own (larger) limit."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import orjson
from fastapi import HTTPException

from ncompass.service.limits import ServiceLimits, too_large_message

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

UPLOAD_PATH = "/v1/uploads"


class BodyTooLarge(HTTPException):
    """A request body went past its limit while it was being read (answered with 413).

    An ``HTTPException`` so that FastAPI's body parsing re-raises it as it is instead of
    turning it into a generic 400.
    """

    def __init__(self, limit: int, what: str):
        super().__init__(status_code=413, detail=too_large_message(limit, what))


class BodySizeLimit:
    """ASGI middleware bounding every request body.

    A declared ``Content-Length`` over the limit is refused before a byte is read; bodies
    without one (chunked) are counted as they arrive, and reading past the limit raises
    :class:`BodyTooLarge` inside the handler: the same 413.
    """

    def __init__(self, app: ASGIApp, limits: ServiceLimits):
        self.app = app
        self.limits = limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        is_upload = scope["path"] == UPLOAD_PATH and scope["method"] == "POST"
        limit = self.limits.max_upload_bytes if is_upload else self.limits.max_request_bytes
        what = "trace upload" if is_upload else "request body"
        declared = _content_length(scope)
        if declared is not None and declared > limit:
            await _send_413(send, too_large_message(limit, what))
            return
        received = 0

        async def counted_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLarge(limit, what)
            return message

        await self.app(scope, counted_receive, send)


def _content_length(scope: Scope) -> int | None:
    for key, value in scope.get("headers", []):
        if key == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def _send_413(send: Send, message: str) -> None:
    body = orjson.dumps({"detail": message})
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            # The body was not read, so this connection cannot carry another request.
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


__all__ = ["UPLOAD_PATH", "BodySizeLimit", "BodyTooLarge"]
