"""From a discovery run's call tree to markers down the hot paths, in one step.

The sampled frames say where every hot line is and how the program got there (file, line and
function of each caller), whatever dispatched the call at run time (``attention_interface``,
``functools.partial``, ``nn.Module.__call__``): no static resolution is needed. Each hot line is
widened to its statement with the rewriter's own rule (:func:`resolve_lines`), and the next spec
marks, for each of the hottest statements: every function of your code on its path and every
statement of those functions (at the script's top level, only the statement on the path); and
every function holding a large share of the time with its callees, with all its statements. The
next run measures them all, so it can correct a sampling error between neighbours at any level.
A statement that would run more than ``MAX_MARKED_RUNS`` times (inside a loop of that many
turns, :mod:`ncompass.session.loop_turns`) is measured through its loop instead, and so are the
functions it calls.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ncompass.errors import NcompassError
from ncompass.rewrite.locate import LookupFailure
from ncompass.rewrite.ranges import resolve_lines
from ncompass.rewrite.statements import Block, Scope, Statement, StatementIndex
from ncompass.session.answer import Answer, Ranking, decide
from ncompass.session.callstacks import CodeLine, HotPath, LineTime, StackProfile
from ncompass.session.loop_turns import MAX_MARKED_RUNS, outside_busy_loops, runs_inside
from ncompass.session.planner import MarkerPlanner
from ncompass.session.proposal import Proposal, TargetKey
from ncompass.spec.models import MODULE_LEVEL

# a statement this close to the hottest one (share of its time) is marked too: it may be a tie
_RUNNER_UP = 0.5
_MAX_CANDIDATES = 3
# functions holding this share of the steady-state time (with their callees) are marked too,
# at most this many: the sampler's estimate can be off between neighbouring subtrees
_HOT_FUNCTION_SHARE = 0.15
_MAX_HOT_FUNCTIONS = 12


@dataclass(frozen=True)
class HotStatement:
    """A statement of your code and the discovery run's time for it.

    Attributes:
        file, module, qualname: Where it is.
        start, end: Its lines.
        text: Its first line, stripped.
        time: Its time (lines of the statement summed).
        path: The heaviest path of frames down to it.
        leaves: The sampled lines credited to it: its own lines, and lines where no statement
            is (the ``def`` line of a function ``torch.compile`` compiled) that it called.
    """

    file: str
    module: str
    qualname: str
    start: int
    end: int
    text: str
    time: LineTime
    path: HotPath
    leaves: list[CodeLine]


def key_of(line: CodeLine) -> TargetKey:
    """The target a frame's code is marked through: the script by file, a module by name."""
    if line.module in ("__main__", "__mp_main__", "") or not line.module:
        return TargetKey(file=line.file)
    return TargetKey(module=line.module)


def hot_statements(
    planner: MarkerPlanner, profile: StackProfile, limit: int = 40
) -> list[HotStatement]:
    """The statements of the ``limit`` hottest lines, their lines' times summed, hottest first
    (by GPU time when the run had GPU work)."""
    found: dict[tuple[str, str, int, int], HotStatement] = {}
    for line, time in profile.ranked()[:limit]:
        if profile.basis_us(time) <= 0:
            break
        leaf = line
        located = statement_at(planner, line)
        path = profile.paths[line]
        while located is None and len(path.frames) > 1:
            # No statement at that line: the ``def`` line, where a call is entering the function
            # or where a frame torch.compile compiled runs its graph; the calling statement
            # holds that time.
            path = HotPath(path.frames[:-1], path.weight_us)
            line = path.leaf
            located = statement_at(planner, line)
        if located is None:
            continue
        scope, statement = located
        identity = (line.file, scope.qualname, statement.start, statement.end)
        known = found.get(identity)
        if known is None:
            text = planner.source_of(key_of(line))[0].line(statement.start).strip()
            found[identity] = HotStatement(
                line.file,
                line.module,
                scope.qualname,
                statement.start,
                statement.end,
                text,
                LineTime(time.self_us, time.total_us, time.gpu_us, time.samples),
                path,
                [leaf],
            )
        else:
            known.leaves.append(leaf)
            known.time.self_us += time.self_us
            known.time.total_us += time.total_us
            known.time.gpu_us += time.gpu_us
            known.time.samples += time.samples
            if path.weight_us > known.path.weight_us:
                found[identity] = HotStatement(**{**known.__dict__, "path": path})
    return sorted(found.values(), key=lambda s: -profile.basis_us(s.time))


