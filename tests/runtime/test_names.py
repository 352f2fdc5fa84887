"""Marker name templates cut into text and fields (one parser for every reader of templates)."""

from __future__ import annotations

import pytest

from ncompass.runtime.names import template_pieces


@pytest.mark.parametrize(
    ("template", "pieces"),
    [
        ("plain", [("plain", False)]),
        ("block[{self.index}]", [("block[", False), ("{self.index}", True), ("]", False)]),
        ("{{literal}}{x}", [("{literal}", False), ("{x}", True)]),
        ("{a}.{b!r:>{w}}", [("{a}", True), (".", False), ("{b!r:>{w}}", True)]),
        ("x{ {1: 2}[1] }y", [("x", False), ("{ {1: 2}[1] }", True), ("y", False)]),
    ],
)
def test_template_pieces(template: str, pieces: list[tuple[str, bool]]) -> None:
    assert template_pieces(template) == pieces


def test_an_unclosed_brace_is_text() -> None:
    assert "".join(text for text, _ in template_pieces("open{x")) == "open{x"
    assert not any(is_field for _, is_field in template_pieces("open{x"))
