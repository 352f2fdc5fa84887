"""Checks an LLM's narrative against the numbers and names of the summary it was given.

The model may explain, not invent: every name it quotes (in backticks, or a dotted name like
``attn.forward``) must appear in the summary, and every number it states must be one of the
summary's numbers, in any of the units a reader uses (µs, ms, s; fractions as %), within the
rounding its own digits allow (durations and percentages: or within 1 %). Counts and other
numbers without a unit must be exact to their last digit; small counting numbers (0 to 10)
need no source.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator
from typing import Any

MAX_NARRATIVE_CHARS = 6000
RELATIVE_TOLERANCE = 0.01

_BACKTICKED = re.compile(r"`([^`\n]+)`")
_DOTTED = re.compile(r"(?<![\w.])[A-Za-z_]\w+(?:\.[A-Za-z_]\w+)+")
_NUMBER = re.compile(
    r"(?<![\w.#])(?P<value>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"
    r"(?:\s*(?P<unit>µs|μs|us|ms|seconds?|secs?|s|%|percent|x|×))?(?!\w)"
)
_SCALE_US = {"µs": 1.0, "μs": 1.0, "us": 1.0, "ms": 1e3, "s": 1e6, "sec": 1e6, "secs": 1e6}
_SCALE_US |= {"second": 1e6, "seconds": 1e6}
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+", re.MULTILINE)


class InvalidNarrative(Exception):
    """The narrative cites a name or a number the summary does not have."""


def check_narrative(text: Any, *sources: Any) -> str:
    """Validate a narrative against ``sources`` (the structured summary and its digest).

    Returns:
        The narrative, without heading marks of its own (it is shown inside a section).

    Raises:
        InvalidNarrative: Naming the first unknown name or unsupported number.
    """
    if not isinstance(text, str) or not text.strip():
        raise InvalidNarrative("the narrative is missing or empty")
    if len(text) > MAX_NARRATIVE_CHARS:
        raise InvalidNarrative(f"the narrative is longer than {MAX_NARRATIVE_CHARS} characters")
    strings = "\n".join(_strings(sources))
    numbers = sorted(set(_numbers(sources)))
    for name in _BACKTICKED.findall(text):
        if name.strip() not in strings:
            raise InvalidNarrative(f"it cites `{name}`, which is not in the summary")
    prose = _BACKTICKED.sub(" ", text)
    for name in _DOTTED.findall(prose):
        if name not in strings:
            raise InvalidNarrative(f"it cites {name}, which is not in the summary")
    for match in _NUMBER.finditer(prose):
        if not _supported(match, numbers):
            raise InvalidNarrative(
                f"it states {match.group(0).strip()!r}, which is not a number of the summary"
            )
    return _HEADING.sub(lambda m: "", text).strip()


def _supported(match: re.Match[str], numbers: list[float]) -> bool:
    digits = match.group("value").replace(",", "")
    value = float(digits)
    decimals = len(digits.partition(".")[2])
    rounding = 0.5 * 10.0**-decimals
    unit = match.group("unit")
    if unit in _SCALE_US:
        scale = _SCALE_US[unit]
        return _near(numbers, value * scale, rounding * scale, RELATIVE_TOLERANCE)
    if unit in ("%", "percent"):
        # A fraction shown as a percentage, or a number that already is one.
        return _near(numbers, value / 100, rounding / 100, RELATIVE_TOLERANCE) or _near(
            numbers, value, rounding, RELATIVE_TOLERANCE
        )
    if unit is None and value.is_integer() and 0 <= value <= 10:
        return True
    return _near(numbers, value, rounding, 0.0)


def _near(numbers: list[float], value: float, rounding: float, relative: float) -> bool:
    """Whether some number is within ``rounding`` or ``relative`` of ``value``."""
    slack = max(rounding, abs(value) * relative * 1.01)
    low = bisect.bisect_left(numbers, value - slack)
    for candidate in numbers[low:]:
        if candidate > value + slack:
            return False
        if abs(candidate - value) <= max(rounding, abs(candidate) * relative):
            return True
    return False


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def _numbers(value: Any) -> Iterator[float]:
    if isinstance(value, bool):
        return
    if isinstance(value, int | float):
        if value == value:  # NaN matches nothing
            yield float(value)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _numbers(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _numbers(item)


__all__ = ["MAX_NARRATIVE_CHARS", "InvalidNarrative", "check_narrative"]
