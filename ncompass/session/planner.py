"""The marker planner: from a slow place (the user's feedback, or the hottest marker of the last
trace) to markers one level finer.

One level finer means: inside a function, its statements; inside a run of statements, each
statement; inside a loop, ``if``, ``with`` or ``try``, the statements of its blocks; inside a
single statement, the functions it calls (when their source can be found). Every proposed range
carries anchors and the file's sha256, is named after its source, and is checked against the code
and the user's own markers: a proposal that would cross one of them is dropped with the reason.
"""

from __future__ import annotations

import ast
import os
import sys
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ncompass.errors import NcompassError, SpecError
from ncompass.importer.lookup import module_source
from ncompass.rewrite.locate import LookupFailure, dotted_name
from ncompass.rewrite.plan import plan_rewrite
from ncompass.rewrite.ranges import resolve_lines
from ncompass.rewrite.source import SourceModule, read_source
from ncompass.rewrite.statements import Scope, Statement, StatementIndex
from ncompass.session.callees import resolve_callee
from ncompass.session.history import IterationRecord
from ncompass.session.loop_turns import MAX_MARKED_RUNS, runs_inside
from ncompass.session.proposal import (
    EntryPoint,
    Proposal,
    SessionInputError,
    TargetKey,
    extend_config,
    key_for,
    target_spec,
)
from ncompass.session.sites import FULL_TRACE_MARKER, hot_sites
from ncompass.spec.models import MODULE_LEVEL, RewriteConfig, TargetSpec

_SNIPPET = 48
_MIN_SHARE = 0.05


