"""The nesting guard: JSON request bodies nested deeper than any real request are refused.

The stdlib decoder FastAPI uses recurses once per level, so a body of ten thousand nested
arrays (a few KiB, far under the size limit) ends in a ``RecursionError`` and a vague 400. The
count here needs no recursion; the route class of :mod:`.json_route` runs it first and answers
with a clear 400.
"""

from __future__ import annotations

import re

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


__all__ = ["MAX_JSON_DEPTH", "exceeds_depth"]
