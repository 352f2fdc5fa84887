"""Plan ``replace:`` entries: swap a class, function, method or a name the module uses.

A name the module *defines* (``Attention``, ``Attention.forward``) is rebound right after its
definition. A name the module *uses* is matched as written (``F.conv2d``) or by what its
imports make it (``torch.nn.functional.conv2d`` when the module did
``import torch.nn.functional as F``; ``torch.nn.Conv2d`` for ``nn.Conv2d`` after
``from torch import nn``): dotted reads are replaced where they occur, bare names imported at
module level (``from torch.nn import Conv2d``) are rebound after their import, and builtins are
shadowed for the whole module.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ncompass.rewrite.locate import LookupFailure, closest, dotted_name
from ncompass.rewrite.statements import Block, StatementIndex
from ncompass.spec.models import Replacement


@dataclass(frozen=True)
class DefinitionSwap:
    """Rebind ``name`` after statement ``index`` of ``block`` (``index < 0``: in the prologue).

    ``name`` may be dotted (``Attention.forward``): its last part is rebound in the block.
    """

    block: Block
    index: int
    name: str
    module: str
    attribute: str


@dataclass(frozen=True)
class ReferenceSwap:
    """Replace every read of dotted ``written`` names by the module global ``helper``.

    Attributes:
        name: The name as the spec gives it.
        written: The dotted forms that mean it in this module (``F.conv2d``, ...).
        statements: The libcst statements that read one of them.
    """

    name: str
    written: tuple[str, ...]
    module: str
    attribute: str
    statements: tuple[Any, ...]
    helper: str


def plan_replacement(
    index: StatementIndex, replacement: Replacement, first_helper: int
) -> tuple[list[DefinitionSwap], list[ReferenceSwap]]:
    """The swaps that carry out one ``replace:`` entry.

    Raises:
        LookupFailure: the name is neither defined nor used in the module.
    """
    module, _, attribute = replacement.with_.partition(":")
    name = replacement.name
    definition = _definition(index, name)
    if definition is not None:
        block, position = definition
        return [DefinitionSwap(block, position, name, module, attribute)], []
    aliases = import_aliases(index.source.tree)
    reads = dotted_reads(index.source.tree)
    written = sorted(read for read in reads if read == name or canonical(read, aliases) == name)
    body = index.module.body
    assert body is not None
    definitions: list[DefinitionSwap] = []
    dotted = [form for form in written if "." in form]
    for bare in (form for form in written if "." not in form):
        binding = _global_import(index, bare)
        # a builtin (or a global bound some other way) is shadowed for the whole module
        position = binding if binding is not None else -1
        definitions.append(DefinitionSwap(body, position, bare, module, attribute))
    if not written:
        if "." not in name and _global_import(index, name) is not None:
            binding = _global_import(index, name)
            assert binding is not None
            return [DefinitionSwap(body, binding, name, module, attribute)], []
        close = closest(name, index.qualnames() + sorted(reads))
        hint = f"; closest: {', '.join(close)}" if close else ""
        raise LookupFailure(f"{name!r} is neither defined nor used in {index.source.label}{hint}")
    references: list[ReferenceSwap] = []
    if dotted:
        statements = _reading_statements(index, set(dotted))
        helper = f"_ncompass_swap_{first_helper}"
        references.append(
            ReferenceSwap(name, tuple(dotted), module, attribute, tuple(statements), helper)
        )
    return definitions, references


def import_aliases(tree: ast.Module) -> dict[str, str]:
    """What each module-level import binds: ``{"F": "torch.nn.functional", "nn": "torch.nn"}``."""
    aliases: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    aliases[alias.asname] = alias.name
                else:
                    head = alias.name.split(".")[0]
                    aliases[head] = head
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                if alias.name != "*":
                    aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return aliases


def canonical(dotted: str, aliases: dict[str, str]) -> str:
    """``nn.Conv2d`` → ``torch.nn.Conv2d`` when ``nn`` is ``torch.nn`` (unchanged otherwise)."""
    head, _, rest = dotted.partition(".")
    target = aliases.get(head)
    if target is None:
        return dotted
    return f"{target}.{rest}" if rest else target


def dotted_reads(tree: ast.AST) -> set[str]:
    """Every dotted name read in ``tree`` (``F.conv2d``, ``nn.Conv2d``, ``torch``)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute | ast.Name) and isinstance(node.ctx, ast.Load):
            text = dotted_name(node)
            if text is not None:
                names.add(text)
    return names


def _definition(index: StatementIndex, name: str) -> tuple[Block, int] | None:
    """A module-level class/function or a method named ``name``."""
    scope = index.scopes.get(name)
    if scope is None or scope.statement is None:
        return None
    if scope.parent is None or scope.parent.kind == "function":
        return None  # only module-level definitions and methods can be rebound
    block = scope.statement.block
    return block, block.statements.index(scope.statement)


def _global_import(index: StatementIndex, name: str) -> int | None:
    """The position of the last module-level import that binds bare ``name``."""
    body = index.module.body
    assert body is not None
    found: int | None = None
    for position, statement in enumerate(body.statements):
        for node in statement.ast_nodes:
            if isinstance(node, ast.Import | ast.ImportFrom) and any(
                (alias.asname or alias.name.split(".")[0]) == name for alias in node.names
            ):
                found = position
    return found


def _reading_statements(index: StatementIndex, names: set[str]) -> list[Any]:
    """The innermost statements (libcst nodes) that read any of ``names``."""
    found: list[Any] = []
    assert index.module.body is not None
    for statement in index.statements(index.module.body):
        if statement.is_compound:
            if not _header_reads(statement.first_ast) & names:
                continue
        elif not _reads_of(statement.ast_nodes) & names:
            continue
        found.append(statement.node)
    return found


def _reads_of(nodes: Sequence[ast.AST]) -> set[str]:
    names: set[str] = set()
    for node in nodes:
        if not isinstance(node, ast.Import | ast.ImportFrom):
            names |= dotted_reads(node)
    return names


def _header_reads(node: ast.stmt) -> set[str]:
    """The dotted names a compound statement's own header (not its body) reads."""
    header: list[ast.AST] = []
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        header = [*node.decorator_list, node.args]
        if node.returns is not None:
            header.append(node.returns)
    elif isinstance(node, ast.ClassDef):
        header = [*node.decorator_list, *node.bases, *node.keywords]
    elif isinstance(node, ast.If | ast.While):
        header = [node.test]
    elif isinstance(node, ast.For | ast.AsyncFor):
        header = [node.iter]
    elif isinstance(node, ast.With | ast.AsyncWith):
        header = [item.context_expr for item in node.items]
    elif isinstance(node, ast.Match):
        header = [node.subject]
    return _reads_of(header)


__all__ = [
    "DefinitionSwap",
    "ReferenceSwap",
    "canonical",
    "dotted_reads",
    "import_aliases",
    "plan_replacement",
]