class MarkerPlanner:
    """Proposes the next, finer markers on top of ``config``.

    Args:
        config: The spec in force (the user's markers and earlier proposals).
        entry: What a whole-run range wraps, for drilling into it.
    """

    def __init__(self, config: RewriteConfig, entry: EntryPoint | None = None) -> None:
        self.config = config
        self.entry = entry
        self._sources: dict[TargetKey, tuple[SourceModule, StatementIndex]] = {}
        # module name → its file, as recorded where the markers ran (the module may not be
        # importable here: a script's folder is on its own sys.path, not on ours)
        self.known_files: dict[str, str] = {}
        # calling line (real file, line) → the functions a discovery run sampled under it:
        # callees resolved only at run time (a dispatch dict), where static lookup fails
        self.sampled_callees: dict[tuple[str, int], list[tuple[TargetKey, str]]] = {}

    # -- entry points ------------------------------------------------------------------------

    def for_feedback(self, target_module: str, start_line: int, end_line: int) -> Proposal:
        """Markers one level finer inside lines ``start_line..end_line`` of ``target_module``.

        ``target_module`` is a dotted module name or a path to a ``.py`` file.

        Raises:
            SessionInputError: the module cannot be found, or the lines hold no statement.
        """
        if end_line < start_line or start_line < 1:
            raise SessionInputError(f"feedback lines {start_line}-{end_line} are not a range")
        key = key_for(target_module)
        source, index = self.source_of(key)
        last = len(source.lines)
        if start_line > last:
            raise SessionInputError(
                f"feedback lines {start_line}-{end_line} are past the end of {source.filename} "
                f"({last} lines)"
            )
        end_line = min(end_line, last)
        proposal = Proposal()
        covered = [
            scope
            for scope in index.functions()
            if start_line <= scope.start
            and scope.end <= end_line
            and _outermost(scope, start_line, end_line)
        ]
        if covered:
            for scope in covered:
                self._propose_function(key, index, scope, proposal, with_itself=True)
            return self.checked(proposal)
        scope = _innermost_scope(index, start_line, end_line)
        statements = _statements_in(scope, start_line, end_line)
        if not statements:
            raise SessionInputError(
                f"lines {start_line}-{end_line} of {source.filename} hold no statement "
                "(only blank lines or comments); give the lines of the code you mean"
            )
        self._propose_statements(key, index, scope, statements, proposal, with_parent=True)
        return self.checked(proposal)

    def drill(self, record: IterationRecord, limit: int = 2) -> Proposal:
        """Markers one level finer inside the hottest markers of ``record``."""
        for placed in record.manifest:
            if placed.get("module") and placed.get("file"):
                self.known_files.setdefault(str(placed["module"]), str(placed["file"]))
        proposal = Proposal()
        sites = hot_sites(record)
        total = sum(time for _, time in sites) or 1.0
        chosen = 0
        for site, self_us in sites:
            if chosen >= limit or self_us / total < _MIN_SHARE:
                break
            before = proposal.count()
            try:
                self._drill_site(site, proposal)
            except NcompassError as error:
                proposal.dropped.append(f"{site.get('name')}: {error}")
                continue
            if proposal.count() > before:
                chosen += 1
                proposal.reasons.append(
                    f"drilled into {site.get('name')!r}: {self_us / 1000:.2f} ms not yet explained "
                    f"by finer markers ({100 * self_us / total:.0f}% of all such time)"
                )
        return self.checked(proposal)

    def from_targets(self, targets: list[dict[str, Any]], proposer: str) -> Proposal:
        """A provider's proposal (version 1 target dicts), checked like the planner's own:
        markers that duplicate, cross or match nothing are dropped with the reason."""
        proposal = Proposal()
        for target in targets:
            label = target.get("module") or target.get("file")
            if not label:
                proposal.dropped.append(f"{proposer}: a target without module or file")
                continue
            key = key_for(str(label)) if target.get("file") else TargetKey(module=str(label))
            try:
                self.source_of(key)
            except NcompassError as error:  # a module the provider named cannot be read here
                proposal.dropped.append(f"{proposer}: {error}")
                continue
            count = 0
            for kind in ("functions", "calls", "ranges"):
                for marker in target.get(kind) or []:
                    proposal.add(key, kind, marker)
                    count += 1
            if count:
                proposal.reasons.append(f"{proposer} proposed {count} markers in {key.label}")
        return self.checked(proposal)

    def request_sources(self, labels: Iterable[str]) -> dict[str, dict[str, str]]:
        """The source of each module or file a provider is asked about (unreadable ones left
        out): label → ``{"path", "sha256", "text"}``."""
        sources: dict[str, dict[str, str]] = {}
        for label in labels:
            key = key_for(label)
            try:
                source, _ = self.source_of(key)
            except NcompassError:
                continue
            path = str(source.path or "")
            sources[label] = {"path": path, "sha256": source.sha256, "text": source.text}
        return sources

    def hot_labels(self, record: IterationRecord, limit: int = 3) -> list[str]:
        """The modules (or script files) of the hottest markers of ``record``."""
        labels: list[str] = []
        for site, _ in hot_sites(record):
            if site.get("name") == FULL_TRACE_MARKER:
                key = self.entry.key if self.entry else None
                label = (key.module or key.file) if key else None
            elif _is_file_label(site):
                label = site.get("file")
            else:
                label = site.get("module")
            if label and str(label) not in labels:
                labels.append(str(label))
            if len(labels) >= limit:
                break
        return labels

    # -- drilling one site -------------------------------------------------------------------

    def _drill_site(self, site: Mapping[str, Any], proposal: Proposal) -> None:
        if site.get("name") == FULL_TRACE_MARKER:
            if self.entry is None:
                proposal.reasons.append(
                    "the whole run is one range and its entry point is unknown; give feedback "
                    "(a module and lines) to say where to look"
                )
                return
            key = self.entry.key
            _, index = self.source_of(key)
            if self.entry.qualname != MODULE_LEVEL:
                scope = index.scopes.get(self.entry.qualname)
                if scope is not None and scope.kind == "function":
                    self._propose_function(key, index, scope, proposal, with_itself=True)
                return
            assert index.module.body is not None
            body = [s for s in index.module.body.statements if not _is_docstring_or_future(s)]
            self._propose_statements(key, index, index.module, body, proposal, with_parent=False)
            return
        key = TargetKey(
            module=site.get("module") if not _is_file_label(site) else None,
            file=site.get("file") if _is_file_label(site) else None,
        )
        if key.module is None and key.file is None:
            return
        _, index = self.source_of(key)
        scope = index.scopes.get(site.get("qualname", MODULE_LEVEL))
        if scope is None:
            return
        if site.get("kind") == "function":
            self._propose_function(key, index, scope, proposal, with_itself=False)
            return
        start, end = int(site.get("start_line", 0)), int(site.get("end_line", 0))
        statements = _statements_in(scope, start, end)
        if site.get("kind") == "call" or (len(statements) == 1 and not statements[0].is_compound):
            self._propose_callees(key, index, scope, statements, proposal)
            return
        self._propose_statements(key, index, scope, statements, proposal, with_parent=False)

    # -- proposals ---------------------------------------------------------------------------

    def _propose_function(
        self,
        key: TargetKey,
        index: StatementIndex,
        scope: Scope,
        proposal: Proposal,
        with_itself: bool,
    ) -> None:
        if with_itself:
            proposal.add(key, "functions", {"qualname": scope.qualname})
        assert scope.body is not None
        body = [s for s in scope.body.statements if s is not scope.docstring]
        if len(body) == 1 and body[0].is_compound and not _defines_scope(body[0]):
            body = _inner_statements(body[0])
        self._propose_statements(key, index, scope, body, proposal, with_parent=False)
        proposal.reasons.append(f"{key.label}:{scope.qualname}: its {len(body)} statements")

    def _propose_statements(
        self,
        key: TargetKey,
        index: StatementIndex,
        scope: Scope,
        statements: list[Statement],
        proposal: Proposal,
        with_parent: bool,
    ) -> None:
        if len(statements) == 1 and statements[0].is_compound and not _defines_scope(statements[0]):
            if with_parent:
                proposal.add(key, "ranges", self.range_marker(index, scope, statements))
            statements = _inner_statements(statements[0])
        elif with_parent and len(statements) > 1:
            proposal.add(key, "ranges", self.range_marker(index, scope, statements))
        if len(statements) == 1 and not statements[0].is_compound:
            self._propose_callees(key, index, scope, statements, proposal)
            if with_parent:
                proposal.add(key, "ranges", self.range_marker(index, scope, statements))
            return
        for statement in statements:
            if _defines_scope(statement):
                continue
            runs = runs_inside(statement)
            if runs > MAX_MARKED_RUNS:  # a range per turn: the loop's own marker times it
                proposal.dropped.append(
                    f"{key.label}:{statement.start}: runs about {runs:,} times (a loop's "
                    f"turns), more than the {MAX_MARKED_RUNS:,} a marker may record; measured "
                    "through its loop"
                )
                continue
            proposal.add(key, "ranges", self.range_marker(index, scope, [statement]))

    def _propose_callees(
        self,
        key: TargetKey,
        index: StatementIndex,
        scope: Scope,
        statements: list[Statement],
        proposal: Proposal,
    ) -> None:
        """Function markers on the functions a statement calls, where their source is known."""
        found = 0
        unresolved: list[str] = []
        for callee in _callees(statements):
            target = self._resolve_callee(key, index, scope, callee)
            if target is None:
                unresolved.append(callee)
                continue
            callee_key, qualname = target
            proposal.add(callee_key, "functions", {"qualname": qualname})
            found += 1
        if unresolved:
            sampled = self._sampled_callees(index, statements)
            for callee_key, qualname in sampled:
                proposal.add(callee_key, "functions", {"qualname": qualname})
            if sampled:
                found += len(sampled)
                names = ", ".join(qualname for _, qualname in sampled)
                line = statements[0].start if statements else 0
                proposal.reasons.append(
                    f"{key.label}:{line} calls {', '.join(sorted(set(unresolved)))}: the "
                    f"discovery run sampled {names} under it"
                )
        if not found:
            line = statements[0].start if statements else 0
            if unresolved:
                what = ", ".join(sorted(set(unresolved)))
                proposal.reasons.append(
                    f"{key.label}:{line} is a leaf: its time is spent in {what}, whose source "
                    "ncompass cannot find (C code, or an object only known at run time)"
                )
            else:
                proposal.reasons.append(
                    f"{key.label}:{line} is a leaf: it makes no calls to follow"
                )

    def _sampled_callees(
        self, index: StatementIndex, statements: list[Statement]
    ) -> list[tuple[TargetKey, str]]:
        """The functions a discovery run sampled under these statements' lines."""
        if not self.sampled_callees or index.source.path is None:
            return []
        file = os.path.realpath(index.source.path)
        found: list[tuple[TargetKey, str]] = []
        for statement in statements:
            for line in range(statement.start, statement.end + 1):
                for callee in self.sampled_callees.get((file, line), []):
                    if callee not in found:
                        found.append(callee)
        return found

    def _resolve_callee(
        self, key: TargetKey, index: StatementIndex, scope: Scope, callee: str
    ) -> tuple[TargetKey, str] | None:
        def lookup(module_name: str) -> StatementIndex | None:
            try:
                return self.source_of(TargetKey(module=module_name))[1]
            except (NcompassError, OSError):
                return None

        found = resolve_callee(callee, index, scope, key.module, lookup)
        if found is None:
            return None
        return TargetKey(module=found.module, file=found.file), found.qualname

    def range_marker(
        self, index: StatementIndex, scope: Scope, statements: list[Statement]
    ) -> dict[str, Any]:
        source = index.source
        start, end = statements[0].start, statements[-1].end
        first, last = source.line(start).strip(), source.line(end).strip()
        snippet = first if len(first) <= _SNIPPET else first[: _SNIPPET - 3] + "..."
        name = (
            f"{scope.qualname}:{start} {snippet}"
            if scope.kind != "module"
            else f"{source.label}:{start} {snippet}"
        )
        # a name the planner makes is never a template: the braces of a dict or set
        # comprehension in the snippet are literal (doubled, the rewriter shows them single)
        name = name.replace("{", "{{").replace("}", "}}")
        marker: dict[str, Any] = {
            "in": scope.qualname,
            "lines": [start, end],
            "first": first,
            "name": name,
        }
        if last != first or end != start:
            marker["last"] = last
        return marker

    # -- checking against the code -------------------------------------------------------------

    def checked(self, proposal: Proposal) -> Proposal:
        """Drop proposals that match nothing, duplicate a marker, or cross an existing range."""
        checked = Proposal(reasons=list(proposal.reasons), dropped=list(proposal.dropped))
        for key, kinds in proposal.markers.items():
            source, index = self.source_of(key)
            accepted: dict[str, list[dict[str, Any]]] = {}
            existing = self._existing(key)
            known = _marker_keys(existing)
            for kind in ("functions", "ranges", "calls"):
                for marker in kinds.get(kind, []):
                    identity = _marker_key(kind, marker)
                    if identity in known:
                        continue
                    candidate = {k: list(v) for k, v in accepted.items()}
                    candidate.setdefault(kind, []).append(marker)
                    error = self._plan_error(source, index, existing, key, candidate)
                    if error is not None:
                        checked.dropped.append(
                            f"{marker.get('name') or marker.get('qualname')}: {error}"
                        )
                        continue
                    accepted = candidate
                    known.add(identity)
            for kind, markers in accepted.items():
                for marker in markers:
                    checked.add(key, kind, marker)
        return checked

    def _plan_error(
        self,
        source: SourceModule,
        index: StatementIndex,
        existing: list[TargetSpec],
        key: TargetKey,
        markers: dict[str, list[dict[str, Any]]],
    ) -> str | None:
        target = target_spec(key, markers, source.sha256)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                plan_rewrite(source, [*existing, target], self.config, index=index)
            except SpecError as error:
                return error.detail
        return None

    def _existing(self, key: TargetKey) -> list[TargetSpec]:
        found = []
        for target in self.config.targets:
            if (key.module is not None and target.module == key.module) or (
                key.file is not None
                and target.file is not None
                and Path(target.file).resolve() == Path(key.file).resolve()
            ):
                found.append(target)
        return found

    def source_of(self, key: TargetKey) -> tuple[SourceModule, StatementIndex]:
        """The parsed source of a target (cached)."""
        cached = self._sources.get(key)
        if cached is not None:
            return cached
        if key.file is not None:
            path = Path(key.file)
            if not path.is_file():
                raise SessionInputError(f"{path}: no such file")
        else:
            assert key.module is not None
            loaded = sys.modules.get(key.module)
            file = getattr(loaded, "__file__", None) if loaded is not None else None
            file = file or self.known_files.get(key.module)
            path = Path(file) if file and file.endswith(".py") else module_source(key.module)
        source = read_source(path, key.module or path.name)
        entry = (source, StatementIndex(source))
        self._sources[key] = entry
        return entry