def candidates(statements: list[HotStatement], profile: StackProfile) -> list[HotStatement]:
    """The hottest statement and those within reach of it (possible ties), at most three."""
    if not statements:
        return []
    top = profile.basis_us(statements[0].time)
    return [s for s in statements if profile.basis_us(s.time) >= _RUNNER_UP * top][:_MAX_CANDIDATES]


def plan_hot_paths(
    planner: MarkerPlanner, profile: StackProfile, chosen: list[HotStatement]
) -> Proposal:
    """Markers down the paths to ``chosen`` statements (checked against the code like every
    proposal)."""
    proposal = Proposal()
    for frame in {*(f for s in chosen for f in s.path.frames), *profile.functions}:
        if frame.module:
            planner.known_files.setdefault(frame.module, frame.file)
    seen_functions: set[tuple[TargetKey, str]] = set()
    # functions called from inside a loop of too many turns: each marker there would record
    # every call (loop_turns.py), so the loop is marked instead
    too_often: set[tuple[TargetKey, str]] = set()
    busy_loops: list[Statement] = []  # the loops marked instead: what they call runs too often
    total = profile.total_us or 1.0
    for statement in chosen:
        runs = 1  # the estimated calls of the frame's function
        frames = statement.path.frames
        for depth, frame in enumerate(frames):
            located = statement_at(planner, frame)
            if located is None:
                continue
            scope, on_path = located
            key = key_of(frame)
            index = planner.source_of(key)[1]
            marked = outside_busy_loops(on_path, runs)
            proposal.add(key, "ranges", planner.range_marker(index, scope, [marked]))
            if scope.kind == "function" and (key, scope.qualname) not in seen_functions:
                seen_functions.add((key, scope.qualname))
                proposal.add(key, "functions", {"qualname": scope.qualname})
                for sibling in _all_statements(scope, runs):
                    proposal.add(key, "ranges", planner.range_marker(index, scope, [sibling]))
            if marked is not on_path:
                too_often.update((key_of(f), f.qualname) for f in frames[depth + 1 :])
                busy_loops.append(marked)
                proposal.reasons.append(
                    f"{scope.qualname}:{on_path.start} runs about "
                    f"{runs_inside(on_path, runs):,} times (the loop at line {marked.start}): "
                    f"marked the loop, not what runs in it ({MAX_MARKED_RUNS:,} times at most)"
                )
                break
            runs = runs_inside(on_path, runs)
        share = 100 * profile.basis_us(statement.time) / total
        depth = len(statement.path.frames)
        proposal.reasons.append(
            f"hot path to {statement.qualname}:{statement.start} {statement.text} "
            f"({share:.0f}% of the steady-state {'GPU' if profile.gpu else 'CPU'} time in the "
            f"discovery run, {depth} frames deep): markers on every function and statement of it"
        )
    added = 0
    steady = profile.steady_us or 1.0
    for function, spent in sorted(profile.functions.items(), key=lambda item: -item[1]):
        if spent < _HOT_FUNCTION_SHARE * steady or added >= _MAX_HOT_FUNCTIONS:
            break
        if function.qualname == MODULE_LEVEL:
            continue
        key = key_of(function)
        if (key, function.qualname) in seen_functions | too_often:
            continue
        if any(_calls(loop, function.qualname) for loop in busy_loops):
            continue  # called in a loop of too many turns (its frames may be folded away)
        try:
            index = planner.source_of(key)[1]
        except (NcompassError, OSError, SyntaxError):
            continue
        hot_scope = index.scopes.get(function.qualname)
        if hot_scope is None or hot_scope.kind != "function":
            continue
        seen_functions.add((key, function.qualname))
        proposal.add(key, "functions", {"qualname": function.qualname})
        for inner in _all_statements(hot_scope):
            proposal.add(key, "ranges", planner.range_marker(index, hot_scope, [inner]))
        added += 1
    if added:
        proposal.reasons.append(
            f"and {added} more function{'s' if added != 1 else ''} holding "
            f"{100 * _HOT_FUNCTION_SHARE:.0f}% or more of the steady-state time with their "
            "callees: every statement of them, so the next run can correct the estimate"
        )
    _deduplicate(proposal)
    return planner.checked(proposal)


