"""Apply a :class:`RewritePlan` to the libcst tree.

Every wrapped run of statements becomes::

    _ncompass_h3 = _ncompass_enter_3()      #@ncompass:42
    try:                                    #@ncompass:42
        <the original statements, re-indented>
    finally:                                #@ncompass:42
        _ncompass_exit_3(_ncompass_h3)      #@ncompass:42

where ``_ncompass_enter_3`` / ``_ncompass_exit_3`` are module globals bound once by a prologue
(``ncompass.runtime.sites.bind``). Helpers live in module globals, never in closures, so the
rewritten functions keep their free variables and their ``__code__`` can be swapped in place.
Names start with a single underscore: a double one would be name-mangled inside classes.

Each generated line carries a ``#@ncompass:N`` tag naming the original line it stands for;
:mod:`ncompass.rewrite.linemap` uses the tags to give the compiled code original line numbers.
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst

from ncompass.rewrite.plan import CallSpan, MarkerSite, RewritePlan, Wrap, template_fstring
from ncompass.rewrite.replace import DefinitionSwap

RUNTIME_ALIAS = "__ncompass_runtime__"
RUNTIME_MODULE = "ncompass.runtime.sites"
TAG_PREFIX = "#@ncompass:"

Unit = list[libcst.BaseStatement]


def tag(line: int, column: int | None = None) -> libcst.TrailingWhitespace:
    """The trailing comment that maps a generated line to original line ``line``.

    ``column`` is given for original code moved to a line of its own: where it starts in
    the original line.
    """
    text = f"{TAG_PREFIX}{line}" if column is None else f"{TAG_PREFIX}{line}:{column}"
    return libcst.TrailingWhitespace(
        whitespace=libcst.SimpleWhitespace("  "),
        comment=libcst.Comment(text),
        newline=libcst.Newline(),
    )


def _statement(code: str, line: int) -> libcst.SimpleStatementLine:
    parsed = libcst.parse_statement(code + "\n")
    assert isinstance(parsed, libcst.SimpleStatementLine)
    return parsed.with_changes(trailing_whitespace=tag(line))


def _statements(codes: list[str], line: int) -> list[libcst.SimpleStatementLine]:
    """Several one-line statements parsed at once (one parse is much cheaper than many)."""
    if not codes:
        return []
    module = libcst.parse_module("\n".join(codes) + "\n")
    parsed = []
    for statement in module.body:
        assert isinstance(statement, libcst.SimpleStatementLine)
        parsed.append(statement.with_changes(trailing_whitespace=tag(line)))
    return parsed


def _call(function: str, argument: str | None) -> libcst.Call:
    arguments = [libcst.Arg(value=libcst.Name(argument))] if argument else []
    return libcst.Call(func=libcst.Name(function), args=arguments)


def _enter_statement(
    handle: str, enter: str, argument: str | None, line: int
) -> libcst.SimpleStatementLine:
    """``handle = enter(argument)``, built directly (parsing it costs more than the rest)."""
    assign = libcst.Assign(
        targets=[libcst.AssignTarget(target=libcst.Name(handle))], value=_call(enter, argument)
    )
    return libcst.SimpleStatementLine(body=[assign], trailing_whitespace=tag(line))


def _exit_statement(exit: str, handle: str, line: int) -> libcst.SimpleStatementLine:
    """``exit(handle)``."""
    return libcst.SimpleStatementLine(
        body=[libcst.Expr(value=_call(exit, handle))], trailing_whitespace=tag(line)
    )


def enter_name(site: MarkerSite) -> str:
    """The module global holding the site's enter function."""
    return f"_ncompass_enter_{site.id}"


def exit_name(site: MarkerSite) -> str:
    """The module global holding the site's exit function."""
    return f"_ncompass_exit_{site.id}"


def name_function(site: MarkerSite) -> str:
    """The module global holding a dynamic site's compiled name template."""
    return f"_ncompass_name_{site.id}"


def call_name(site: MarkerSite, call: CallSpan) -> str:
    """The module global wrapping one call of a header call site: ``_ncompass_call_3`` (any
    arguments), ``_ncompass_call_3_2`` (exactly two positional ones) or ``_ncompass_acall_3``
    (an awaited call: the range lasts until the awaited result)."""
    if call.awaited:
        return f"_ncompass_acall_{site.id}"
    if call.arity is None:
        return f"_ncompass_call_{site.id}"
    return f"_ncompass_call_{site.id}_{call.arity}"


