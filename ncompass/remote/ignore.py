"""``.gitignore``-style rules: which files of the upload folder stay on this machine.

The rules are git's (``gitignore(5)``): ``#`` comments, ``!`` re-includes, a leading or middle
``/`` anchors a pattern to its file's folder, a trailing ``/`` matches folders only, ``*`` and
``?`` stop at ``/``, ``[a-z]`` classes, ``**`` across folders, ``\\`` escapes. Each folder's
``.gitignore`` and ``.ncompassignore`` apply below it; deeper files and later lines win, and
``.ncompassignore`` wins over ``.gitignore`` in the same folder, so it can re-include (``!``)
what git ignores. A file inside an ignored folder cannot be re-included (git's rule too).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

IGNORE_FILES = (".gitignore", ".ncompassignore")


@dataclass(frozen=True)
class IgnorePattern:
    """One compiled line of an ignore file.

    Attributes:
        text: The line as written (for messages).
        regex: Matches a path relative to ``base``.
        negated: A ``!`` line: matching paths are included again.
        folders_only: A trailing ``/``: only folders match.
        base: The folder (relative to the upload root, ``""`` for the root) the line applies to.
    """

    text: str
    regex: re.Pattern[str]
    negated: bool
    folders_only: bool
    base: str

    def matches(self, path: str, is_folder: bool) -> bool:
        """Whether ``path`` (relative to the upload root, ``/``-separated) matches."""
        if self.folders_only and not is_folder:
            return False
        if self.base:
            if not path.startswith(self.base + "/"):
                return False
            path = path[len(self.base) + 1 :]
        return self.regex.fullmatch(path) is not None


def parse_ignore_lines(lines: Sequence[str], base: str = "") -> list[IgnorePattern]:
    """Compile the lines of one ignore file found in folder ``base``."""
    patterns: list[IgnorePattern] = []
    for raw in lines:
        pattern = compile_pattern(raw, base)
        if pattern is not None:
            patterns.append(pattern)
    return patterns


def compile_pattern(line: str, base: str = "") -> IgnorePattern | None:
    """One ignore-file line as a pattern; None for blank lines and comments."""
    text = line.rstrip("\n").rstrip("\r")
    text = _strip_trailing_spaces(text)
    if not text or text.startswith("#"):
        return None
    negated = text.startswith("!")
    if negated or text.startswith(("\\!", "\\#")):
        text = text[1:]
    folders_only = text.endswith("/") and not text.endswith("\\/")
    body = text.rstrip("/") if folders_only else text
    if not body:
        return None
    # A slash anywhere but at the end anchors the pattern to its file's folder; otherwise it
    # matches a name at any depth below it.
    anchored = "/" in body
    body = body.lstrip("/") if body.startswith("/") else body
    regex = _translate(body)
    if not anchored:
        regex = f"(?:.*/)?{regex}"
    return IgnorePattern(
        text=line.strip(),
        regex=re.compile(regex, re.DOTALL),
        negated=negated,
        folders_only=folders_only,
        base=base,
    )


class IgnoreRules:
    """The patterns in force in one folder: its parents' and its own, in order of precedence."""

    def __init__(self, patterns: Sequence[IgnorePattern] = ()) -> None:
        self._patterns = list(patterns)

    def below(self, folder: Path, relative: str) -> IgnoreRules:
        """The rules for the inside of ``folder`` (``relative`` to the root): plus its files."""
        added: list[IgnorePattern] = []
        for name in IGNORE_FILES:
            try:
                text = (folder / name).read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            added.extend(parse_ignore_lines(text.splitlines(), relative))
        if not added:
            return self
        return IgnoreRules([*self._patterns, *added])

    def then(self, lines: Sequence[str], base: str = "") -> IgnoreRules:
        """These rules followed by ``lines``, which take precedence over them."""
        return IgnoreRules([*self._patterns, *parse_ignore_lines(lines, base)])

    def ignored(self, path: str, is_folder: bool) -> IgnorePattern | None:
        """The pattern that excludes ``path``, or None when the path is kept."""
        for pattern in reversed(self._patterns):
            if pattern.matches(path, is_folder):
                return None if pattern.negated else pattern
        return None


def _strip_trailing_spaces(text: str) -> str:
    # Trailing spaces are ignored unless escaped with a backslash.
    end = len(text)
    while end > 0 and text[end - 1] == " ":
        if end >= 2 and text[end - 2] == "\\":
            break
        end -= 1
    return text[:end]


def _translate(pattern: str) -> str:
    """A gitignore glob (without the leading ``!`` or trailing ``/``) as a regex body."""
    out: list[str] = []
    index, length = 0, len(pattern)
    while index < length:
        char = pattern[index]
        if char == "*":
            stars = index
            while index < length and pattern[index] == "*":
                index += 1
            run = index - stars
            whole_segment = (stars == 0 or pattern[stars - 1] == "/") and (
                index == length or pattern[index] == "/"
            )
            if run == 2 and whole_segment:
                if index == length:
                    out.append(".*")  # "dir/**": everything inside
                else:
                    out.append("(?:.*/)?")  # "**/" and "/**/": zero or more folders
                    index += 1
            else:
                out.append("[^/]*")
            continue
        if char == "?":
            out.append("[^/]")
        elif char == "[":
            parsed = _character_class(pattern, index)
            if parsed is None:
                out.append(re.escape(char))
            else:
                regex, index = parsed
                out.append(regex)
                continue
        elif char == "\\" and index + 1 < length:
            index += 1
            out.append(re.escape(pattern[index]))
        else:
            out.append(re.escape(char))
        index += 1
    return "".join(out)


def _character_class(pattern: str, start: int) -> tuple[str, int] | None:
    """``[...]`` starting at ``start`` as a regex class and the index after it; None if open."""
    index = start + 1
    negate = index < len(pattern) and pattern[index] in "!^"
    if negate:
        index += 1
    members: list[str] = []
    first = True
    while index < len(pattern):
        char = pattern[index]
        if char == "]" and not first:
            body = "".join(members)
            return (f"[^/{body}]" if negate else f"(?!/)[{body}]"), index + 1
        if char == "\\" and index + 1 < len(pattern):
            index += 1
            members.append(re.escape(pattern[index]))
        else:
            members.append(re.escape(char) if char in "\\^[]" else char)
        first = False
        index += 1
    return None


__all__ = ["IGNORE_FILES", "IgnorePattern", "IgnoreRules", "compile_pattern", "parse_ignore_lines"]
