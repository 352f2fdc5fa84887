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
import difflib
import re
from dataclasses import dataclass, field
from types import CodeType

from ncompass.errors import RewriteError
from ncompass.rewrite.source import SourceModule
from ncompass.rewrite.transform import TAG_PREFIX

# "#@ncompass:LINE" marks a generated line; "#@ncompass:LINE:COLUMN" an original statement moved
# to a line of its own (its text starts at COLUMN of LINE in the original).
_TAG = re.compile(re.escape(TAG_PREFIX) + r"(\d+)(?::(\d+))?$")
# The prefix a header call marker puts before the callee: `_ncompass_call_3_1(`.
_CALL_HELPER = re.compile(rb"_ncompass_a?call_\d+(?:_\d+)?\s*\(\s*")


@dataclass(frozen=True)
class ColumnMap:
    """Byte columns of an original line whose text the rewriter changed inside the line (a
    header call wrapped in its helper, a replaced name): for every byte column of the rewritten
    line, the original column where a node starting (``starts``) or ending (``ends``) there
    starts or ends. Inserted text maps to the original text next to it."""

    starts: tuple[int, ...]
    ends: tuple[int, ...]


@dataclass(frozen=True)
class LineMap:
    """For each rewritten line (index 1..n), the original line and the indentation it gained.

    ``shift[i]`` is ``None`` for generated lines: their columns have no original counterpart, so
    their nodes span the whole original line (``span[i]``) in tracebacks. ``columns[i]`` exists
    for original lines changed inside the line, where a shift is not enough.
    """

    original: list[int]
    shift: list[int | None]
    span: list[tuple[int, int]]
    columns: dict[int, ColumnMap] = field(default_factory=dict)

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
    columns: dict[int, ColumnMap] = {}
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
        if text.lstrip(" \t") != before.rstrip("\r\n").lstrip(" \t"):
            columns[len(original) - 1] = _column_map(text.encode(), before.encode())
    if counter != len(source.lines):
        raise RewriteError(
            f"{source.filename}: internal error: rewritten lines do not map back to the original "
            f"({counter} untagged lines for {len(source.lines)} original lines)"
        )
    return LineMap(original, shift, span, columns)


def _column_map(rewritten: bytes, before: bytes) -> ColumnMap:
    """Align a changed line with its original, byte by byte.

    A header call helper's prefix (``_ncompass_call_3_1(``) is taken out first: ``H(f, x)``
    then aligns with ``f(x)`` callee to callee, and the helper's span becomes the call's.
    """
    kept = bytearray(b"\x01") * len(rewritten)
    for match in _CALL_HELPER.finditer(rewritten):
        kept[match.start() : match.end()] = bytes(match.end() - match.start())
    filtered = bytes(byte for byte, keep in zip(rewritten, kept, strict=True) if keep)
    starts = [len(before)] * (len(filtered) + 1)  # filtered column -> original start column
    ends = [0] * (len(filtered) + 1)  # filtered exclusive end -> original exclusive end
    matcher = difflib.SequenceMatcher(None, filtered, before, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        for i in range(i1, i2):
            starts[i] = j1 + (i - i1) if tag == "equal" else j1
            ends[i + 1] = j1 + (i - i1) + 1 if tag == "equal" else j2
    counted = [0] * (len(rewritten) + 1)  # rewritten column -> kept bytes before it
    for column, keep in enumerate(kept):
        counted[column + 1] = counted[column] + keep
    return ColumnMap(
        tuple(starts[count] for count in counted), tuple(ends[count] for count in counted)
    )


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
    original, shift, span, columns = mapping.original, mapping.shift, mapping.span, mapping.columns
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
        if start in columns or end in columns:
            _map_columns(node, columns.get(start), columns.get(end), delta, end_delta)
            continue
        if delta is None or end_delta is None:
            # generated code: point at the whole original line it stands for
            node.col_offset, node.end_col_offset = span[start]  # type: ignore[attr-defined]
            continue
        node.col_offset = max(0, node.col_offset - delta)  # type: ignore[attr-defined]
        if getattr(node, "end_col_offset", None) is not None:
            node.end_col_offset = max(0, node.end_col_offset - end_delta)  # type: ignore[attr-defined]


def _map_columns(
    node: ast.AST,
    start_map: ColumnMap | None,
    end_map: ColumnMap | None,
    delta: int | None,
    end_delta: int | None,
) -> None:
    """Columns of a node on a line changed inside the line (the other end may be on a plain
    line of a multi-line node, where the indentation shift applies)."""
    column: int = node.col_offset  # type: ignore[attr-defined]
    if start_map is not None:
        node.col_offset = start_map.starts[min(column, len(start_map.starts) - 1)]  # type: ignore[attr-defined]
    elif delta is not None:
        node.col_offset = max(0, column - delta)  # type: ignore[attr-defined]
    end: int | None = getattr(node, "end_col_offset", None)
    if end is None:
        return
    if end_map is not None:
        node.end_col_offset = end_map.ends[min(end, len(end_map.ends) - 1)]  # type: ignore[attr-defined]
    elif end_delta is not None:
        node.end_col_offset = max(0, end - end_delta)  # type: ignore[attr-defined]
    start_col, end_col = getattr(node, "col_offset", 0), getattr(node, "end_col_offset", 0)
    if getattr(node, "lineno", 0) == getattr(node, "end_lineno", 0) and end_col < start_col:
        node.end_col_offset = start_col  # type: ignore[attr-defined]  # inserted text only


__all__ = ["ColumnMap", "LineMap", "build_line_map", "compile_with_original_lines", "strip_tags"]
