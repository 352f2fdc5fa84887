"""Rewritten code behaves exactly like the original, for every construct markers can wrap."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import pytest

from tests.support import recording
from tests.support.lines import line_of, span
from tests.support.modules import ModuleLab


def _both(lab: ModuleLab, source: str, spec_target: dict[str, Any]) -> tuple[Any, Any]:
    """The module imported plain (``plain_*``) and rewritten (``marked_*``), same source."""
    suffix = str(abs(hash(source)) % 10**8)
    lab.write(f"plain_{suffix}", source)
    plain = lab.load(f"plain_{suffix}")
    lab.write(f"marked_{suffix}", source)
    marked = lab.load(
        f"marked_{suffix}", {"targets": [{"module": f"marked_{suffix}", **spec_target}]}
    )
    return plain, marked


BRANCHES = """
def classify(x):
    if x < 0:
        kind = "negative"
        sign = -1
    elif x == 0:
        kind = "zero"
        sign = 0
    else:
        kind = "positive"
        sign = 1
    return kind, sign
"""


@pytest.mark.parametrize("value", [-3, 0, 5])
def test_ranges_in_if_elif_else_are_wrapped(lab: ModuleLab, value: int) -> None:
    plain, marked = _both(
        lab,
        BRANCHES,
        {
            "ranges": [
                {
                    "in": "classify",
                    "lines": span(BRANCHES, 'kind = "negative"', "sign = -1"),
                    "name": "if",
                },
                {
                    "in": "classify",
                    "lines": span(BRANCHES, 'kind = "zero"', "sign = 0"),
                    "name": "elif",
                },
                {
                    "in": "classify",
                    "lines": span(BRANCHES, 'kind = "positive"', "sign = 1"),
                    "name": "else",
                },
            ]
        },
    )
    assert marked.classify(value) == plain.classify(value)
    expected = {-3: "if", 0: "elif", 5: "else"}[value]
    assert recording.names_entered() == [expected]
    assert recording.balanced()


def test_range_starting_on_else_line_means_the_else_body(lab: ModuleLab) -> None:
    plain, marked = _both(
        lab,
        BRANCHES,
        {"ranges": [{"in": "classify", "lines": span(BRANCHES, "else:", "sign = 1"), "name": "e"}]},
    )
    assert marked.classify(1) == plain.classify(1)
    assert recording.names_entered() == ["e"]
    assert marked.classify(-1) == plain.classify(-1)
    assert recording.names_entered() == ["e"]


LOOPS = """
def loops(n):
    total = 0
    for i in range(n):
        total += i
        if i == 100:
            break
    else:
        total += 1000
    while n > 0:
        n -= 1
        total += 2
    else:
        total += 5
    return total
"""


@pytest.mark.parametrize("n", [0, 3, 200])
def test_ranges_in_loop_bodies_and_their_else(lab: ModuleLab, n: int) -> None:
    plain, marked = _both(
        lab,
        LOOPS,
        {
            "ranges": [
                {"in": "loops", "lines": span(LOOPS, "total += i", "break"), "name": "for"},
                {"in": "loops", "lines": [line_of(LOOPS, "total += 1000")] * 2, "name": "for-else"},
                {"in": "loops", "lines": span(LOOPS, "n -= 1", "total += 2"), "name": "while"},
                {"in": "loops", "lines": [line_of(LOOPS, "total += 5")] * 2, "name": "while-else"},
                {
                    "in": "loops",
                    "lines": span(LOOPS, "for i in range(n):", "total += 1000"),
                    "name": "whole-for",
                },
            ]
        },
    )
    assert marked.loops(n) == plain.loops(n)
    entered = recording.names_entered()
    assert entered.count("for") == min(n, 101)
    assert entered.count("while") == n
    assert ("for-else" in entered) == (n <= 100)
    assert entered.count("whole-for") == 1
    assert recording.balanced()


TRY = """
def guarded(value, log):
    try:
        log.append("try")
        result = 10 // value
    except ZeroDivisionError:
        log.append("except")
        result = None
    else:
        log.append("else")
    finally:
        log.append("finally")
    return result
