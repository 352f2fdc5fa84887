"""A trace header value kept as its JSON text instead of as Python objects.

Decoding a large JSON value costs many times its text: a 60 MB object of short keys took 900 MB
as a dict. The reader keeps a top-level value larger than :data:`RAW_VALUE_BYTES` (no real
trace has one: ``deviceProperties`` of eight GPUs is a few KiB) as :class:`RawJson`, its text,
checked to be valid JSON; writers put the text back as it was.
"""

from __future__ import annotations

import orjson

RAW_VALUE_BYTES = 1 << 20
"""A header or trailer value of more JSON text than this is kept as :class:`RawJson`."""


class RawJson(bytes):
    """The JSON text of one value, valid and as the trace wrote it (a ``bytes``: it pickles)."""


def raw_json_default(value: object) -> orjson.Fragment:
    """``orjson.dumps(..., default=raw_json_default)``: a :class:`RawJson` written as its text.

    Raises:
        TypeError: ``value`` is not a :class:`RawJson` (as orjson raises for any other type).
    """
    if isinstance(value, RawJson):
        return orjson.Fragment(bytes(value))
    raise TypeError(f"Type is not JSON serializable: {type(value).__name__}")


__all__ = ["RAW_VALUE_BYTES", "RawJson", "raw_json_default"]
