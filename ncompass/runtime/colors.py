"""Colours of NVTX ranges: names, ``#RRGGBB`` text, and a stable default per marker name."""

from __future__ import annotations

import zlib

from ncompass.errors import ContextError

_OPAQUE = 0xFF000000

# The names the `nvtx` package accepts without matplotlib, so specs read the same in both.
NAMED_COLORS: dict[str, int] = {
    "blue": 0x0000FF,
    "green": 0x008000,
    "yellow": 0xFFFF00,
    "purple": 0x800080,
    "rapids": 0x7400FF,
    "cyan": 0x00FFFF,
    "red": 0xFF0000,
    "white": 0xFFFFFF,
    "darkgreen": 0x006400,
    "orange": 0xFFA500,
    "black": 0x000000,
    "grey": 0x808080,
    "gray": 0x808080,
}

# Tableau 10: neighbouring markers get colours that are easy to tell apart in Nsight Systems.
_DEFAULT_PALETTE = (
    0x4E79A7,
    0xF28E2B,
    0xE15759,
    0x76B7B2,
    0x59A14F,
    0xEDC948,
    0xB07AA1,
    0xFF9DA7,
    0x9C755F,
    0xBAB0AC,
)


def parse_color(color: str | int | None, *, name: str = "") -> int:
    """Turns a colour as written in a spec into an opaque ARGB integer.

    Args:
        color: A name from :data:`NAMED_COLORS`, ``"#RRGGBB"``, ``"#AARRGGBB"``, an integer
            (``0xRRGGBB`` or ``0xAARRGGBB``), or None for the default colour of ``name``.
        name: The marker name; the default colour is derived from it, so a marker keeps its
            colour from one run to the next.

    Returns:
        The colour as ``0xAARRGGBB`` (alpha 0xFF when none was given).

    Raises:
        ContextError: ``color`` is not one of the accepted forms.
    """
    if color is None:
        return _OPAQUE | _DEFAULT_PALETTE[_stable_hash(name) % len(_DEFAULT_PALETTE)]
    if isinstance(color, bool) or not isinstance(color, (int, str)):
        raise ContextError(f"colour {color!r} is not a colour name, '#RRGGBB' or an integer")
    if isinstance(color, int):
        value = color
    else:
        text = color.strip().lower()
        if text in NAMED_COLORS:
            value = NAMED_COLORS[text]
        else:
            digits = text[1:] if text.startswith("#") else text[2:] if text.startswith("0x") else ""
            if len(digits) not in (6, 8) or any(c not in "0123456789abcdef" for c in digits):
                names = ", ".join(sorted(NAMED_COLORS))
                raise ContextError(
                    f"colour {color!r} is not understood: use '#RRGGBB', '#AARRGGBB' "
                    f"or one of {names}"
                )
            value = int(digits, 16)
    if not 0 <= value <= 0xFFFFFFFF:
        raise ContextError(f"colour {color!r} does not fit in 32 bits (0xAARRGGBB)")
    return value if value > 0xFFFFFF else _OPAQUE | value


def _stable_hash(text: str) -> int:
    """CRC-32 of the UTF-8 bytes: the same in every process (unlike ``hash()``), and computed in
    C: every marker of a module is bound when it is imported, so this is on the import path."""
    return zlib.crc32(text.encode())
