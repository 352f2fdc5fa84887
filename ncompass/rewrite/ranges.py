"""Line ranges → the run of whole statements of one block they cover.

The rules (docs/specs.md, "Rules"): a range covers whole statements of one block; one that starts or
ends inside a multi-line statement is widened to it; one that would cross a block boundary
(starts in a loop body, ends after the loop) is an error, never a silent restructuring. A range
that starts on a block's own header line (``else:``, ``except E:``, ``case x:``) means that
block's statements. When the file changed since the spec was written, anchors (the stripped text
of the first and last line) find the range again.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass

from ncompass.rewrite.locate import LookupFailure
from ncompass.rewrite.source import SourceModule
from ncompass.rewrite.statements import Block, Scope, Statement


@dataclass(frozen=True)
class StatementRun:
    """Statements ``first..last`` (indices, inclusive) of ``block``."""

    block: Block
    first: int
    last: int

    @property
    def statements(self) -> list[Statement]:
        """The statements of the run."""
        return self.block.statements[self.first : self.last + 1]

    @property
    def start(self) -> int:
        """First original line covered."""
        return self.block.statements[self.first].start

    @property
    def end(self) -> int:
        """Last original line covered."""
        return self.block.statements[self.last].end


@dataclass(frozen=True)
class Relocation:
    """Where a range's lines are now, and why they moved (for a warning)."""

    start: int
    end: int
    note: str | None = None


def relocate(
    source: SourceModule,
    scope: Scope,
    lines: tuple[int, int],
    first: str | None,
    last: str | None,
    drifted: bool,
) -> Relocation:
    """Check a range's anchors and, when the file drifted, find the range again by them.

    Args:
        source: The current source.
        scope: The function the range is in.
        lines: The spec's (start, end) lines.
        first: Anchor text of the first line (stripped), if given.
        last: Anchor text of the last line, if given.
        drifted: The file's sha256 differs from the spec's.

    Raises:
        LookupFailure: a drifted file without anchors, or anchors that match nowhere.
    """
    start, end = lines
    if first is None and last is None:
        if drifted:
            raise LookupFailure(
                f"{source.filename} changed since the spec was written (sha256 differs) and "
                f"lines {start}-{end} have no anchors; add 'first'/'last' anchors or update "
                "'lines' and 'sha256'"
            )
        return Relocation(start, end)
    if _matches(source, start, first) and _matches(source, end, last):
        return Relocation(start, end)
    starts = [start] if first is None else _candidates(source, scope, first, start, scope.start)
    if not starts:
        raise LookupFailure(
            f"anchor first={first!r} is not in {scope.qualname} of {source.filename}; the code "
            "changed: update the range's lines and anchors"
        )
    # the first line nearest the old one whose last anchor follows it: a file that shrank may
    # put a later block's first line (`residual = hidden_states` twice) nearer the old place
    for new_start in starts:
        expected_end = new_start + (end - start)
        if last is None:
            new_end: int | None = expected_end
        else:
            ends = _candidates(source, scope, last, expected_end, new_start)
            new_end = ends[0] if ends else None
        if new_end is not None:
            break
    else:
        raise LookupFailure(
            f"anchor last={last!r} is not in {scope.qualname} of {source.filename} after line "
            f"{starts[0]}; the code changed: update the range's lines and anchors"
        )
    why = "the file changed" if drifted else "the lines no longer match the anchors"
    return Relocation(
        new_start, new_end, f"lines {start}-{end} moved to {new_start}-{new_end} ({why})"
    )


def _matches(source: SourceModule, line: int, anchor: str | None) -> bool:
    return anchor is None or source.line(line).strip() == anchor.strip()


def _candidates(
    source: SourceModule, scope: Scope, anchor: str, near: int, lowest: int
) -> list[int]:
    """The lines of ``scope`` at or after ``lowest`` whose text is ``anchor``, nearest ``near``
    first."""
    wanted = anchor.strip()
    found = [
        line
        for line in range(max(lowest, scope.start), scope.end + 1)
        if source.line(line).strip() == wanted
    ]
    return sorted(found, key=lambda line: (abs(line - near), line))


def resolve_lines(scope: Scope, start: int, end: int) -> StatementRun:
    """The statements of ``scope`` that lines ``start..end`` cover.

    Raises:
        LookupFailure: the lines are outside the function, cover no statement, cross a block
            boundary, or belong to a nested function or class.
    """
    body = scope.body
    assert body is not None
    if scope.kind == "function":
        lowest, highest = body.header_line or body.start, scope.end
        if start <= lowest or end > highest:
            raise LookupFailure(
                f"lines {start}-{end} are outside the body of {scope.qualname} "
                f"(lines {lowest + 1}-{highest}); to wrap the whole function use a "
                "'functions:' marker"
            )
    return _resolve(body, start, end, scope)


def _resolve(block: Block, start: int, end: int, scope: Scope) -> StatementRun:
    # A block's statements follow each other, so their first and last lines both only grow:
    # two binary searches find the run lines start..end touch (a scan of the block, for each of
    # 19k ranges in one function, took a minute).
    statements = block.statements
    first = bisect_left(statements, start, key=lambda statement: statement.end)
    last = bisect_right(statements, end, key=lambda statement: statement.start) - 1
    if first > last:
        raise LookupFailure(f"lines {start}-{end} hold no statement (only blank lines or comments)")
    head = block.statements[first]
    if head.is_compound and start > head.header_end:
        # The range starts inside one of the statement's blocks.
        child = _child_at(head, start)
        if last != first or end > child.end:
            raise LookupFailure(
                f"lines {start}-{end} cross a block boundary: they start inside the "
                f"{child.label} of the statement at line {head.start} and end after it; "
                f"use lines {max(start, child.start)}-{child.end} for statements inside it, "
                f"or {head.start}-{max(end, head.end)} to include the whole statement"
            )
        if child.scope is not scope:
            raise LookupFailure(
                f"lines {start}-{end} are inside {child.scope.kind} {child.scope.qualname}; "
                f"use in: {child.scope.qualname}"
            )
        if child.inline:
            return StatementRun(block, first, first)
        return _resolve(child, max(start, child.start), end, scope)
    return StatementRun(block, first, last)


def _child_at(statement: Statement, line: int) -> Block:
    """The block of ``statement`` whose region (header line to last line) holds ``line``."""
    chosen = statement.blocks[0]
    for block in statement.blocks:
        if block.header_line is not None and block.header_line <= line:
            chosen = block
    return chosen


__all__ = ["Relocation", "StatementRun", "relocate", "resolve_lines"]
