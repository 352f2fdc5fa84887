"""Find line numbers in test sources by their text, so specs in tests read like specs in life."""

from __future__ import annotations

import textwrap


def line_of(source: str, text: str, occurrence: int = 1) -> int:
    """The 1-based line of the ``occurrence``-th line of dedented ``source`` containing ``text``."""
    seen = 0
    for number, line in enumerate(textwrap.dedent(source).lstrip("\n").splitlines(), start=1):
        if text in line:
            seen += 1
            if seen == occurrence:
                return number
    raise AssertionError(f"{text!r} not found in source")


def span(source: str, first: str, last: str) -> list[int]:
    """``[line_of(first), line_of(last)]``."""
    return [line_of(source, first), line_of(source, last)]
