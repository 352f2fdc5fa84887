"""The statement index: every block, statement and function of a module, with original lines.

libcst and ``ast`` parse the same text into the same statements in the same order, with one
difference: libcst keeps ``a = 1; b = 2`` as one line holding two small statements, ``ast`` as two
statements. Walking both trees side by side pairs each libcst statement with its ``ast``
statement(s), so planning reads exact line spans from ``ast`` while the transform edits libcst
nodes by identity.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal

import libcst

from ncompass.errors import RewriteError
from ncompass.rewrite.source import SourceModule
from ncompass.spec.models import MODULE_LEVEL

ScopeKind = Literal["module", "function", "class"]
BlockOwner = libcst.Module | libcst.IndentedBlock | libcst.SimpleStatementSuite


@dataclass(eq=False)
class Statement:
    """One libcst statement line or compound statement, with its original line span.

    Attributes:
        node: The libcst statement (or small statement inside a one-line suite).
        ast_nodes: The ``ast`` statements it holds (several for ``a = 1; b = 2``).
        start: First line, decorators included.
        end: Last line.
        header_end: For compound statements, the line of the colon that opens the body
            (multi-line headers included); for simple statements, ``end``.
        blocks: The blocks of a compound statement (bodies, else, except, finally, cases).
        block: The block this statement is in.
    """

    node: libcst.CSTNode
    ast_nodes: list[ast.stmt]
    start: int
    end: int
    header_end: int
    block: Block
    blocks: list[Block] = field(default_factory=list)

    @property
    def is_compound(self) -> bool:
        """Whether the statement owns blocks (if, for, while, try, with, match, def, class)."""
        return bool(self.blocks)

    @property
    def first_ast(self) -> ast.stmt:
        """The first ``ast`` statement on this line."""
        return self.ast_nodes[0]


@dataclass(eq=False)
class Block:
    """A run of statements that execute in sequence: a body, an else, an except, a case.

    Attributes:
        owner: The libcst node whose ``body`` holds the statements.
        statements: The statements, in order.
        scope: The function, class or module the statements run in.
        label: What the block is, for messages ("for body", "else", "except", ...).
        header_line: The line of the header that opens the block (``else:``, ``except E:``);
            ``None`` for a module.
        parent: The compound statement that owns this block (``None`` for a module).
    """

    owner: BlockOwner
    statements: list[Statement]
    scope: Scope
    label: str
    header_line: int | None
    parent: Statement | None

    @property
    def inline(self) -> bool:
        """Whether the block is a one-line suite (``if x: y()``)."""
        return isinstance(self.owner, libcst.SimpleStatementSuite)

    @property
    def start(self) -> int:
        """The first line of the block's first statement."""
        return self.statements[0].start

    @property
    def end(self) -> int:
        """The last line of the block's last statement."""
        return self.statements[-1].end


