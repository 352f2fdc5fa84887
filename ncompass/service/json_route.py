"""The route class of the service's JSON endpoints: bodies are checked before FastAPI decodes
them (nesting depth, constants JSON does not have), and refused with one clear 400."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute

from ncompass.service.json_constants import first_non_json_constant, non_json_constant_message
from ncompass.service.json_depth import MAX_JSON_DEPTH, exceeds_depth


def body_problem(body: bytes) -> str | None:
    """Why a JSON request body is refused before it is decoded, or None."""
    if exceeds_depth(body):
        return (
            f"the request JSON nests deeper than {MAX_JSON_DEPTH} levels, the most this "
            "service accepts; send flat objects"
        )
    found = first_non_json_constant(body)
    return non_json_constant_message(*found) if found is not None else None


class CheckedJsonRoute(APIRoute):
    """An ``APIRoute`` that refuses JSON bodies :func:`body_problem` finds fault with."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        if self.body_field is None:  # raw bodies (trace uploads) have their own checks
            return handler

        async def checked(request: Request) -> Response:
            problem = body_problem(await request.body())  # the body is cached for the handler
            if problem is not None:
                return JSONResponse(status_code=400, content={"detail": problem})
            return await handler(request)

        return checked


__all__ = ["CheckedJsonRoute", "body_problem"]