"""


@pytest.mark.parametrize("value", [0, 5])
def test_ranges_in_try_except_else_finally(lab: ModuleLab, value: int) -> None:
    plain, marked = _both(
        lab,
        TRY,
        {
            "ranges": [
                {
                    "in": "guarded",
                    "lines": span(TRY, 'log.append("try")', "result = 10"),
                    "name": "try",
                },
                {
                    "in": "guarded",
                    "lines": span(TRY, 'log.append("except")', "result = None"),
                    "name": "except",
                },
                {
                    "in": "guarded",
                    "lines": [line_of(TRY, 'log.append("else")')] * 2,
                    "name": "else",
                },
                {
                    "in": "guarded",
                    "lines": [line_of(TRY, 'log.append("finally")')] * 2,
                    "name": "finally",
                },
            ]
        },
    )
    plain_log: list[str] = []
    marked_log: list[str] = []
    assert marked.guarded(value, marked_log) == plain.guarded(value, plain_log)
    assert marked_log == plain_log
    assert recording.names_entered() == [n for n in plain_log]
    # the exception inside the "try" range reached the context, and still propagated to except
    if value == 0:
        assert ("try", ZeroDivisionError) in recording.EXCEPTIONS
    assert recording.balanced()


WITH_AND_MATCH = """
import contextlib

def with_block(items):
    with contextlib.suppress(KeyError):
        first = items["a"]
        second = items["b"]
        return first + second
    return -1

def matcher(command):
    match command.split():
        case ["go", direction]:
            moved = direction
            return "go " + moved
        case ["stop"]:
            return "stop"
        case _:
            other = command
            return "unknown " + other
"""


@pytest.mark.parametrize("items", [{"a": 1, "b": 2}, {"a": 1}])
def test_range_in_with_block_keeps_suppression(lab: ModuleLab, items: dict[str, int]) -> None:
    plain, marked = _both(
        lab,
        WITH_AND_MATCH,
        {
            "ranges": [
                {
                    "in": "with_block",
                    "lines": span(WITH_AND_MATCH, 'first = items["a"]', "return first"),
                    "name": "w",
                }
            ]
        },
    )
    assert marked.with_block(items) == plain.with_block(items)
    assert recording.names_entered() == ["w"]
    assert recording.balanced()


@pytest.mark.parametrize("command", ["go north", "stop", "dance"])
def test_ranges_in_match_arms(lab: ModuleLab, command: str) -> None:
    plain, marked = _both(
        lab,
        WITH_AND_MATCH,
        {
            "ranges": [
                {
                    "in": "matcher",
                    "lines": span(WITH_AND_MATCH, "moved = direction", 'return "go "'),
                    "name": "go",
                },
                {
                    "in": "matcher",
                    "lines": span(WITH_AND_MATCH, "other = command", 'return "unknown "'),
                    "name": "other",
                },
            ]
        },
    )
    assert marked.matcher(command) == plain.matcher(command)
    expected = {"go north": ["go"], "stop": [], "dance": ["other"]}[command]
    assert recording.names_entered() == expected


NESTED = """
def nested(n):
    a = 1
    b = 2
    for i in range(n):
        a += i
        b += a
    c = a + b
    return c
"""


@pytest.mark.parametrize("order", [(0, 1, 2), (2, 1, 0), (1, 2, 0)])
def test_nested_ranges_given_in_any_order(lab: ModuleLab, order: tuple[int, int, int]) -> None:
    ranges = [
        {"in": "nested", "lines": span(NESTED, "a = 1", "c = a + b"), "name": "outer"},
        {"in": "nested", "lines": span(NESTED, "for i in range(n):", "b += a"), "name": "loop"},
        {"in": "nested", "lines": [line_of(NESTED, "b += a")] * 2, "name": "inner"},
    ]
    plain, marked = _both(lab, NESTED, {"ranges": [ranges[i] for i in order]})
    assert marked.nested(3) == plain.nested(3)
    assert recording.names_entered() == ["outer", "loop", "inner", "inner", "inner"]
    assert recording.balanced()


MODULE_LEVEL = """
import math

VALUES = [math.sqrt(i) for i in range(5)]
TOTAL = sum(VALUES)

def total():
    return TOTAL