@dataclass(eq=False)
class Scope:
    """A function, a class, or the module itself.

    Attributes:
        qualname: ``Class.method``, ``outer.inner`` (no ``<locals>``), or ``<module>``.
        kind: "function", "class" or "module".
        node: The libcst node (FunctionDef, ClassDef or Module).
        ast_node: The matching ``ast`` node.
        body: The block of the scope's own statements.
        statement: The ``def``/``class`` statement (``None`` for the module).
        parent: The enclosing scope.
        is_async: ``async def``.
        is_generator: The body yields (so ranges in it may be suspended mid-way).
    """

    qualname: str
    kind: ScopeKind
    node: libcst.CSTNode
    ast_node: ast.AST
    body: Block | None = None
    statement: Statement | None = None
    parent: Scope | None = None
    is_async: bool = False
    is_generator: bool = False

    @property
    def start(self) -> int:
        """First line of the definition (decorators included); 1 for the module."""
        return self.statement.start if self.statement is not None else 1

    @property
    def end(self) -> int:
        """Last line of the definition."""
        if self.statement is not None:
            return self.statement.end
        return self.body.end if self.body is not None and self.body.statements else 1

    @property
    def docstring(self) -> Statement | None:
        """The docstring statement, if the scope has one (it must stay first)."""
        if self.body is None or not self.body.statements:
            return None
        first = self.body.statements[0]
        node = first.first_ast
        if (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            return first
        return None


class StatementIndex:
    """All scopes, blocks and statements of one module, built once per rewrite."""

    def __init__(self, source: SourceModule) -> None:
        self.source = source
        self.scopes: dict[str, Scope] = {}
        self._parents: dict[int, libcst.CSTNode] = {}
        module_scope = Scope(MODULE_LEVEL, "module", source.cst, source.tree)
        self.scopes[MODULE_LEVEL] = module_scope
        module_scope.body = self._block(
            source.cst, source.cst.body, source.tree.body, module_scope, "module", None, None
        )

    @property
    def module(self) -> Scope:
        """The module scope."""
        return self.scopes[MODULE_LEVEL]

    def functions(self) -> list[Scope]:
        """Every function and method, in source order."""
        return [scope for scope in self.scopes.values() if scope.kind == "function"]

    def qualnames(self) -> list[str]:
        """Every function and class qualname (for suggestions)."""
        return [name for name, scope in self.scopes.items() if scope.kind != "module"]

    def ancestors(self, node: libcst.CSTNode) -> Iterator[libcst.CSTNode]:
        """The libcst nodes that contain ``node`` (statements, blocks, up to the module)."""
        current = self._parents.get(id(node))
        while current is not None:
            yield current
            current = self._parents.get(id(current))

    def statements(self, block: Block) -> Iterator[Statement]:
        """Every statement in ``block`` and its nested blocks, depth first."""
        for statement in block.statements:
            yield statement
            for child in statement.blocks:
                yield from self.statements(child)

    # -- building -----------------------------------------------------------------------------

    def _block(
        self,
        owner: BlockOwner,
        cst_statements: Sequence[libcst.CSTNode],
        ast_statements: list[ast.stmt],
        scope: Scope,
        label: str,
        header_line: int | None,
        parent: Statement | None,
        parent_node: libcst.CSTNode | None = None,
    ) -> Block:
        block = Block(owner, [], scope, label, header_line, parent)
        if parent is not None:
            # an elif's body hangs off the elif's own If node, not the statement's first If
            self._parents[id(owner)] = parent_node or parent.node
        position = 0
        for node in cst_statements:
            self._parents[id(node)] = owner
            width = len(node.body) if isinstance(node, libcst.SimpleStatementLine) else 1
            ast_nodes = ast_statements[position : position + width]
            position += width
            if len(ast_nodes) != width:
                raise RewriteError(f"{self.source.filename}: libcst and ast disagree on statements")
            block.statements.append(self._statement(node, ast_nodes, block))
        if position != len(ast_statements):
            raise RewriteError(f"{self.source.filename}: libcst and ast disagree on statements")
        return block

    def _statement(
        self, node: libcst.CSTNode, ast_nodes: list[ast.stmt], block: Block
    ) -> Statement:
        first = ast_nodes[0]
        start = min([first.lineno] + [d.lineno for d in getattr(first, "decorator_list", ())])
        end = max(n.end_lineno or n.lineno for n in ast_nodes)
        statement = Statement(node, ast_nodes, start, end, end, block)
        for child in self._child_blocks(node, first, statement, block.scope):
            statement.blocks.append(child)
        if statement.blocks:
            body = statement.blocks[0]
            statement.header_end = end if body.inline else self._line_before(body.start)
        return statement

    def _child_blocks(
        self, node: libcst.CSTNode, tree: ast.stmt, statement: Statement, scope: Scope
    ) -> Iterator[Block]:
        if isinstance(node, libcst.FunctionDef | libcst.ClassDef):
            assert isinstance(tree, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            inner = self._scope(node, tree, statement, scope)
            inner.body = self._body(node.body, tree.body, inner, f"{inner.kind} body", statement)
            yield inner.body
        elif isinstance(node, libcst.If):
            assert isinstance(tree, ast.If)
            yield from self._if_chain(node, tree, statement, scope, "if body")
        elif isinstance(node, libcst.For | libcst.While):
            assert isinstance(tree, ast.For | ast.AsyncFor | ast.While)
            kind = "for" if isinstance(node, libcst.For) else "while"
            yield self._body(node.body, tree.body, scope, f"{kind} body", statement)
            if node.orelse is not None:
                yield self._body(node.orelse.body, tree.orelse, scope, f"{kind} else", statement)
        elif isinstance(node, libcst.Try | libcst.TryStar):
            assert isinstance(tree, ast.Try) or type(tree).__name__ == "TryStar"
            try_tree: ast.Try = tree  # type: ignore[assignment]  # TryStar has the same fields
            yield self._body(node.body, try_tree.body, scope, "try body", statement)
            handlers: Sequence[libcst.ExceptHandler | libcst.ExceptStarHandler] = node.handlers
            for handler, tree_handler in zip(handlers, try_tree.handlers, strict=True):
                yield self._body(handler.body, tree_handler.body, scope, "except", statement)
            if node.orelse is not None:
                yield self._body(node.orelse.body, try_tree.orelse, scope, "try else", statement)
            if node.finalbody is not None:
                yield self._body(
                    node.finalbody.body, try_tree.finalbody, scope, "finally", statement
                )
        elif isinstance(node, libcst.With):
            assert isinstance(tree, ast.With | ast.AsyncWith)
            yield self._body(node.body, tree.body, scope, "with body", statement)
        elif isinstance(node, libcst.Match):
            assert isinstance(tree, ast.Match)
            for case, tree_case in zip(node.cases, tree.cases, strict=True):
                yield self._body(case.body, tree_case.body, scope, "case", statement)

    def _if_chain(
        self, node: libcst.If, tree: ast.If, statement: Statement, scope: Scope, label: str
    ) -> Iterator[Block]:
        yield self._body(node.body, tree.body, scope, label, statement, node)
        if isinstance(node.orelse, libcst.If):
            elif_tree = tree.orelse[0]
            assert isinstance(elif_tree, ast.If)
            self._parents[id(node.orelse)] = node
            yield from self._if_chain(node.orelse, elif_tree, statement, scope, "elif body")
        elif node.orelse is not None:
            yield self._body(node.orelse.body, tree.orelse, scope, "else", statement, node)

    def _body(
        self,
        suite: libcst.BaseSuite,
        tree_body: list[ast.stmt],
        scope: Scope,
        label: str,
        statement: Statement,
        parent_node: libcst.CSTNode | None = None,
    ) -> Block:
        assert isinstance(suite, libcst.IndentedBlock | libcst.SimpleStatementSuite)
        contents: Sequence[libcst.CSTNode] = suite.body
        first_line = tree_body[0].lineno if tree_body else statement.start
        header = self._line_before(first_line) if isinstance(suite, libcst.IndentedBlock) else None
        block = self._block(
            suite, contents, tree_body, scope, label, header, statement, parent_node
        )
        if header is None:
            block.header_line = block.start
        return block

    def _scope(
        self,
        node: libcst.FunctionDef | libcst.ClassDef,
        tree: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef,
        statement: Statement,
        parent: Scope,
    ) -> Scope:
        prefix = "" if parent.kind == "module" else f"{parent.qualname}."
        qualname = f"{prefix}{node.name.value}"
        is_function = isinstance(node, libcst.FunctionDef)
        scope = Scope(
            qualname,
            "function" if is_function else "class",
            node,
            tree,
            statement=statement,
            parent=parent,
            is_async=is_function and node.asynchronous is not None,  # type: ignore[union-attr]
            is_generator=is_function and _yields(tree),
        )
        # A name defined twice (e.g. under `if TYPE_CHECKING`) keeps its first definition.
        self.scopes.setdefault(qualname, scope)
        return scope

    def _line_before(self, line: int) -> int:
        """The last line before ``line`` that holds code (skipping blank and comment lines)."""
        current = line - 1
        while current > 1:
            text = self.source.line(current).strip()
            if text and not text.startswith("#"):
                break
            current -= 1
        return current


def _yields(function: ast.AST) -> bool:
    """Whether a function's own body (not nested functions or classes) yields."""
    stack: list[ast.AST] = list(ast.iter_child_nodes(function))
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Yield | ast.YieldFrom):
            return True
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            continue
        stack.extend(ast.iter_child_nodes(node))
    return False


__all__ = ["Block", "Scope", "Statement", "StatementIndex"]
