"""Find what a marker names: functions by qualname or glob, the function a marker is ``in``, and
the statements that call something.

Every lookup that finds nothing raises an error that lists the closest existing names, because a
marker that silently matches nothing is the most expensive mistake in profiling: the run looks
fine and the time is simply missing.
"""

from __future__ import annotations

import ast
import difflib
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache

from ncompass.rewrite.statements import Block, Scope, Statement, StatementIndex
from ncompass.spec.models import MODULE_LEVEL


class LookupFailure(Exception):
    """A marker names nothing (or something ambiguous); the planner adds the spec file and line."""


def normalize_qualname(qualname: str) -> str:
    """``outer.<locals>.inner`` (Python's ``__qualname__``) → ``outer.inner`` (spec form)."""
    return qualname.replace(".<locals>", "")


def is_glob(pattern: str) -> bool:
    """Whether a qualname is a glob pattern."""
    return any(ch in pattern for ch in "*?[")


@lru_cache(maxsize=256)
def _glob_regex(pattern: str) -> re.Pattern[str]:
    """``*`` matches within one dotted segment, ``**`` across segments, ``?`` one character."""
    parts: list[str] = []
    index = 0
    while index < len(pattern):
        if pattern.startswith("**", index):
            parts.append(".*")
            index += 2
        elif pattern[index] == "*":
            parts.append(r"[^.]*")
            index += 1
        elif pattern[index] == "?":
            parts.append(r"[^.]")
            index += 1
        elif pattern[index] == "[":
            close = pattern.find("]", index)
            if close == -1:
                parts.append(re.escape(pattern[index]))
                index += 1
            else:
                parts.append(pattern[index : close + 1])
                index = close + 1
        else:
            parts.append(re.escape(pattern[index]))
            index += 1
    return re.compile("".join(parts) + r"\Z")


def closest(name: str, candidates: Iterable[str], limit: int = 5) -> list[str]:
    """The candidates most like ``name``, best first (suffix matches count too)."""
    pool = sorted(set(candidates))
    close = difflib.get_close_matches(name, pool, n=limit, cutoff=0.5)
    tail = name.rsplit(".", 1)[-1]
    for candidate in pool:
        if len(close) >= limit:
            break
        if candidate not in close and candidate.rsplit(".", 1)[-1] == tail:
            close.append(candidate)
    return close


def _suggestion(name: str, candidates: Iterable[str], what: str) -> str:
    close = closest(name, candidates)
    if close:
        return f"; closest {what}: {', '.join(close)}"
    return f"; no {what} exist" if not list(candidates) else ""


def match_functions(index: StatementIndex, pattern: str) -> list[Scope]:
    """The functions and methods a ``functions:`` qualname (exact or glob) names.

    Raises:
        LookupFailure: nothing matches, or the name is a class.
    """
    wanted = normalize_qualname(pattern)
    functions = index.functions()
    if is_glob(wanted):
        regex = _glob_regex(wanted)
        matched = [scope for scope in functions if regex.match(scope.qualname)]
        if not matched:
            names = [scope.qualname for scope in functions]
            raise LookupFailure(
                f"glob {pattern!r} matches no function in {index.source.label}"
                + _suggestion(wanted, names, "functions")
            )
        return matched
    scope = index.scopes.get(wanted)
    if scope is not None and scope.kind == "function":
        return [scope]
    if scope is not None and scope.kind == "class":
        raise LookupFailure(
            f"{pattern!r} is a class in {index.source.label}; name its methods "
            f"('{wanted}.forward') or all of them ('{wanted}.*')"
        )
    raise LookupFailure(
        f"no function {pattern!r} in {index.source.label}"
        + _suggestion(wanted, [s.qualname for s in functions], "functions")
    )