"""


def test_module_level_range_runs_once_at_import(lab: ModuleLab) -> None:
    plain, marked = _both(
        lab,
        MODULE_LEVEL,
        {
            "ranges": [
                {
                    "in": "<module>",
                    "lines": span(MODULE_LEVEL, "VALUES =", "TOTAL ="),
                    "name": "setup",
                }
            ]
        },
    )
    assert marked.total() == plain.total()
    assert marked.total() == plain.total()
    assert recording.names_entered() == ["setup"]  # once, at import
    assert marked.VALUES == plain.VALUES


ASYNC = """
import asyncio

async def fetch(n):
    await asyncio.sleep(0)
    value = n * 2
    await asyncio.sleep(0)
    return value

async def stream(n):
    for i in range(n):
        await asyncio.sleep(0)
        yield i * i

async def gather(n):
    results = await asyncio.gather(*(fetch(i) for i in range(n)))
    collected = [x async for x in stream(n)]
    return results, collected
"""


def test_async_functions_and_async_generators(lab: ModuleLab) -> None:
    plain, marked = _both(
        lab,
        ASYNC,
        {
            "functions": [{"qualname": "fetch"}, {"qualname": "stream"}],
            "ranges": [
                {
                    "in": "fetch",
                    "lines": span(ASYNC, "await asyncio.sleep(0)", "value = n * 2"),
                    "name": "r",
                }
            ],
        },
    )
    assert asyncio.run(marked.gather(4)) == asyncio.run(plain.gather(4))
    entered = recording.names_entered()
    assert entered.count("r") == 4
    assert sum(name.endswith(":fetch") for name in entered) == 4
    assert sum(name.endswith(":stream") for name in entered) == 1
    assert len(recording.EVENTS) == 2 * len(entered)


GENERATORS = """
def countdown(n):
    while n > 0:
        yield n
        n -= 1
    return "done"

def delegate(n):
    result = yield from countdown(n)
    yield result
"""


def test_generators_keep_yield_send_and_return(lab: ModuleLab) -> None:
    plain, marked = _both(lab, GENERATORS, {"functions": [{"qualname": "*"}]})
    assert list(marked.delegate(3)) == list(plain.delegate(3))
    gen = marked.countdown(2)
    assert next(gen) == 2
    gen.close()  # GeneratorExit passes through the marker
    assert recording.balanced()


DECORATED = """
import functools

def twice(function):
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        return function(*args, **kwargs) * 2
    return wrapper

class Shape:
    \"\"\"A shape.\"\"\"

    sides = 4

    def __init__(self, size):
        \"\"\"Make one.\"\"\"
        self.size = size

    @property
    def area(self):
        \"\"\"The area.\"\"\"
        return self.size * self.size

    @area.setter
    def area(self, value):
        self.size = value ** 0.5

    @classmethod
    def unit(cls):
        return cls(1)

    @staticmethod
    def describe(n):
        return f"{n} sides"

    @twice
    @functools.lru_cache(maxsize=None)
    def perimeter(self):
        return self.sides * self.size
"""


def test_decorated_methods_and_docstrings(lab: ModuleLab) -> None:
    plain, marked = _both(lab, DECORATED, {"functions": [{"qualname": "Shape.*"}]})
    shape, reference = marked.Shape(3), plain.Shape(3)
    assert shape.area == reference.area == 9
    shape.area = 16
    assert shape.size == 4.0
    assert marked.Shape.unit().size == 1
    assert marked.Shape.describe(4) == "4 sides"
    assert shape.perimeter() == 32
    assert marked.Shape.__doc__ == "A shape."
    assert marked.Shape.__init__.__doc__ == "Make one."
    assert marked.Shape.area.__doc__ == "The area."
    assert inspect.getsource(marked.Shape.unit) == inspect.getsource(plain.Shape.unit)
    assert recording.balanced()
    assert {n.rsplit(":", 1)[1] for n in recording.names_entered()} >= {
        "Shape.area",
        "Shape.unit",
        "Shape.describe",
        "Shape.perimeter",
        "Shape.__init__",
    }


CLOSURES = """
class Base:
    def greet(self):
        return "base"

class Child(Base):
    def greet(self):
        prefix = super().greet()
        return prefix + "+child"

def counter():
    count = 0
    def bump():
        nonlocal count
        count += 1
        return count
    return bump

TOTAL = 0

def add(n):
    global TOTAL
    TOTAL += n
    return TOTAL