def answer_from_samples(
    profile: StackProfile, statements: list[HotStatement], runs: int
) -> Answer | None:
    """The discovery run's own answer (an estimate: sampled CPU time, or GPU time credited to
    the nearest sample), ranked per third of the steady-state run."""
    if not statements:
        return None
    names: dict[str, dict[str, Any]] = {}
    per_repeat: dict[str, list[float]] = {}
    for statement in statements:
        key = f"{statement.file}:{statement.start}"
        names[key] = {
            "file": statement.file,
            "lines": (statement.start, statement.end),
            "statement": statement.text,
            "function": f"{statement.module}:{statement.qualname}",
        }
        thirds = [0.0, 0.0, 0.0]
        for leaf in statement.leaves:
            windows = profile.windows.get(leaf, [0.0, 0.0, 0.0])
            thirds = [a + b for a, b in zip(thirds, windows, strict=True)]
        per_repeat[key] = thirds
    totals = [0.0, 0.0, 0.0]
    for windows in profile.windows.values():
        totals = [a + b for a, b in zip(totals, windows, strict=True)]
    if profile.gpu:  # GPU credit has no thirds: one repeat
        per_repeat = {
            key: [profile.basis_us(s.time)] for key, s in zip(names, statements, strict=True)
        }
        totals = [profile.total_us]
    answer = decide(
        Ranking(names, per_repeat, totals), runs, "gpu" if profile.gpu else "cpu", "samples"
    )
    if answer is not None:
        answer.setup_ms = {kind: us / 1000 for kind, us in profile.setup_us.items()}
        top = next(
            (s for s in statements if (s.file, (s.start, s.end)) == (answer.file, answer.lines)),
            None,
        )
        answer.process = profile.process_of(top.leaves) if top is not None else None
    return answer


def statement_at(planner: MarkerPlanner, line: CodeLine) -> tuple[Scope, Statement] | None:
    """The function (or module top level) of a frame and the statement its line is in."""
    try:
        _, index = planner.source_of(key_of(line))
    except (NcompassError, OSError, SyntaxError):
        return None
    scope = index.scopes.get(line.qualname) or _scope_by_line(index, line.line)
    if scope is None or scope.body is None:
        return None
    try:
        run = resolve_lines(scope, line.line, line.line)
    except LookupFailure:  # the ``def`` line itself: the call is entering the function
        return None
    return scope, _outside_while(run.statements[0])


def _outside_while(statement: Statement) -> Statement:
    """The outermost ``while`` loop around a statement, or the statement: a ``while`` may spin
    millions of times, and a marker inside it would record every turn."""
    chosen = statement
    owner = statement.block.parent
    while owner is not None and not isinstance(
        owner.first_ast, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
    ):
        if isinstance(owner.first_ast, ast.While):
            chosen = owner
        owner = owner.block.parent
    return chosen


def _calls(statement: Statement, qualname: str) -> bool:
    """Whether ``statement`` calls a function named like the last part of ``qualname``."""
    name = qualname.rsplit(".", 1)[-1]
    for tree in statement.ast_nodes:
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                called = node.func
                if (isinstance(called, ast.Name) and called.id == name) or (
                    isinstance(called, ast.Attribute) and called.attr == name
                ):
                    return True
    return False


def _scope_by_line(index: StatementIndex, line: int) -> Scope | None:
    best: Scope | None = None
    for scope in index.functions():
        if scope.start <= line <= scope.end and (best is None or scope.start >= best.start):
            best = scope
    return best if best is not None else index.scopes.get(MODULE_LEVEL)


def _all_statements(scope: Scope, runs: int = 1) -> Iterator[Statement]:
    """Every statement of a function, in nested blocks too, but not inside nested functions,
    nor inside a loop where it would run more than ``MAX_MARKED_RUNS`` times (the function
    itself running ``runs`` times)."""
    assert scope.body is not None

    def walk(block: Block) -> Iterator[Statement]:
        for statement in block.statements:
            if statement is scope.docstring or block.scope is not scope:
                continue
            if isinstance(
                statement.first_ast, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
            ):
                continue
            if runs_inside(statement, runs) > MAX_MARKED_RUNS:
                continue  # its loop is marked; what is inside it runs too often
            yield statement
            if isinstance(statement.first_ast, ast.While):
                continue  # its statements would record every turn of the loop
            for child in statement.blocks:
                if not child.inline and child.scope is scope:
                    yield from walk(child)

    yield from walk(scope.body)


def _deduplicate(proposal: Proposal) -> None:
    for kinds in proposal.markers.values():
        for kind, markers in kinds.items():
            unique: dict[tuple[object, ...], dict[str, object]] = {}
            for marker in markers:
                identity = (
                    marker.get("qualname"),
                    marker.get("in"),
                    tuple(marker.get("lines", ())),
                )
                unique.setdefault(identity, marker)
            kinds[kind] = list(unique.values())


__all__ = [
    "HotStatement",
    "answer_from_samples",
    "candidates",
    "hot_statements",
    "key_of",
    "plan_hot_paths",
]
