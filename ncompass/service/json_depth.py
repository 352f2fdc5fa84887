"""The nesting guard: JSON request bodies nested deeper than any real request are refused.

The stdlib decoder FastAPI uses recurses once per level, so a body of ten thousand nested
arrays (a few KiB, far under the size limit) ends in a ``RecursionError`` and a vague 400. The
route class here counts the depth first, without recursion, and answers with a clear one.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute

MAX_JSON_DEPTH = 32
"""Deepest nesting of arrays and objects in a JSON request body (real requests are < 10)."""

# A string (its brackets are text) or one bracket.
_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)
_OPENING = frozenset(b"[{")


def exceeds_depth(body: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether the JSON text ``body`` nests arrays and objects deeper than ``limit``."""
    depth = 0
    for token in _TOKEN.finditer(body):
        first = token.group()[0]
        if first in _OPENING:
            depth += 1
            if depth > limit:
                return True
        elif first != 0x22:  # a closing bracket, not a string
            depth -= 1
    return False


class DepthLimitedRoute(APIRoute):
    """An ``APIRoute`` that refuses JSON bodies nested deeper than :data:`MAX_JSON_DEPTH`."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        if self.body_field is None:  # raw bodies (trace uploads) have their own checks
            return handler

        async def depth_checked(request: Request) -> Response:
            if exceeds_depth(await request.body()):  # the body is cached for the handler
                return JSONResponse(
                    status_code=400,
                    content={
                        "detail": f"the request JSON nests deeper than {MAX_JSON_DEPTH} levels, "
                        "the most this service accepts; send flat objects"
                    },
                )
            return await handler(request)

        return depth_checked


__all__ = ["MAX_JSON_DEPTH", "DepthLimitedRoute", "exceeds_depth"]