"""


def test_closures_nonlocal_global_and_super(lab: ModuleLab) -> None:
    plain, marked = _both(
        lab,
        CLOSURES,
        {
            "functions": [{"qualname": "**"}],
            "ranges": [
                {
                    "in": "counter.bump",
                    "lines": span(CLOSURES, "nonlocal count", "count += 1"),
                    "name": "b",
                }
            ],
        },
    )
    assert marked.Child().greet() == plain.Child().greet() == "base+child"
    bump = marked.counter()
    assert [bump(), bump(), bump()] == [1, 2, 3]
    assert marked.add(2) == 2 and marked.add(3) == 5
    assert recording.names_entered().count("b") == 3
    assert recording.balanced()


def test_exceptions_and_return_values_pass_through(lab: ModuleLab) -> None:
    source = """
    class Boom(Exception):
        pass

    def explode(flag):
        if flag:
            raise Boom("bang")
        return {"ok": True}
    """
    _plain, marked = _both(lab, source, {"functions": [{"qualname": "explode"}]})
    assert marked.explode(False) == {"ok": True}
    with pytest.raises(marked.Boom, match="bang"):
        marked.explode(True)
    assert (f"{marked.__name__}:explode", marked.Boom) in recording.EXCEPTIONS
    assert recording.balanced()


def test_one_line_function_bodies_are_wrapped(lab: ModuleLab) -> None:
    source = """
    def square(x): return x * x
    class K:
        def get(self): return 7
    """
    plain, marked = _both(lab, source, {"functions": [{"qualname": "**"}]})
    assert marked.square(5) == plain.square(5) == 25
    assert marked.K().get() == 7
    assert len(recording.names_entered()) == 2


def test_call_markers_wrap_each_calling_statement(lab: ModuleLab) -> None:
    source = """
    def helper(x):
        return x + 1

    def caller(n):
        a = helper(n)
        b = [helper(i) for i in range(n)]
        return a + sum(b) + len(str(helper))
    """
    plain, marked = _both(lab, source, {"calls": [{"in": "caller", "call": "helper", "name": "h"}]})
    assert marked.caller(3) == plain.caller(3)
    # the two statements that call it; `str(helper)` only names it
    assert recording.names_entered() == ["h", "h"]


HEADERS = """
import asyncio


class Gate:
    def __init__(self, idx):
        self.idx = idx
        self.seen = []

    def ready(self, x):
        self.seen.append(x)
        return x > 0

    def items(self, n):
        return list(range(n))

    def run(self, x):
        total = 0
        if self.ready(x) and self.ready(x + 1):
            total += 1
        elif self.ready(-x):
            total -= 1
        while self.ready(x - total):
            total += 1
        for i in self.items(3): total += i
        match self.items(2):
            case [0, one]:
                total += one
        with open(__file__) as handle:
            total += self.ready(len(handle.readline()))
        return total, self.seen

    async def check(self, x):
        await asyncio.sleep(0)
        return x > 0

    async def arun(self, x):
        if await self.check(x):
            return "yes"
        return "no"
