"""Plan a module's rewrite: resolve every marker of its targets to statements, check the rules,
and name the marker sites.

Planning reads only the statement index (no libcst edits), so ``ncompass spec validate`` runs it
to check a spec against the code without rewriting anything.
"""

from __future__ import annotations

import ast
import warnings
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ncompass.errors import NcompassWarning, SpecError
from ncompass.rewrite.locate import (
    LookupFailure,
    ScopeCalls,
    find_calls,
    find_scope,
    match_functions,
)
from ncompass.rewrite.ranges import StatementRun, relocate, resolve_lines
from ncompass.rewrite.replace import DefinitionSwap, ReferenceSwap, plan_replacement
from ncompass.rewrite.source import SourceModule
from ncompass.rewrite.statements import Block, Scope, Statement, StatementIndex
from ncompass.spec.models import (
    CallMarker,
    FunctionMarker,
    RangeMarker,
    Replacement,
    RewriteConfig,
    TargetSpec,
)

MarkerKind = Literal["function", "call", "range"]


class SpecDriftWarning(NcompassWarning):
    """A range was found again by its anchors after the target file changed."""


@dataclass(frozen=True)
class MarkerSite:
    """One marker as placed in the code: what the manifest records for analysis to map back.

    Attributes:
        id: Number of the site within its module (names the generated helpers).
        name: The marker name, or its template when ``dynamic``.
        kind: "function", "call" or "range".
        context: The range context (``torch``, ``nvtx``, ``pkg.mod:Class``, ...).
        module: The module's dotted name or file name.
        file: The source file.
        qualname: The function the marker is in (``<module>`` at top level).
        start_line: First original line covered.
        end_line: Last original line covered.
        dynamic: The name has ``{expr}`` parts evaluated at call time.
        async_safe: Use start/end ranges (the code may suspend inside the range).
        values: Keyword values for custom contexts.
        spec_line: Where the marker is written in its spec file.
    """

    id: int
    name: str
    kind: MarkerKind
    context: str
    module: str
    file: str | None
    qualname: str
    start_line: int
    end_line: int
    dynamic: bool = False
    async_safe: bool = False
    values: dict[str, Any] = field(default_factory=dict)
    spec_line: int | None = None
    name_source: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (the manifest entry)."""
        return {
            "id": self.id,
            "name": self.name,
            "kind": self.kind,
            "context": self.context,
            "module": self.module,
            "file": self.file,
            "qualname": self.qualname,
            "start_line": self.start_line,
            "end_line": self.end_line,
            "dynamic": self.dynamic,
            "async_safe": self.async_safe,
            "values": self.values,
            "spec_line": self.spec_line,
        }


@dataclass(frozen=True)
class CallSpan:
    """Where one call expression is in the original source: 1-based lines, 0-based character
    columns (not bytes), from the start of its callee to its closing parenthesis."""

    start_line: int
    start_column: int
    end_line: int
    end_column: int
    awaited: bool
    # How many positional arguments, when the call has nothing else (no keywords, no `*`/`**`):
    # such calls go through a helper of that arity, several times cheaper than `*args, **kwargs`.
    arity: int | None = None


@dataclass(eq=False)
class HeaderCall:
    """Calls in a compound statement's header (or one-line suite) wrapped one by one:
    ``if self.gate(x):`` becomes ``if _ncompass_call_3_1(self.gate, x):``."""

    statement: Statement
    calls: list[CallSpan]
    site: MarkerSite


@dataclass(eq=False)
class Wrap:
    """Statements ``first..last`` of ``block`` wrapped in the range of ``site``.

    ``first > last`` means an empty body (a function with only a docstring): a ``pass`` is wrapped.
    """

    block: Block
    first: int
    last: int
    site: MarkerSite
    order: int


@dataclass(eq=False)
class RewritePlan:
    """Everything to do to one module; empty when none of its targets has a marker."""

    source: SourceModule
    index: StatementIndex
    sites: list[MarkerSite] = field(default_factory=list)
    wraps: list[Wrap] = field(default_factory=list)
    definition_swaps: list[DefinitionSwap] = field(default_factory=list)
    reference_swaps: list[ReferenceSwap] = field(default_factory=list)
    header_calls: list[HeaderCall] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        """Whether the plan changes nothing."""
        return not (
            self.wraps or self.definition_swaps or self.reference_swaps or self.header_calls
        )

    def wraps_by_block(self) -> dict[int, list[Wrap]]:
        """Wraps grouped by the id of their block's libcst owner node."""
        grouped: dict[int, list[Wrap]] = {}
        for wrap in self.wraps:
            grouped.setdefault(id(wrap.block.owner), []).append(wrap)
        return grouped


