"""Property: for random functions with nested blocks (``if``/``elif``/``else``, ``for``,
``while``, ``try``/``except``, ``with``, ``match``, one-line suites) and random valid markers
(nested ranges, the whole function, calls in statements and in compound headers), the rewritten
function behaves exactly like the original, its ranges are balanced, and every call made gets
exactly one call range."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ncompass.errors import SpecError
from tests.support import recording
from tests.support.modules import ModuleLab

_counter = itertools.count()


@dataclass
class Stmt:
    """A generated statement: its header lines, its child blocks and the header that opens
    each block after the first (``else:``, ``elif ...:``, ``except ...:``)."""

    head: list[str]
    blocks: list[list[Stmt]] = field(default_factory=list)
    more_heads: list[str] = field(default_factory=list)
    start: int = 0
    end: int = 0


def simple(k: int) -> Stmt:
    return Stmt([f"x = (x * 3 + {k}) % 1009"])


def call(k: int) -> Stmt:
    return Stmt([f"log.append({k})"])


def one_line_suite(k: int) -> Stmt:
    return Stmt([f"if x % 2 == {k % 2}: log.append({k})"])


def header_call(k: int, with_call: bool) -> str:
    """A condition prefix that calls ``log.append`` (None, so the condition is unchanged)."""
    return f"log.append({k}) or " if with_call else ""


@st.composite
def blocks(draw: st.DrawFn, depth: int = 0) -> list[Stmt]:
    size = draw(st.integers(1, 3))
    body: list[Stmt] = []
    nested = ["if", "elif", "for", "while", "try", "with", "match"] if depth < 2 else []
    for _ in range(size):
        k = draw(st.integers(0, 50))
        kind = draw(st.sampled_from(["simple", "call", "one_line", *nested]))
        called = draw(st.booleans())  # whether the header calls log.append (a header call)
        if kind == "simple":
            body.append(simple(k))
        elif kind == "call":
            body.append(call(k))
        elif kind == "one_line":
            body.append(one_line_suite(k))
        elif kind == "if":
            children = [draw(blocks(depth + 1))]
            head = [f"if {header_call(k, called)}x % 3 == {k % 3}:"]
            if draw(st.booleans()):
                children.append(draw(blocks(depth + 1)))
            body.append(Stmt(head, children, ["else:"]))
        elif kind == "elif":
            head = [f"if x % 3 == {k % 3}:"]
            children = [draw(blocks(depth + 1)), draw(blocks(depth + 1))]
            elif_head = f"elif {header_call(-k, called)}x % 2 == {k % 2}:"
            body.append(Stmt(head, children, [elif_head]))
        elif kind == "for":
            head = [f"for i in {header_call(k, called)}range({k % 4}):"]
            body.append(Stmt(head, [draw(blocks(depth + 1))]))
        elif kind == "while":
            # w only goes down (an inner loop leaves it at -1), so every loop ends
            head = [f"w = {k % 4}", f"while {header_call(k, called)}(w := w - 1) >= 0:"]
            body.append(Stmt(head, [draw(blocks(depth + 1))]))
        elif kind == "try":
            raiser = Stmt([f"if x % 5 == {k % 5}:", f"    raise ValueError({k})"])
            handler = [call(-k)]
            caught = f"({header_call(-k, True)}ValueError)" if called else "ValueError"
            body.append(
                Stmt(["try:"], [[*draw(blocks(depth + 1)), raiser], handler], [f"except {caught}:"])
            )
        elif kind == "with":
            argument = f"log.append({k})" if called else ""
            head = [f"with contextlib.nullcontext({argument}):"]
            body.append(Stmt(head, [draw(blocks(depth + 1))]))
        else:
            subject = f"{header_call(k, called)}x % 3"
            arms = [draw(blocks(depth + 1)), draw(blocks(depth + 1))]
            body.append(Stmt([f"match {subject}:", f"    case {k % 3}:"], arms, ["    case _:"]))
    return body


def render(body: list[Stmt], indent: int, lines: list[str]) -> None:
    pad = "    " * indent
    for stmt in body:
        stmt.start = len(lines) + 1
        lines.extend(pad + text for text in stmt.head)
        # match arms are indented one level more than the `match` line
        inner = indent + (2 if stmt.head[0].startswith("match") else 1)
        for position, block in enumerate(stmt.blocks):
            if position >= 1:
                lines.append(pad + stmt.more_heads[position - 1])
            render(block, inner, lines)
        stmt.end = len(lines)


def all_blocks(body: list[Stmt]) -> list[list[Stmt]]:
    found = [body]
    for stmt in body:
        for block in stmt.blocks:
            found.extend(all_blocks(block))
    return found


@st.composite
def programs(draw: st.DrawFn) -> tuple[str, list[tuple[int, int]], bool, bool]:
    body = draw(blocks())
    lines = ["import contextlib", "", "def f(x, log):"]
    render(body, 1, lines)
    lines.append("    return x")
    source = "\n".join(lines) + "\n"
    candidates = all_blocks(body)
    ranges: list[tuple[int, int]] = []
    spans: list[tuple[int, int, int]] = []  # (block id, first, last)
    for _ in range(draw(st.integers(0, 3))):
        block_id = draw(st.integers(0, len(candidates) - 1))
        block = candidates[block_id]
        first = draw(st.integers(0, len(block) - 1))
        last = draw(st.integers(first, len(block) - 1))
        ranges.append((block[first].start, block[last].end))
        spans.append((block_id, first, last))
    overlapping = any(
        a[0] == b[0]
        and not (a[2] < b[1] or b[2] < a[1])
        and not ((a[1] <= b[1] and b[2] <= a[2]) or (b[1] <= a[1] and a[2] <= b[2]))
        for a, b in itertools.combinations(spans, 2)
    )
    with_calls = draw(st.booleans()) and "log.append" in source
    return source, ranges, overlapping, with_calls


def run(function: object, x: int) -> tuple[object, list[int]]:
    log: list[int] = []
    try:
        result: object = function(x, log)  # type: ignore[operator]
    except ValueError as error:
        result = ("raised", error.args)
    return result, log


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(program=programs(), inputs=st.lists(st.integers(0, 1000), min_size=1, max_size=4))
def test_random_markers_never_change_behaviour(
    lab: ModuleLab, program: tuple[str, list[tuple[int, int]], bool, bool], inputs: list[int]
) -> None:
    source, ranges, overlapping, with_calls = program
    number = next(_counter)
    lab.write(f"gen_plain_{number}", source)
    plain = lab.load(f"gen_plain_{number}")
    lab.write(f"gen_marked_{number}", source)
    target: dict[str, object] = {
        "module": f"gen_marked_{number}",
        "functions": [{"qualname": "f", "name": "whole"}],
        "ranges": [{"in": "f", "lines": list(r), "name": f"r{i}"} for i, r in enumerate(ranges)],
    }
    if with_calls:
        target["calls"] = [{"in": "f", "call": "log.append", "name": "append"}]
    try:
        marked = lab.load(f"gen_marked_{number}", {"targets": [target]})
    except SpecError as error:
        assert overlapping, f"unexpected rejection: {error}\n{source}\n{ranges}"
        return
    assert not overlapping, f"partially overlapping ranges were accepted:\n{source}\n{ranges}"
    for x in inputs:
        recording.reset()
        result, log = run(marked.f, x)
        assert (result, log) == run(plain.f, x)
        assert recording.balanced()
        entered = recording.names_entered()
        assert entered[0] == "whole"
        if with_calls:  # one range per call made, in statements and headers alike
            assert entered.count("append") == len(log), f"{source}\n{entered}"