"""


@pytest.mark.parametrize("value", [2, -1, 0])
def test_call_markers_in_headers_wrap_the_calls(lab: ModuleLab, value: int) -> None:
    plain, marked = _both(
        lab,
        HEADERS,
        {
            "calls": [
                {"in": "Gate.run", "call": "self.ready", "name": "ready[{self.idx}]"},
                {"in": "Gate.run", "call": "self.items", "name": "items"},
                {"in": "Gate.arun", "call": "self.check", "name": "check"},
            ]
        },
    )
    assert marked.Gate(7).run(value) == plain.Gate(7).run(value)
    seen = plain.Gate(7).run(value)[1]
    entered = recording.names_entered()
    # one range per evaluation of a header call (short-circuits included), each call alone;
    # the `with` body's call is a statement of its own (one range)
    assert entered.count("ready[7]") == len(seen)
    assert entered.count("items") == 2
    assert recording.balanced()
    recording.reset()
    assert asyncio.run(marked.Gate(1).arun(value)) == asyncio.run(plain.Gate(1).arun(value))
    assert recording.names_entered() == ["check"]
    assert recording.balanced()


def test_a_header_call_range_covers_the_call_not_the_body(lab: ModuleLab) -> None:
    source = """
    from tests.support import recording

    def probe():
        return True

    def body_runs_outside():
        if probe():
            recording.EVENTS.append(("body", ""))
    """
    _, marked = _both(lab, source, {"calls": [{"in": "body_runs_outside", "call": "probe"}]})
    recording.reset()
    marked.body_runs_outside()
    assert [kind for kind, _ in recording.EVENTS] == ["enter", "exit", "body"]


def test_a_header_call_that_raises_keeps_its_traceback_line(lab: ModuleLab) -> None:
    source = """
    def fail(x):
        raise ValueError(x)

    def guarded(x):
        while fail(x):
            pass
    """
    _, marked = _both(lab, source, {"calls": [{"in": "guarded", "call": "fail"}]})
    with pytest.raises(ValueError) as raised:
        marked.guarded(1)
    lines = [entry.lineno for entry in raised.traceback if entry.name == "guarded"]
    assert lines == [line_of(source, "while fail(x):") - 1]  # traceback lines are 0-based
    assert recording.balanced()


def test_name_templates_are_evaluated_in_the_function(lab: ModuleLab) -> None:
    source = """
    class Layer:
        def __init__(self, index):
            self.index = index

        def forward(self, x):
            return x + self.index
    """
    _, marked = _both(
        lab, source, {"functions": [{"qualname": "Layer.forward", "name": "layer[{self.index}]"}]}
    )
    assert [marked.Layer(i).forward(1) for i in range(3)] == [1, 2, 3]
    assert recording.names_entered() == ["layer[0]", "layer[1]", "layer[2]"]


def test_name_templates_see_closures_and_private_names(lab: ModuleLab) -> None:
    source = """
    class Secretive:
        def __init__(self):
            self.__tag = "hidden"

        def run(self, n):
            return n + 1

    def outer(label):
        def inner(x):
            return f"{label}:{x}"
        return inner
    """
    _, marked = _both(
        lab,
        source,
        {
            "functions": [
                {"qualname": "Secretive.run", "name": "run[{self.__tag}:{n}]"},
                {"qualname": "outer.inner", "name": "inner[{label}/{x}]"},
            ]
        },
    )
    assert marked.Secretive().run(2) == 3
    assert marked.outer("L")(5) == "L:5"
    assert recording.names_entered() == ["run[hidden:2]", "inner[L/5]"]


def test_a_failing_template_falls_back_to_its_text(lab: ModuleLab) -> None:
    source = """
    def f(x):
        return x * 2
    """
    _, marked = _both(lab, source, {"functions": [{"qualname": "f", "name": "f[{x.missing}]"}]})
    with pytest.warns(UserWarning, match="could not be computed"):
        assert marked.f(4) == 8
    assert recording.names_entered() == ["f[{x.missing}]"]


def test_doubled_braces_are_literal_braces_in_marker_names(lab: ModuleLab) -> None:
    source = """
    def f(x):
        return x * 2

    def g(x):
        if f(x):
            return f(x)
    """
    _, marked = _both(
        lab,
        source,
        {
            "functions": [{"qualname": "f", "name": "f{{static}}"}],
            "calls": [{"in": "g", "call": "f", "name": "call{{{x}}}"}],
        },
    )
    assert marked.g(3) == 6
    assert recording.names_entered() == ["call{3}", "f{static}", "call{3}", "f{static}"]


def test_awaited_header_calls_name_their_range_in_the_awaiting_frame(lab: ModuleLab) -> None:
    source = """
    import asyncio

    async def check(x):
        await asyncio.sleep(0.001 * (3 - x))
        return x > 1

    async def gated(x):
        if await check(x):
            return x
        return -x

    async def main():
        return await asyncio.gather(*(gated(x) for x in range(3)))
    """
    plain, marked = _both(
        lab, source, {"calls": [{"in": "gated", "call": "check", "name": "c[{x}]"}]}
    )
    assert asyncio.run(marked.main()) == asyncio.run(plain.main()) == [0, -1, 2]
    assert sorted(recording.names_entered()) == ["c[0]", "c[1]", "c[2]"]
    # each range lasts until its awaited result: the three tasks' ranges overlap
    assert [kind for kind, _ in recording.EVENTS] == ["enter"] * 3 + ["exit"] * 3