def plan_rewrite(
    source: SourceModule,
    targets: Sequence[TargetSpec],
    config: RewriteConfig,
    index: StatementIndex | None = None,
) -> RewritePlan:
    """Resolve every marker of ``targets`` (all naming ``source``) against the code.

    Raises:
        SpecError: a marker matches nothing, a range breaks a rule, or two ranges overlap;
            the message names the spec file and the marker's line.
    """
    plan = RewritePlan(source, index or StatementIndex(source))
    planner = _Planner(plan, config)
    for target in targets:
        planner.add_target(target)
    planner.check_overlaps()
    for note in plan.notes:
        warnings.warn(note, SpecDriftWarning, stacklevel=2)
    return plan


class _Planner:
    def __init__(self, plan: RewritePlan, config: RewriteConfig) -> None:
        self.plan = plan
        self.config = config
        self.source = plan.source
        self.index = plan.index
        self._order = 0
        self._spec_path = config.path
        # per scope, its calls found once: a spec may name thousands of callees in one function
        self._scope_calls: dict[int, ScopeCalls] = {}

    # -- errors --------------------------------------------------------------------------------

    def _fail(self, message: str, entry: Any) -> SpecError:
        line = getattr(entry, "line", None)
        return SpecError(message, self._spec_path, line)

    # -- targets -------------------------------------------------------------------------------

    def add_target(self, target: TargetSpec) -> None:
        self._spec_path = target.spec_path or self.config.path
        drifted = target.sha256 is not None and target.sha256 != self.source.sha256
        if drifted and target.functions and not (target.ranges or target.calls):
            self.plan.notes.append(
                f"{self.source.filename} changed since the spec was written (sha256 differs); "
                "function markers still apply by name"
            )
        for marker in target.functions:
            self._add_functions(marker)
        for call in target.calls:
            self._add_calls(call)
        for marker_range in target.ranges:
            self._add_range(marker_range, drifted)
        for replacement in target.replace:
            self._add_replacement(replacement)

    def _add_functions(self, marker: FunctionMarker) -> None:
        try:
            scopes = match_functions(self.index, marker.qualname)
        except LookupFailure as failure:
            raise self._fail(str(failure), marker) from None
        for scope in scopes:
            body = scope.body
            assert body is not None
            first = 1 if scope.docstring is not None else 0
            name = marker.name or f"{self.source.label}:{scope.qualname}"
            site = self._site(marker, "function", name, scope, scope.start, scope.end)
            self._wrap(body, first, len(body.statements) - 1, site)

    def _add_calls(self, marker: CallMarker) -> None:
        try:
            scope = find_scope(self.index, marker.in_)
            table = self._scope_calls.get(id(scope))
            if table is None:
                table = self._scope_calls[id(scope)] = ScopeCalls(scope)
            sites = find_calls(self.index, scope, marker.call, table)
        except LookupFailure as failure:
            raise self._fail(str(failure), marker) from None
        name = marker.name or f"{self.source.label}:{scope.qualname}/{marker.call}"
        for call_site in sites:
            statement = call_site.statement
            if call_site.in_header:
                # wrapping the statement would wrap its whole body: wrap the calls instead
                self._check_frame_free(marker, call_site.calls)
                spans = [
                    self._span(call, id(call) in call_site.awaited) for call in call_site.calls
                ]
                first, last = spans[0].start_line, spans[-1].end_line
                site = self._site(marker, "call", name, scope, first, last)
                self.plan.header_calls.append(HeaderCall(statement, spans, site))
                continue
            block = statement.block
            position = _position(block, statement)
            site = self._site(marker, "call", name, scope, statement.start, statement.end)
            self._wrap(block, position, position, site)

    def _check_frame_free(self, marker: CallMarker, calls: Sequence[ast.Call]) -> None:
        """A header call runs inside a helper's frame: builtins that read their caller's frame
        (``super()``, ``locals()``, ...) would see the helper's, so they cannot be marked."""
        for call in calls:
            if not isinstance(call.func, ast.Name):
                continue
            reads_frame_up_to = _FRAME_READING_BUILTINS.get(call.func.id)
            if reads_frame_up_to is not None and len(call.args) <= reads_frame_up_to:
                raise self._fail(
                    f"the call to {call.func.id}() at line {call.lineno} of "
                    f"{self.source.filename} is in a compound statement's header, where a call "
                    f"marker wraps the call in a helper; {call.func.id}() reads the frame it "
                    "is called from and would see the helper's. Mark the whole statement with "
                    "a range instead",
                    marker,
                )

    def _span(self, call: ast.Call, awaited: bool) -> CallSpan:
        assert call.end_lineno is not None and call.end_col_offset is not None
        return CallSpan(
            call.lineno,
            self._column(call.lineno, call.col_offset),
            call.end_lineno,
            self._column(call.end_lineno, call.end_col_offset),
            awaited,
            _plain_arity(call),
        )

    def _column(self, line: int, byte_offset: int) -> int:
        """``ast`` columns count UTF-8 bytes; libcst's count characters."""
        text = self.source.lines[line - 1]
        return len(text.encode("utf-8")[:byte_offset].decode("utf-8", errors="replace"))

    def _add_range(self, marker: RangeMarker, drifted: bool) -> None:
        try:
            scope = find_scope(self.index, marker.in_)
            where = relocate(self.source, scope, marker.lines, marker.first, marker.last, drifted)
            run = resolve_lines(scope, where.start, where.end)
        except LookupFailure as failure:
            raise self._fail(str(failure), marker) from None
        if where.note:
            self.plan.notes.append(f"{self.source.label}: range in {scope.qualname}: {where.note}")
        run = self._skip_leading_docstring(run, scope, marker)
        start, end = marker.lines
        name = marker.name or f"{self.source.label}:{scope.qualname}[{start}-{end}]"
        site = self._site(marker, "range", name, scope, run.start, run.end)
        self._wrap(run.block, run.first, run.last, site)

    def _skip_leading_docstring(
        self, run: StatementRun, scope: Scope, marker: RangeMarker
    ) -> StatementRun:
        """Keep a docstring (and ``from __future__`` imports) first, outside any range."""
        keep = 0
        if run.block is scope.body:
            if scope.docstring is not None:
                keep = 1
            if scope.kind == "module":
                while keep < len(run.block.statements) and _is_future_import(
                    run.block.statements[keep].first_ast
                ):
                    keep += 1
        if run.first >= keep:
            return run
        if run.last < keep:
            raise self._fail(
                f"lines {marker.lines[0]}-{marker.lines[1]} hold only the docstring or "
                "'from __future__' imports, which must stay first; nothing to measure",
                marker,
            )
        return StatementRun(run.block, keep, run.last)

    def _add_replacement(self, replacement: Replacement) -> None:
        try:
            definitions, references = plan_replacement(
                self.index, replacement, first_helper=len(self.plan.reference_swaps) + 1
            )
        except LookupFailure as failure:
            raise self._fail(str(failure), replacement) from None
        self.plan.definition_swaps.extend(definitions)
        self.plan.reference_swaps.extend(references)

    # -- sites and wraps -----------------------------------------------------------------------

    def _site(
        self,
        marker: FunctionMarker | CallMarker | RangeMarker,
        kind: MarkerKind,
        name: str,
        scope: Scope,
        start: int,
        end: int,
    ) -> MarkerSite:
        dynamic = _is_template(name)
        name_source = self._template_source(name, scope, marker) if dynamic else None
        if not dynamic:  # literal braces are written doubled; the marker shows them single
            name = name.replace("{{", "{").replace("}}", "}")
        site = MarkerSite(
            id=len(self.plan.sites) + 1,
            name=name,
            kind=kind,
            context=marker.context or self.config.context,
            module=self.source.label,
            file=str(self.source.path) if self.source.path else None,
            qualname=scope.qualname,
            start_line=start,
            end_line=end,
            dynamic=dynamic,
            async_safe=scope.is_async or scope.is_generator,
            values=dict(marker.values),
            spec_line=marker.line,
            name_source=name_source,
        )
        self.plan.sites.append(site)
        return site

    def _template_source(self, name: str, scope: Scope, marker: Any) -> str:
        """The f-string that computes a templated name, with private names mangled as Python
        would mangle them inside the enclosing class (the template is compiled elsewhere)."""
        source = template_fstring(name)
        try:
            tree = ast.parse(source, mode="eval")
        except SyntaxError as error:
            raise self._fail(
                f"marker name {name!r} is not a valid template: {error.msg}; write Python "
                "expressions in {braces} and double literal braces ({{ }})",
                marker,
            ) from None
        owner = scope if scope.kind == "class" else scope.parent
        while owner is not None and owner.kind != "class":
            owner = owner.parent
        if owner is None:
            return source
        prefix = "_" + owner.qualname.rsplit(".", 1)[-1].lstrip("_")
        mangled = False
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and _is_private(node.attr):
                node.attr, mangled = prefix + node.attr, True
            elif isinstance(node, ast.Name) and _is_private(node.id):
                node.id, mangled = prefix + node.id, True
        return ast.unparse(tree) if mangled else source

    def _wrap(self, block: Block, first: int, last: int, site: MarkerSite) -> None:
        self._order += 1
        self.plan.wraps.append(Wrap(block, first, last, site, self._order))

    def check_overlaps(self) -> None:
        for wraps in self.plan.wraps_by_block().values():
            crossing = _crossing_pair(wraps)
            if crossing is not None:
                one, other = crossing
                raise SpecError(
                    f"ranges {one.site.name!r} (lines {one.site.start_line}-"
                    f"{one.site.end_line}) and {other.site.name!r} (lines "
                    f"{other.site.start_line}-{other.site.end_line}) overlap without "
                    "nesting; make one contain the other or separate them",
                    self._spec_path,
                    other.site.spec_line,
                )


