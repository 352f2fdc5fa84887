"""How many times a statement runs, as far as the code says: the turns of the loops around it.

A marker costs a range in the trace each time its statement runs. On a statement inside
``for i in range(200000)`` that is 200,000 ranges (a 51 MB trace, and minutes of analysis) to
time something the loop's own marker times as well. The planner therefore weighs each
statement by an estimate of its runs, the product of the turns of the ``for`` loops around it
(and the runs of the function it is in), and marks the loop instead of a statement run more
than :data:`MAX_MARKED_RUNS` times. Turns are counted where the code states them: a ``range``
of constants, a literal list, tuple, set or string (through ``enumerate``, ``reversed`` or
``zip``); any other loop counts as one turn (unknown: marked as before).
"""

from __future__ import annotations

import ast
import operator
import sys
from collections.abc import Callable

from ncompass.rewrite.statements import Statement

MAX_MARKED_RUNS = 10_000
"""Most runs a statement may have to be marked: 10,000 ranges are a few MB of trace."""

_OPERATORS: dict[type[ast.operator], Callable[[int, int], int]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
}
_PASSING = ("enumerate", "reversed", "sorted", "list", "tuple")


def loop_turns(node: ast.AST) -> int | None:
    """The turns of a ``for`` loop, when its iterable states them; None otherwise."""
    if not isinstance(node, ast.For | ast.AsyncFor):
        return None
    return _length(node.iter)


def runs_inside(statement: Statement, runs: int = 1) -> int:
    """The estimated runs of ``statement`` when its function runs ``runs`` times."""
    total = runs
    block = statement.block
    while block.parent is not None and block.scope is statement.block.scope:
        if block.label == "for body":
            total *= loop_turns(block.parent.first_ast) or 1
        block = block.parent.block
    return total


def outside_busy_loops(statement: Statement, runs: int = 1) -> Statement:
    """``statement``, or the innermost ``for`` loop around it that runs at most
    :data:`MAX_MARKED_RUNS` times (the outermost loop when none does)."""
    chosen = statement
    while runs_inside(chosen, runs) > MAX_MARKED_RUNS:
        owner = chosen.block.parent
        if owner is None or owner.block.scope is not chosen.block.scope:  # not out of its def
            break
        chosen = owner
    return chosen


def _length(node: ast.expr) -> int | None:
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        if any(isinstance(item, ast.Starred) for item in node.elts):
            return None
        return len(node.elts)
    if isinstance(node, ast.Constant) and isinstance(node.value, str | bytes):
        return len(node.value)
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name) or node.keywords:
        return None
    name = node.func.id
    if name == "range" and 1 <= len(node.args) <= 3:
        bounds = [_constant(arg) for arg in node.args]
        known = [bound for bound in bounds if bound is not None]
        if len(known) < len(bounds) or (len(known) == 3 and known[2] == 0):
            return None
        try:
            return len(range(*known))
        except OverflowError:  # more turns than an index holds: busy beyond doubt
            return sys.maxsize
    if name in _PASSING and len(node.args) == 1:
        return _length(node.args[0])
    if name == "zip" and node.args:
        lengths = [_length(arg) for arg in node.args]
        known = [length for length in lengths if length is not None]
        return min(known) if known else None
    return None


def _constant(node: ast.expr) -> int | None:
    """The value of an integer expression of constants (``200_000``, ``2 * 10 ** 5``)."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = _constant(node.operand)
        return None if value is None else -value
    if isinstance(node, ast.BinOp):
        left, right = _constant(node.left), _constant(node.right)
        if left is None or right is None:
            return None
        if isinstance(node.op, ast.Pow):
            # bounded: a loop bound, not a way to make the planner compute 10 ** 10 ** 10
            return left**right if 0 <= right <= 64 and abs(left) <= 1 << 16 else None
        apply = _OPERATORS.get(type(node.op))
        if apply is None or (isinstance(node.op, ast.FloorDiv) and right == 0):
            return None
        return apply(left, right)
    return None


__all__ = ["MAX_MARKED_RUNS", "loop_turns", "outside_busy_loops", "runs_inside"]