# -- helpers -------------------------------------------------------------------------------------


def _is_file_label(site: Mapping[str, Any]) -> bool:
    module = str(site.get("module") or "")
    return module.endswith(".py") or module == "__main__"


def _outermost(scope: Scope, start: int, end: int) -> bool:
    parent = scope.parent
    while parent is not None and parent.kind != "module":
        if start <= parent.start and parent.end <= end:
            return False
        parent = parent.parent
    return True


def _innermost_scope(index: StatementIndex, start: int, end: int) -> Scope:
    best = index.module
    for scope in index.functions():
        if (
            scope.start <= start
            and end <= scope.end
            and (best.kind == "module" or scope.start >= best.start)
        ):
            best = scope
    return best


def _statements_in(scope: Scope, start: int, end: int) -> list[Statement]:
    """The statements of ``scope`` that lines ``start..end`` cover, by the rewriter's own rules
    (a range covers whole statements of one block; :func:`resolve_lines`).

    Raises:
        SessionInputError: the lines cover no statement or cross a block boundary.
    """
    try:
        run = resolve_lines(scope, start, end)
    except LookupFailure as failure:
        raise SessionInputError(f"{scope.qualname}: {failure}") from None
    return [s for s in run.statements if s is not scope.docstring]


def _inner_statements(statement: Statement) -> list[Statement]:
    return [s for block in statement.blocks if not block.inline for s in block.statements]