def template_fstring(name: str) -> str:
    """The f-string literal that evaluates a marker name template."""
    return "f" + repr(name)


# Builtins that read the frame calling them, when given at most this many arguments
# (`super()` but not `super(B, self)`, `eval(text)` but not `eval(text, namespace)`).
_FRAME_READING_BUILTINS = {
    "super": 0,
    "vars": 0,
    "dir": 0,
    "eval": 1,
    "exec": 1,
    "locals": 99,
    "globals": 99,
    "breakpoint": 99,
}


def _plain_arity(call: ast.Call) -> int | None:
    """The number of arguments of a call that passes only plain positional ones, else None."""
    if call.keywords or any(isinstance(argument, ast.Starred) for argument in call.args):
        return None
    return len(call.args)


def _is_private(identifier: str) -> bool:
    return identifier.startswith("__") and not identifier.endswith("__")


def _is_template(name: str) -> bool:
    stripped = name.replace("{{", "").replace("}}", "")
    return "{" in stripped


def _position(block: Block, statement: Statement) -> int:
    """Where ``statement`` is in ``block``: found by its first line (statements follow each
    other), then by identity among those starting on that line (``a(); b()``)."""
    position = bisect_left(block.statements, statement.start, key=lambda each: each.start)
    while block.statements[position] is not statement:
        position += 1
    return position