def find_scope(index: StatementIndex, name: str) -> Scope:
    """The function (or ``<module>``) an ``in:`` names: exact qualname, else a unique suffix.

    Raises:
        LookupFailure: nothing or several functions match, or the name is a class.
    """
    if name == MODULE_LEVEL:
        return index.module
    wanted = normalize_qualname(name)
    scope = index.scopes.get(wanted)
    if scope is not None:
        if scope.kind == "class":
            raise LookupFailure(
                f"{name!r} is a class in {index.source.label}; markers go inside a function "
                f"(e.g. '{wanted}.__init__') or at module level ('{MODULE_LEVEL}')"
            )
        return scope
    suffix = "." + wanted
    candidates = [s for s in index.functions() if s.qualname.endswith(suffix)]
    if len(candidates) == 1:
        return candidates[0]
    if len(candidates) > 1:
        names = ", ".join(s.qualname for s in candidates)
        raise LookupFailure(
            f"{name!r} is ambiguous in {index.source.label}: {names}; use one of them"
        )
    raise LookupFailure(
        f"no function {name!r} in {index.source.label}"
        + _suggestion(wanted, [s.qualname for s in index.functions()] + [MODULE_LEVEL], "functions")
    )


@dataclass(frozen=True)
class CallSite:
    """A statement that calls the marker's callee.

    Attributes:
        statement: The statement to wrap.
        line: The line of the (first) matching call.
        in_header: The call is in a compound statement's header (``for x in f():``) or in a
            one-line suite: the calls themselves are wrapped, not the statement.
        calls: For ``in_header`` sites, every matching call the header evaluates.
        awaited: Which of ``calls`` are the operand of an ``await`` (by ``id``).
    """

    statement: Statement
    line: int
    in_header: bool
    calls: tuple[ast.Call, ...] = ()
    awaited: frozenset[int] = frozenset()


def find_calls(
    index: StatementIndex, scope: Scope, callee: str, table: ScopeCalls | None = None
) -> list[CallSite]:
    """The statements of ``scope`` (not of nested functions) that call ``callee``.

    ``callee`` is the callee as written (``self.qkv_proj``); a bare name (``qkv_proj``) also
    matches the last segment of a dotted callee.

    Args:
        index: The module's statements.
        scope: The function (or class, or module) to look in.
        callee: The callee as the spec writes it.
        table: The calls of ``scope`` found before (:class:`ScopeCalls`); pass it when looking
            up many callees in one scope, so its code is walked once, not once per callee.

    Raises:
        LookupFailure: no statement calls it; the message lists the callees that do exist.
    """
    wanted = callee.replace(" ", "")
    bare = "." not in wanted
    table = table if table is not None and table.scope is scope else ScopeCalls(scope)
    sites: list[CallSite] = []
    for position in (table.by_last_segment if bare else table.by_callee).get(wanted, ()):
        statement, expressions, in_header, calls = table.statements[position]
        matching: list[ast.Call] = []
        for call, text in calls:
            if text == wanted or (bare and text.rsplit(".", 1)[-1] == wanted):
                matching.append(call)
                if not in_header:
                    break
        if in_header:
            awaited = frozenset(id(call) for call in _awaited(expressions) if call in matching)
            sites.append(CallSite(statement, matching[0].lineno, True, tuple(matching), awaited))
        else:
            sites.append(CallSite(statement, matching[0].lineno, False))
    if not sites:
        raise LookupFailure(
            f"no call to {callee!r} in {scope.qualname} of {index.source.label}"
            + _suggestion(wanted, table.callees, "callees")
        )
    return sites


