"""Compile rewritten source so that it reports the original file, lines and columns.

The rewritten text has more lines than the original. Every line the rewriter added ends with a
``#@ncompass:N`` tag naming the original line it stands for; every other line is an original
line, in order (re-indented at most). Walking the lines once gives the map; the ``ast`` of the
rewritten text then gets original line numbers (and columns, undoing re-indentation) before it
is compiled under the original file name. Tracebacks, ``inspect.getsource``, ``linecache`` and
coverage then all see the user's file as it is on disk.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from types import CodeType

from ncompass.errors import RewriteError
from ncompass.rewrite.source import SourceModule
from ncompass.rewrite.transform import TAG_PREFIX

# "#@ncompass:LINE" marks a generated line; "#@ncompass:LINE:COLUMN" an original statement moved
# to a line of its own (its text starts at COLUMN of LINE in the original).
_TAG = re.compile(re.escape(TAG_PREFIX) + r"(\d+)(?::(\d+))?$")


@dataclass(frozen=True)
class LineMap:
    """For each rewritten line (index 1..n), the original line and the indentation it gained.

    ``shift[i]`` is ``None`` for generated lines: their columns have no original counterpart, so
    their nodes span the whole original line (``span[i]``) in tracebacks.
    """

    original: list[int]
    shift: list[int | None]
    span: list[tuple[int, int]]

    def __len__(self) -> int:
        return len(self.original) - 1


def build_line_map(rewritten: str, source: SourceModule) -> LineMap:
    """Map each line of ``rewritten`` to its line in ``source``.

    Raises:
        RewriteError: if untagged lines do not line up with the original (a bug, never silent).
    """
    original: list[int] = [0]
    shift: list[int | None] = [None]
    span: list[tuple[int, int]] = [(0, 0)]
    counter = 0
    lines = rewritten.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for text in lines:
        match = _TAG.search(text)
        if match is not None:
            line = int(match.group(1))
            before = source.line(line)
            original.append(line)
            column = match.group(2)
            shift.append(None if column is None else _indent(text) - int(column))
            span.append((_indent(before), len(before.rstrip().encode())))
            continue
        counter += 1
        original.append(counter)
        before = source.line(counter)
        shift.append(_indent(text) - _indent(before))
        span.append((0, 0))
    if counter != len(source.lines):
        raise RewriteError(
            f"{source.filename}: internal error: rewritten lines do not map back to the original "
            f"({counter} untagged lines for {len(source.lines)} original lines)"
        )
    return LineMap(original, shift, span)


def _indent(text: str) -> int:
    return len(text) - len(text.lstrip(" \t"))


def strip_tags(rewritten: str) -> str:
    """The rewritten source as users should read it (tags removed)."""
    return "\n".join(
        _TAG.sub("", line).rstrip() if _TAG.search(line) else line for line in rewritten.split("\n")
    )


def compile_with_original_lines(
    rewritten: str, source: SourceModule, line_map: LineMap | None = None
) -> CodeType:
    """Compile ``rewritten`` so its code objects carry ``source``'s file name and line numbers.

    Raises:
        RewriteError: if the rewritten source does not compile (a bug in a rewrite rule).
    """
    mapping = line_map or build_line_map(rewritten, source)
    try:
        tree = ast.parse(rewritten, filename=source.filename)
    except SyntaxError as error:
        raise RewriteError(
            f"{source.filename}: internal error: rewritten source does not parse at its line "
            f"{error.lineno}: {error.msg}"
        ) from None
    _restore_positions(tree, mapping)
    try:
        return compile(tree, source.filename, "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as error:
        raise RewriteError(
            f"{source.filename}: internal error: cannot compile rewrite: {error}"
        ) from None


def _restore_positions(tree: ast.AST, mapping: LineMap) -> None:
    original, shift, span = mapping.original, mapping.shift, mapping.span
    last = len(original) - 1
    for node in ast.walk(tree):
        lineno = getattr(node, "lineno", None)
        if lineno is None:
            continue
        start = min(lineno, last)
        end = min(getattr(node, "end_lineno", None) or lineno, last)
        node.lineno = original[start]  # type: ignore[attr-defined]
        node.end_lineno = max(original[end], node.lineno)  # type: ignore[attr-defined]
        if not hasattr(node, "col_offset"):
            continue
        delta, end_delta = shift[start], shift[end]
        if delta is None or end_delta is None:
            # generated code: point at the whole original line it stands for
            node.col_offset, node.end_col_offset = span[start]  # type: ignore[attr-defined]
            continue
        node.col_offset = max(0, node.col_offset - delta)  # type: ignore[attr-defined]
        if getattr(node, "end_col_offset", None) is not None:
            node.end_col_offset = max(0, node.end_col_offset - end_delta)  # type: ignore[attr-defined]


__all__ = ["LineMap", "build_line_map", "compile_with_original_lines", "strip_tags"]