def _crossing_pair(wraps: Sequence[Wrap]) -> tuple[Wrap, Wrap] | None:
    """Two wraps of one block that overlap without nesting, in spec order; None if they nest.

    One sweep over the wraps sorted by first statement (the longer first), keeping the stack of
    those still open, each inside the one below: O(n log n). Comparing every pair took a minute
    for 19k markers on one function. An empty body (``first > last``) overlaps nothing.
    """
    spans = sorted(
        (wrap for wrap in wraps if wrap.first <= wrap.last),
        key=lambda wrap: (wrap.first, -wrap.last, wrap.order),
    )
    still_open: list[Wrap] = []
    for wrap in spans:
        while still_open and still_open[-1].last < wrap.first:
            still_open.pop()  # ended before this one starts: disjoint from it and all after
        if still_open and still_open[-1].last < wrap.last:
            # it starts inside the innermost open wrap and ends after it
            one, other = sorted((still_open[-1], wrap), key=lambda each: each.order)
            return one, other
        still_open.append(wrap)
    return None


def _is_future_import(node: ast.stmt) -> bool:
    return isinstance(node, ast.ImportFrom) and node.module == "__future__"


__all__ = [
    "DefinitionSwap",
    "MarkerSite",
    "ReferenceSwap",
    "RewritePlan",
    "SpecDriftWarning",
    "Wrap",
    "plan_rewrite",
    "template_fstring",
]