def prologue_code(plan: RewritePlan) -> list[str]:
    """The statements that bind every helper the rewritten module uses, as source lines."""
    lines = [f"import {RUNTIME_MODULE} as {RUNTIME_ALIAS}"] if plan.sites else []
    for site in plan.sites:
        if site.dynamic:
            source = site.name_source or template_fstring(site.name)
            lines.append(
                f"{name_function(site)} = {RUNTIME_ALIAS}.template({source!r}, {site.name!r})"
            )
        options = [repr(site.context), repr(site.name)]
        if site.dynamic:
            options.append("dynamic=True")
        if site.async_safe:
            options.append("async_safe=True")
        if site.values:
            options.append(f"values={site.values!r}")
        lines.append(
            f"{enter_name(site)}, {exit_name(site)} = {RUNTIME_ALIAS}.bind({', '.join(options)})"
        )
    for header in plan.header_calls:
        site = header.site
        template = name_function(site) if site.dynamic else "None"
        helpers = {call_name(site, call): call for call in header.calls}
        for helper, call in sorted(helpers.items()):
            wrapper = "async_call_wrapper" if call.awaited else "call_wrapper"
            arity = "" if call.awaited or call.arity is None else f", arity={call.arity}"
            lines.append(
                f"{helper} = {RUNTIME_ALIAS}.{wrapper}("
                f"{enter_name(site)}, {exit_name(site)}, {template}{arity})"
            )
    for swap in plan.reference_swaps:
        lines.append(f"{swap.helper} = {_import_expression(swap.module, swap.attribute)}")
    for definition in plan.definition_swaps:
        if definition.index < 0:
            lines.append(
                f"{definition.name} = {_import_expression(definition.module, definition.attribute)}"
            )
    return lines


def _import_expression(module: str, attribute: str) -> str:
    head, *rest = attribute.split(".")
    chain = "".join(f".{part}" for part in rest)
    return f"__import__({module!r}, fromlist=[{head!r}]).{head}{chain}"


def transform(plan: RewritePlan) -> libcst.Module:
    """The rewritten module tree (unchanged if the plan is empty)."""
    if plan.empty:
        return plan.source.cst
    rewritten = plan.source.cst.visit(_Transformer(plan))
    assert isinstance(rewritten, libcst.Module)
    return rewritten


