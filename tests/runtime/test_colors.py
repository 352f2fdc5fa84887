"""NVTX colours as specs write them."""

from __future__ import annotations

import pytest

from ncompass.errors import ContextError
from ncompass.runtime.colors import parse_color


@pytest.mark.parametrize(
    ("color", "argb"),
    [
        ("red", 0xFFFF0000),
        ("Green", 0xFF008000),
        ("#12ab34", 0xFF12AB34),
        ("#8012ab34", 0x8012AB34),
        ("0x00ff00", 0xFF00FF00),
        (0x123456, 0xFF123456),
        (0x7F123456, 0x7F123456),
    ],
)
def test_names_hex_and_integers_become_argb(color: str | int, argb: int) -> None:
    assert parse_color(color) == argb


def test_default_colour_is_stable_per_name_and_opaque() -> None:
    first = parse_color(None, name="attn.forward")
    assert first == parse_color(None, name="attn.forward")
    assert first >> 24 == 0xFF
    names = [f"layer{i}" for i in range(20)]
    assert len({parse_color(None, name=n) for n in names}) > 3


@pytest.mark.parametrize("color", ["reddish", "#12345", "#gg0000", 2**33, -1, 1.5, True])
def test_bad_colours_are_context_errors(color: object) -> None:
    with pytest.raises(ContextError, match="colour"):
        parse_color(color)  # type: ignore[arg-type]
