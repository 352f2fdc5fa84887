"""The planner weighs how often a statement runs: a statement inside a loop of hundreds of
thousands of turns is measured through its loop, not with a marker per turn. The sessions
here are real ``ncompass session run`` processes on real scripts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from ncompass.rewrite.source import parse_source
from ncompass.rewrite.statements import Statement, StatementIndex
from ncompass.session.loop_turns import MAX_MARKED_RUNS, outside_busy_loops, runs_inside
from tests.conftest import REPO

_PLAIN_LOOP = """\
s = 0
for i in range(200000):
    s += i
print(s)
"""

_CALLING_LOOP = """\
def add(total, i):
    doubled = i * 2
    return total + doubled - i


s = 0
for i in range(200_000):
    s = add(s, i)
print(s)
"""


def _session(folder: Path, text: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``session run --json -n 2`` on ``text``: the history and the second spec's targets."""
    script = folder / "loop.py"
    script.write_text(text)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "ncompass", "session", "run", "--json", "-n", "2",
         "-o", str(folder / "traces"), str(script)],
        cwd=folder, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    spec = yaml.safe_load((folder / "traces" / "default" / "specs" / "v002.yaml").read_text())
    return json.loads(done.stdout), spec["targets"]


def _ranges(targets: list[dict[str, Any]]) -> list[list[int]]:
    return [marker["lines"] for target in targets for marker in target.get("ranges", [])]


def test_a_statement_run_200000_times_is_measured_through_its_loop(tmp_path: Path) -> None:
    document, targets = _session(tmp_path, _PLAIN_LOOP)
    assert [3, 3] not in _ranges(targets)  # no marker on `s += i`, run 200,000 times
    assert [2, 3] in _ranges(targets)  # the loop instead
    marker_trace = tmp_path / "traces" / "default-i002.json"
    assert marker_trace.stat().st_size < 1024 * 1024  # it was 51 MB with a range per turn
    answer = document["answer"]
    assert answer["lines"] == [2, 3] and answer["measured_by"] == "markers"


def test_a_function_called_from_such_a_loop_is_not_marked_either(tmp_path: Path) -> None:
    _, targets = _session(tmp_path, _CALLING_LOOP)
    assert all("functions" not in target for target in targets), targets
    # neither `add` nor its statements (lines 2-3); the loop (lines 7-8) is marked
    assert not any(lines[0] in (2, 3) for lines in _ranges(targets))
    assert [7, 8] in _ranges(targets)
    assert (tmp_path / "traces" / "default-i002.json").stat().st_size < 1024 * 1024


# The estimate itself, on the rewriter's own statement index


def _statement(text: str, line: int) -> Statement:
    index = StatementIndex(parse_source(text, None, "example"))
    for scope in [index.module, *index.functions()]:
        found = _find(scope.body.statements if scope.body else [], line)
        if found is not None:
            return found
    raise AssertionError(f"no statement starts at line {line}")


def _find(statements: list[Statement], line: int) -> Statement | None:
    for statement in statements:
        if statement.start == line:
            return statement
        for block in statement.blocks:
            if block.scope is statement.block.scope:
                found = _find(block.statements, line)
                if found is not None:
                    return found
    return None


@pytest.mark.parametrize(
    ("loop", "runs"),
    [
        ("for i in range(200000):", 200_000),
        ("for i in range(2 * 10 ** 5):", 200_000),
        ("for i in range(10, 50, 2):", 20),
        ("for i, x in enumerate([1, 2, 3]):", 3),
        ("for a, b in zip(range(7), range(900)):", 7),
        ("for c in 'abc':", 3),
        ("for i in range(n):", 1),  # unknown: weighed as one turn, marked as before
        ("for item in load():", 1),
        ("for i in range(10 ** 10 ** 10):", 1),  # not computed: unknown
    ],
)
def test_the_turns_a_loop_states_are_counted(loop: str, runs: int) -> None:
    statement = _statement(f"n = 3\n{loop}\n    x = 1\n", 3)
    assert runs_inside(statement) == runs


def test_nested_loops_multiply_and_the_innermost_small_enough_loop_is_marked() -> None:
    text = "for a in range(100):\n    for b in range(1000):\n        x = a * b\n    y = a\n"
    inner = _statement(text, 3)
    assert runs_inside(inner) == 100_000
    assert runs_inside(_statement(text, 4)) == 100
    lifted = outside_busy_loops(inner)
    assert (lifted.start, lifted.end) == (2, 3)  # the inner loop: 100 runs
    assert runs_inside(lifted) <= MAX_MARKED_RUNS
    # a function called 1,000 times: its inner loop's 100 runs become 100,000
    assert (outside_busy_loops(_statement(text, 2), runs=1000).start) == 1


def test_a_loop_else_block_runs_once_per_loop() -> None:
    text = "for i in range(500000):\n    x = i\nelse:\n    y = 1\n"
    assert runs_inside(_statement(text, 4)) == 1
    assert runs_inside(_statement(text, 2)) == 500_000


def test_drilling_one_level_into_such_a_loop_marks_none_of_its_statements(
    tmp_path: Path,
) -> None:
    script = tmp_path / "loop.py"
    script.write_text(
        "s = 0\nt = 0\nfor i in range(200000):\n    s += i\n    t += 1\nprint(s, t)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "ncompass", "session", "run", "--one-level", "-n", "3",
         "-o", str(tmp_path / "traces"), str(script)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    specs = sorted((tmp_path / "traces" / "default" / "specs").glob("v*.yaml"))
    marked = [
        lines
        for spec in specs
        for lines in _ranges(yaml.safe_load(spec.read_text()).get("targets", []))
    ]
    assert [3, 5] in marked  # the loop, once the top level is drilled
    assert [4, 4] not in marked and [5, 5] not in marked, marked
    assert "runs about 200,000 times" in done.stdout + done.stderr
    assert all(trace.stat().st_size < 1024 * 1024 for trace in tmp_path.glob("traces/*-i*.json"))
