"""The constants guard: ``NaN`` and ``Infinity`` in a JSON request body are refused.

JSON has no such numbers, but the stdlib decoder FastAPI uses takes them; a request holding one
then failed validation, and the validation error, which quotes the input, could not be written
back as JSON (a 500). The scan here finds them first, outside strings, without decoding.
"""

from __future__ import annotations

import re

# A string (its words are text), or one of the constants the stdlib decoder accepts.
_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|-?Infinity|NaN', re.DOTALL)


def first_non_json_constant(body: bytes) -> tuple[str, int] | None:
    """The first ``NaN``, ``Infinity`` or ``-Infinity`` outside strings, and its byte offset."""
    for token in _TOKEN.finditer(body):
        if token.group()[0] != 0x22:  # not a string
            return token.group().decode(), token.start()
    return None


def non_json_constant_message(constant: str, offset: int) -> str:
    """The 400 message for :func:`first_non_json_constant`'s find."""
    return (
        f"the request JSON holds {constant} at byte {offset}, which JSON does not allow: send "
        "a number (or leave the field out for its default)"
    )


__all__ = ["first_non_json_constant", "non_json_constant_message"]