class ScopeCalls:
    """The calls each of a scope's own statements makes, with their callees, found once.

    Attributes:
        scope: The scope.
        statements: Per statement of the scope (as :func:`_own_statements` yields them): the
            statement, its expressions, whether they are a compound statement's header, and
            its calls with the callee text, in the order they are evaluated.
        by_callee: Callee text -> the positions in ``statements`` that call it, in order.
        by_last_segment: The same by the callee's last dotted segment (``qkv_proj``).
        callees: Every callee text seen (what a failed lookup suggests from).
    """

    def __init__(self, scope: Scope) -> None:
        assert scope.body is not None
        self.scope = scope
        self.statements: list[
            tuple[Statement, list[ast.AST], bool, list[tuple[ast.Call, str]]]
        ] = []
        self.by_callee: dict[str, list[int]] = {}
        self.by_last_segment: dict[str, list[int]] = {}
        self.callees: set[str] = set()
        for statement, expressions, in_header in _own_statements(scope.body):
            calls = [(call, text) for call in _calls(expressions) if (text := _callee_text(call))]
            position = len(self.statements)
            self.statements.append((statement, expressions, in_header, calls))
            for _, text in calls:
                self.callees.add(text)
                for table, key in (
                    (self.by_callee, text),
                    (self.by_last_segment, text.rsplit(".", 1)[-1]),
                ):
                    positions = table.setdefault(key, [])
                    if not positions or positions[-1] != position:
                        positions.append(position)


def _own_statements(block: Block) -> Iterator[tuple[Statement, list[ast.AST], bool]]:
    """Each statement of a scope with the expressions it evaluates itself.

    Compound statements contribute their header expressions (``in_header``); their bodies are
    visited as statements of their own. Nested functions and classes are other scopes.
    """
    for statement in block.statements:
        node = statement.first_ast
        if not statement.is_compound:
            yield statement, list(statement.ast_nodes), False
            continue
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        yield statement, _header_expressions(node), True
        for child in statement.blocks:
            if not child.inline:
                yield from _own_statements(child)
            else:
                # a one-line suite runs as part of its header line's statement
                yield statement, [n for s in child.statements for n in s.ast_nodes], True


def _header_expressions(node: ast.stmt) -> list[ast.AST]:
    if isinstance(node, ast.If):
        return [node.test, _elif_tests(node)]
    if isinstance(node, ast.While):
        return [node.test]
    if isinstance(node, ast.For | ast.AsyncFor):
        return [node.iter]
    if isinstance(node, ast.With | ast.AsyncWith):
        return [item.context_expr for item in node.items]
    if isinstance(node, ast.Match):
        return [node.subject]
    if isinstance(node, ast.Try):
        return [h.type for h in node.handlers if h.type is not None]
    return []


def _elif_tests(node: ast.If) -> ast.AST:
    tests: list[ast.expr] = []
    current = node
    while len(current.orelse) == 1 and isinstance(current.orelse[0], ast.If):
        current = current.orelse[0]
        tests.append(current.test)
    return ast.Tuple(elts=tests, ctx=ast.Load())


def _calls(expressions: list[ast.AST]) -> Iterator[ast.Call]:
    """Calls evaluated by these expressions (not those inside lambdas, which run later)."""
    stack = list(reversed(expressions))
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Lambda | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        if isinstance(node, ast.Call):
            yield node
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


def _awaited(expressions: list[ast.AST]) -> Iterator[ast.Call]:
    """Calls that are directly the operand of ``await``."""
    for expression in expressions:
        for node in ast.walk(expression):
            if isinstance(node, ast.Await) and isinstance(node.value, ast.Call):
                yield node.value


def _callee_text(call: ast.Call) -> str | None:
    """``self.qkv_proj`` for ``self.qkv_proj(x)``; None for callees that are not dotted names."""
    name = dotted_name(call.func)
    if name is None and isinstance(call.func, ast.Attribute):
        # e.g. `super().forward(x)` or `self.layers[0](x)`: fall back to the written text
        return ast.unparse(call.func).replace(" ", "")
    return name


def dotted_name(node: ast.AST) -> str | None:
    """``a.b.c`` for an attribute chain on a name, else None."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


__all__ = [
    "CallSite",
    "LookupFailure",
    "ScopeCalls",
    "closest",
    "dotted_name",
    "find_calls",
    "find_scope",
    "is_glob",
    "match_functions",
    "normalize_qualname",
]