class _Transformer(libcst.CSTTransformer):
    def __init__(self, plan: RewritePlan) -> None:
        super().__init__()
        self.plan = plan
        self.wraps = plan.wraps_by_block()
        self.swaps_after: dict[int, dict[int, list[DefinitionSwap]]] = {}
        for swap in plan.definition_swaps:
            if swap.index >= 0:
                by_index = self.swaps_after.setdefault(id(swap.block.owner), {})
                by_index.setdefault(swap.index, []).append(swap)
        self.references = {
            written: swap.helper for swap in plan.reference_swaps for written in swap.written
        }
        self.needed: set[int] = set()
        self.call_helpers = _header_call_helpers(plan)
        for header in plan.header_calls:
            self._need(header.statement.node)
            elif_clause = getattr(header.statement.node, "orelse", None)
            while isinstance(elif_clause, libcst.If):  # `elif` is an `If` in the `orelse`
                self.needed.add(id(elif_clause))
                elif_clause = elif_clause.orelse
        for wrap in plan.wraps:
            self._need(wrap.block.owner)
        for swap in plan.definition_swaps:
            self._need(swap.block.owner)
        for reference in plan.reference_swaps:
            for node in reference.statements:
                self.needed.add(id(node))
                self._need(node)
        self._stores: set[int] = set()

    def _need(self, node: libcst.CSTNode) -> None:
        self.needed.add(id(node))
        for ancestor in self.plan.index.ancestors(node):
            self.needed.add(id(ancestor))

    # -- traversal -----------------------------------------------------------------------------

    def on_visit(self, node: libcst.CSTNode) -> bool:
        if isinstance(node, libcst.SimpleStatementLine | libcst.BaseCompoundStatement):
            return id(node) in self.needed
        if isinstance(node, libcst.Import | libcst.ImportFrom):
            return False
        if self.references:
            self._note_stores(node)
        return True

    def _note_stores(self, node: libcst.CSTNode) -> None:
        """Remember targets of assignment and ``del``: writes are not reads to replace."""
        if isinstance(node, libcst.AssignTarget | libcst.AugAssign | libcst.AnnAssign | libcst.Del):
            self._stores.add(id(node.target))

    def on_leave(  # type: ignore[override]  # libcst's generic signature; we return any node
        self, original_node: libcst.CSTNode, updated_node: libcst.CSTNode
    ) -> libcst.CSTNode:
        key = id(original_node)
        if isinstance(updated_node, libcst.Call) and key in self.call_helpers:
            return _call_through(updated_node, self.call_helpers[key])
        if isinstance(original_node, libcst.Attribute) and self.references:
            helper = self.references.get(_dotted(original_node) or "")
            if helper is not None and key not in self._stores:
                return libcst.Name(helper)
            return updated_node
        if key in self.wraps or key in self.swaps_after:
            if isinstance(updated_node, libcst.Module):
                return self._rebuild_module(original_node, updated_node)
            if isinstance(updated_node, libcst.IndentedBlock):
                return updated_node.with_changes(body=self._rebuild(key, list(updated_node.body)))
            if isinstance(updated_node, libcst.SimpleStatementSuite):
                return self._expand_suite(key, updated_node)
        elif isinstance(updated_node, libcst.Module):
            return self._with_prologue(updated_node, list(updated_node.body))
        return updated_node

    # -- blocks --------------------------------------------------------------------------------

    def _rebuild(
        self, key: int, statements: Sequence[libcst.BaseStatement]
    ) -> list[libcst.BaseStatement]:
        swaps = self.swaps_after.get(key, {})
        units: list[Unit] = []
        for position, statement in enumerate(statements):
            unit: Unit = [statement]
            for swap in swaps.get(position, []):
                unit.append(self._rebind(swap))
            units.append(unit)
        wraps = sorted(self.wraps.get(key, []), key=lambda w: (w.first, -w.last, w.order))
        return _flatten(self._wrap_units(units, wraps, 0))

    def _rebind(self, swap: DefinitionSwap) -> libcst.SimpleStatementLine:
        target = swap.name.rsplit(".", 1)[-1]
        line = swap.block.statements[swap.index].start
        return _statement(f"{target} = {_import_expression(swap.module, swap.attribute)}", line)

    def _wrap_units(self, units: list[Unit], wraps: list[Wrap], offset: int) -> list[Unit]:
        """Wrap ``units`` (from index ``offset`` of the block) in ``wraps``, outermost first."""
        result: list[Unit] = []
        cursor = 0
        remaining = list(wraps)
        while remaining:
            outer = remaining.pop(0)
            first, last = outer.first - offset, outer.last - offset
            inner = [
                w
                for w in remaining
                if outer.first <= w.first and w.last <= outer.last and w.first <= w.last
            ]
            remaining = [w for w in remaining if w not in inner]
            result.extend(units[cursor : max(first, cursor)])
            if outer.first > outer.last:  # nothing but a docstring: wrap a `pass`
                body_units: list[Unit] = [[_statement("pass", self._empty_line(outer))]]
                cursor = max(cursor, first)
            else:
                body_units = self._wrap_units(units[first : last + 1], inner, outer.first)
                cursor = last + 1
            result.append(self._wrapped(body_units, outer))
        result.extend(units[cursor:])
        return result

    def _empty_line(self, wrap: Wrap) -> int:
        statements = wrap.block.statements
        return statements[-1].start if statements else wrap.site.start_line

    def _wrapped(self, body_units: list[Unit], wrap: Wrap) -> Unit:
        site = wrap.site
        statements = wrap.block.statements
        line = statements[wrap.first].start if wrap.first <= wrap.last else self._empty_line(wrap)
        body = _flatten(body_units)
        # Comments above the first wrapped statement stay above the marker.
        first = body[0]
        leading = list(getattr(first, "leading_lines", ()))
        if leading:
            body[0] = first.with_changes(leading_lines=[])
        handle = f"_ncompass_h{site.id}"
        argument = name_function(site) if site.dynamic else None
        enter = _enter_statement(handle, enter_name(site), argument, line)
        enter = enter.with_changes(leading_lines=leading)
        leave = _exit_statement(exit_name(site), handle, line)
        guarded = libcst.Try(
            body=libcst.IndentedBlock(body=body, header=tag(line)),
            finalbody=libcst.Finally(body=libcst.IndentedBlock(body=[leave], header=tag(line))),
        )
        return [enter, guarded]

    def _expand_suite(self, key: int, suite: libcst.SimpleStatementSuite) -> libcst.IndentedBlock:
        """``def f(): return 1`` → an indented block, so its statement can be wrapped."""
        block = self.wraps[key][0].block
        lines: list[libcst.BaseStatement] = [
            libcst.SimpleStatementLine(
                body=[small.with_changes(semicolon=libcst.MaybeSentinel.DEFAULT)],
                trailing_whitespace=tag(statement.start, statement.first_ast.col_offset),
            )
            for small, statement in zip(suite.body, block.statements, strict=True)
        ]
        header = suite.trailing_whitespace
        return libcst.IndentedBlock(body=self._rebuild(key, lines), header=header)

    def _rebuild_module(self, original: libcst.CSTNode, module: libcst.Module) -> libcst.Module:
        return self._with_prologue(module, self._rebuild(id(original), list(module.body)))

    def _with_prologue(
        self, module: libcst.Module, body: list[libcst.BaseStatement]
    ) -> libcst.Module:
        position = _prologue_position(self.plan)
        statements = self.plan.index.module.body
        assert statements is not None
        anchor = (
            statements.statements[position].start if position < len(statements.statements) else 1
        )
        prologue = _statements(prologue_code(self.plan), anchor)
        # The prologue goes after the docstring and `from __future__` imports; wraps never
        # include those, so their position in `body` is the same as in the original.
        return module.with_changes(body=body[:position] + prologue + body[position:])


