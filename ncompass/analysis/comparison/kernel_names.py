"""Kernel names that survive template-argument, parameter-list and launch-config changes.

Two kernels that are "the same kernel, built differently" (another template instance, another
tile shape, the next Inductor numbering) share a normalised name, so a comparison can match them
when their exact names differ.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable

_BALANCED = {"<": ">", "(": ")", "[": "]"}
_TILE_SHAPE = re.compile(r"(?<!\d)\d+(?:x\d+)+(?!\d)")
_LAUNCH_CONFIG = re.compile(r"\b(?:grid|block)\s*[=:]\s*\S+", re.IGNORECASE)
_NUMERIC_SUFFIX = re.compile(r"(?:_\d+)+$")
_SPACES = re.compile(r"\s+")


def normalize_kernel_name(name: str) -> str:
    """The name a kernel is matched under when its exact name has no partner.

    The rule, in order: drop a leading ``void``; drop every balanced ``<...>`` (template
    arguments), ``(...)`` (parameter lists) and ``[...]`` (launch configuration some exporters
    append); drop ``grid=...``/``block=...`` words; replace tile shapes such as ``128x64`` or
    ``64x64x32`` by ``*``; drop trailing numeric suffixes (``triton_poi_fused_add_0`` ->
    ``triton_poi_fused_add``); collapse spaces.

    Args:
        name: A GPU event name.

    Returns:
        Its normalised form (the name itself when nothing applies).
    """
    text = name.strip()
    if text.startswith("void "):
        text = text[5:]
    text = _strip_balanced(text)
    text = _LAUNCH_CONFIG.sub("", text)
    text = _TILE_SHAPE.sub("*", text)
    text = _SPACES.sub(" ", text).strip()
    text = _NUMERIC_SUFFIX.sub("", text)
    return text or name


def short_kernel_name(name: str, width: int = 70) -> str:
    """A display name: ``void`` dropped, brackets nested two deep and parameter lists elided.

    Unlike cutting the name at ``width``, the first template argument stays readable, so two
    instances of one template (``par_ranged2d_kernel<PdV_kernel(…)…>`` and
    ``par_ranged2d_kernel<flux_kernel(…)…>``) stay apart; names still longer than ``width``
    keep their start and end around an ellipsis.
    """
    text = name.strip()
    if len(text) > width:
        text = _elide_nested(text.removeprefix("void "))
    if len(text) <= width:
        return text
    keep = (width - 1) // 2
    return f"{text[:keep]}…{text[-(width - 1 - keep) :]}"


def distinct_short_names(names: list[str], width: int = 70) -> dict[str, str]:
    """Short display names, widened where two would read the same (the full name at worst)."""
    result: dict[str, str] = {}
    pending = list(dict.fromkeys(names))
    for limit in (width, width * 3 // 2, width * 2, width * 3):
        short = {name: short_kernel_name(name, limit) for name in pending}
        counts = Counter(short.values())
        result.update({name: text for name, text in short.items() if counts[text] == 1})
        pending = [name for name in pending if counts[short[name]] > 1]
        if not pending:
            break
    result.update({name: name for name in pending})
    return result


def _elide_nested(text: str) -> str:
    """Elide top-level parameter lists and every bracket group inside another one."""
    out: list[str] = []
    stack: list[tuple[str, bool]] = []  # open groups: (opener, whether its text is shown)
    hidden = 0  # open groups whose text is elided
    for index, char in enumerate(text):
        if char in _BALANCED and not _is_operator(text, index):
            if hidden:
                stack.append((char, False))
                hidden += 1
            elif char == "(" or stack:
                out.append(f"{char}…")
                stack.append((char, False))
                hidden += 1
            else:
                out.append(char)
                stack.append((char, True))
        elif stack and char == _BALANCED[stack[-1][0]]:
            _, shown = stack.pop()
            if not shown:
                hidden -= 1
            if not hidden:
                out.append(char)
        elif not hidden:
            out.append(char)
    return "".join(out)


def _strip_balanced(text: str) -> str:
    return _rewrite_balanced(text, lambda _opener: "")


def _rewrite_balanced(text: str, replacement: Callable[[str], str]) -> str:
    """Replace every outermost balanced bracket group; unbalanced text is kept as it is."""
    out: list[str] = []
    depth = 0
    opener = ""
    group_start = 0
    for index, char in enumerate(text):
        if depth == 0:
            if char in _BALANCED and not _is_operator(text, index):
                depth, opener, group_start = 1, char, index
            else:
                out.append(char)
        elif char == opener:
            depth += 1
        elif char == _BALANCED[opener]:
            depth -= 1
            if depth == 0:
                out.append(replacement(opener))
    if depth:
        out.append(text[group_start:])  # unbalanced: keep the rest as written
    return "".join(out)


def _is_operator(text: str, index: int) -> bool:
    """``operator<``, ``operator()`` and the like are names, not bracket groups."""
    return text[:index].rstrip().endswith("operator")
