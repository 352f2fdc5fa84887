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


def template_pieces(template: str) -> list[tuple[str, bool]]:
    """A marker name template cut into ``(text, is_field)`` pieces, in order.

    A field is an ``{expression}`` (braces inside it nest); its text is the expression with
    its braces. Doubled braces outside fields are literal ones and come back single.
    """
    pieces: list[tuple[str, bool]] = []
    literal: list[str] = []
    field_start = depth = position = 0
    while position < len(template):
        pair = template[position : position + 2]
        character = template[position]
        if depth == 0 and pair in ("{{", "}}"):
            literal.append(character)
            position += 2
            continue
        if character == "{":
            if depth == 0:
                if literal:
                    pieces.append(("".join(literal), False))
                    literal = []
                field_start = position
            depth += 1
        elif character == "}" and depth:
            depth -= 1
            if depth == 0:
                pieces.append((template[field_start : position + 1], True))
        elif depth == 0:
            literal.append(character)
        position += 1
    if depth:  # an unclosed brace is text
        literal.append(template[field_start:])
    if literal:
        pieces.append(("".join(literal), False))
    return pieces


__all__ = ["template_pieces", "trace_safe_name"]
