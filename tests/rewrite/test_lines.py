"""Rewritten code reports the original file and lines: tracebacks, inspect, linecache, coverage."""

from __future__ import annotations

import inspect
import sys
import traceback

import coverage
import pytest

from tests.support.lines import line_of, span
from tests.support.modules import ModuleLab

SOURCE = """
def compute(values):
    total = 0
    for value in values:
        if value < 0:
            raise ValueError(f"negative: {value}")
        total += value
    return total

def unused(x):
    y = x + 1
    return y

class Model:
    def forward(self, xs):
        scaled = [x * 2 for x in xs]
        return compute(scaled)
"""

SPEC = {
    "functions": [{"qualname": "**"}],
    "ranges": [
        {"in": "compute", "lines": span(SOURCE, "if value < 0", "total += value")},
        {"in": "compute", "lines": span(SOURCE, "total = 0", "return total")},
    ],
}


def _load(lab: ModuleLab, name: str = "lined") -> object:
    lab.write(name, SOURCE)
    return lab.load(name, {"targets": [{"module": name, **SPEC}]})


def test_traceback_points_at_the_original_lines(lab: ModuleLab) -> None:
    module = _load(lab)
    with pytest.raises(ValueError) as caught:
        module.Model().forward([1, -2])  # type: ignore[attr-defined]
    frames = traceback.extract_tb(caught.value.__traceback__)[-2:]
    assert [(f.name, f.lineno) for f in frames] == [
        ("forward", line_of(SOURCE, "return compute(scaled)")),
        ("compute", line_of(SOURCE, "raise ValueError")),
    ]
    last = frames[-1]
    assert last.filename == module.__file__  # type: ignore[attr-defined]
    assert last.line == 'raise ValueError(f"negative: {value}")'
    rendered = "".join(traceback.format_exception(caught.value))
    assert "raise ValueError" in rendered and "_ncompass" not in rendered


def test_inspect_and_first_lines_match_the_source(lab: ModuleLab) -> None:
    module = _load(lab)
    compute = module.compute  # type: ignore[attr-defined]
    assert compute.__code__.co_firstlineno == line_of(SOURCE, "def compute")
    assert inspect.getsource(compute).splitlines()[0] == "def compute(values):"
    forward = module.Model.forward  # type: ignore[attr-defined]
    assert inspect.getsourcelines(forward)[1] == line_of(SOURCE, "def forward")
    every_line = {line for _, _, line in compute.__code__.co_lines() if line is not None}
    assert every_line <= set(
        range(line_of(SOURCE, "def compute"), line_of(SOURCE, "return total") + 1)
    )


def test_coverage_sees_the_same_lines_as_without_rewrites(lab: ModuleLab) -> None:
    lab.write("plain_lines", SOURCE)
    plain = lab.load("plain_lines")
    marked = _load(lab, "marked_lines")
    results = []
    for module in (plain, marked):
        cov = coverage.Coverage(data_file=None, branch=False)
        cov.start()
        try:
            module.Model().forward([1, 2, 3])  # type: ignore[attr-defined]
        finally:
            cov.stop()
        _, statements, _, missing, _ = cov.analysis2(module.__file__)  # type: ignore[attr-defined]
        results.append((statements, missing))
    assert results[0] == results[1]
    missing = set(results[1][1])
    assert line_of(SOURCE, "raise ValueError") in missing
    assert line_of(SOURCE, "y = x + 1") in missing
    assert line_of(SOURCE, "total += value") not in missing


HEADER_SOURCE = """
class Gate:
    def ready(self):
        return True

    def run(self, values):
        if self.ready() and values[len(values)]:
            return 1
        return 0
"""


@pytest.mark.skipif(sys.version_info < (3, 11), reason="column positions in tracebacks: 3.11+")
def test_columns_on_a_line_with_a_header_call_are_the_original_ones(lab: ModuleLab) -> None:
    lab.write("header_cols", HEADER_SOURCE)
    spec = {"calls": [{"in": "Gate.run", "call": "self.ready"}]}
    module = lab.load("header_cols", {"targets": [{"module": "header_cols", **spec}]})
    with pytest.raises(IndexError) as caught:
        module.Gate().run([1])  # type: ignore[attr-defined]
    frame = traceback.extract_tb(caught.value.__traceback__)[-1]
    line = "        if self.ready() and values[len(values)]:"
    assert frame.line == line.strip()
    assert (frame.colno, frame.end_colno) == (line.index("values["), line.index(":"))