def _defines_scope(statement: Statement) -> bool:
    return isinstance(statement.first_ast, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)


def _is_docstring_or_future(statement: Statement) -> bool:
    node = statement.first_ast
    if (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    ):
        return True
    return isinstance(node, ast.ImportFrom) and node.module == "__future__"


def _callees(statements: Iterable[Statement]) -> list[str]:
    names: list[str] = []
    for statement in statements:
        for node in statement.ast_nodes:
            for sub in ast.walk(node):
                if isinstance(sub, ast.Call):
                    text = dotted_name(sub.func)
                    if text is not None and text not in names:
                        names.append(text)
    return names


def _marker_key(kind: str, marker: dict[str, Any]) -> tuple[Any, ...]:
    if kind == "functions":
        return (kind, marker.get("qualname"))
    if kind == "calls":
        return (kind, marker.get("in"), marker.get("call"))
    return (kind, marker.get("in"), tuple(marker.get("lines", ())))


def _marker_keys(targets: list[TargetSpec]) -> set[tuple[Any, ...]]:
    keys: set[tuple[Any, ...]] = set()
    for target in targets:
        for function in target.functions:
            keys.add(("functions", function.qualname))
        for call in target.calls:
            keys.add(("calls", call.in_, call.call))
        for line_range in target.ranges:
            keys.add(("ranges", line_range.in_, tuple(line_range.lines)))
    return keys


__all__ = [
    "FULL_TRACE_MARKER",
    "EntryPoint",
    "MarkerPlanner",
    "Proposal",
    "SessionInputError",
    "TargetKey",
    "extend_config",
    "target_spec",
]
