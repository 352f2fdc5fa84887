"""Marker names as profilers can write them.

The PyTorch profiler writes range names into its JSON trace without escaping them: one ``"`` or
``\\`` in a name makes the whole trace unreadable; and it replaces any name with a non-ASCII
character by ``unknown``. Names are therefore cleaned before they are recorded: quotes become
``'``, backslashes ``/``, control characters spaces, and non-ASCII characters their ASCII
decomposition (``é`` → ``e``, ``…`` → ``...``) or ``U+XXXX``. Whoever maps trace names back to
spec names applies the same function to the spec's names.
"""

from __future__ import annotations

import unicodedata

_TABLE = {ord('"'): "'", ord("\\"): "/", **{code: " " for code in range(32)}, 127: " "}


def trace_safe_name(name: str) -> str:
    """``name`` with the characters torch's trace writer cannot take replaced."""
    if not name.isascii():
        name = "".join(_ascii(character) for character in name)
    return name.translate(_TABLE)


def _ascii(character: str) -> str:
    if character.isascii():
        return character
    decomposed = unicodedata.normalize("NFKD", character).encode("ascii", "ignore").decode()
    return decomposed or f"U+{ord(character):04X}"


__all__ = ["trace_safe_name"]