def _header_call_helpers(plan: RewritePlan) -> dict[int, str]:
    """The libcst ``Call`` nodes of header call sites (by id) → the helper that wraps each."""
    if not plan.header_calls:
        return {}
    from libcst.metadata import MetadataWrapper, PositionProvider

    # The tree is not copied, so the positions are keyed by the very nodes the transformer sees.
    positions = MetadataWrapper(plan.source.cst, unsafe_skip_copy=True).resolve(PositionProvider)
    helpers: dict[int, str] = {}
    for header in plan.header_calls:
        wanted = {
            (c.start_line, c.start_column, c.end_line, c.end_column): call_name(header.site, c)
            for c in header.calls
        }
        for node in _calls_within(header.statement.node):
            where = positions[node]
            span = (where.start.line, where.start.column, where.end.line, where.end.column)
            if span in wanted:
                helpers[id(node)] = wanted.pop(span)
        assert not wanted, f"header calls not found in the libcst tree: {sorted(wanted)}"
    return helpers


def _calls_within(node: libcst.CSTNode) -> list[libcst.Call]:
    found: list[libcst.Call] = []
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, libcst.Call):
            found.append(current)
        stack.extend(current.children)
    return found


def _call_through(call: libcst.Call, helper: str) -> libcst.Call:
    """``f(a, b=1)`` → ``helper(f, a, b=1)``, keeping the call's parentheses and spacing."""
    separator = libcst.Comma(whitespace_after=libcst.SimpleWhitespace(" "))
    callee = libcst.Arg(
        value=call.func, comma=separator if call.args else libcst.MaybeSentinel.DEFAULT
    )
    return call.with_changes(func=libcst.Name(helper), args=[callee, *call.args])


def _prologue_position(plan: RewritePlan) -> int:
    block = plan.index.module.body
    assert block is not None
    position = 1 if plan.index.module.docstring is not None else 0
    while position < len(block.statements):
        node = block.statements[position].first_ast
        if type(node).__name__ == "ImportFrom" and getattr(node, "module", None) == "__future__":
            position += 1
        else:
            break
    return position


def _flatten(units: list[Unit]) -> list[libcst.BaseStatement]:
    return [statement for unit in units for statement in unit]


def _dotted(node: libcst.CSTNode) -> str | None:
    parts: list[str] = []
    current = node
    while isinstance(current, libcst.Attribute):
        parts.append(current.attr.value)
        current = current.value
    if isinstance(current, libcst.Name):
        parts.append(current.value)
        return ".".join(reversed(parts))
    return None


__all__ = ["RUNTIME_ALIAS", "TAG_PREFIX", "prologue_code", "tag", "transform"]
