"""The marker planner: one level finer, checked against the code and the user's own markers."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from ncompass.session.history import IterationRecord, MarkerTime
from ncompass.session.planner import MarkerPlanner, SessionInputError, TargetKey
from ncompass.spec.models import RewriteConfig
from tests.session import planted
from tests.support.lines import line_of

SOURCE = Path(inspect.getfile(planted)).read_text()
MODULE = "tests.session.planted"
KEY = TargetKey(module=MODULE)


def _lines(text: str) -> int:
    return line_of(SOURCE, text)


COMPUTE_FAST = line_of(SOURCE, "spin(FAST)", 2)  # in compute, before the loop
LOOP_FAST = line_of(SOURCE, "spin(FAST)", 3)  # in the loop body


def _ranges(planner_result: object) -> list[dict[str, object]]:
    return planner_result.markers.get(KEY, {}).get("ranges", [])  # type: ignore[attr-defined]


def test_feedback_on_a_method_proposes_its_statements_with_anchors() -> None:
    planner = MarkerPlanner(RewriteConfig())
    start, end = _lines("def compute"), _lines("return total")
    proposal = planner.for_feedback(MODULE, start, end)
    functions = proposal.markers[KEY]["functions"]
    assert functions == [{"qualname": "Pipeline.compute"}]
    ranges = _ranges(proposal)
    assert [r["lines"] for r in ranges] == [
        [_lines("total = x"), _lines("total = x")],
        [COMPUTE_FAST, COMPUTE_FAST],
        [_lines("for step in range(3):"), _lines("spin(SLOW)  #")],
        [_lines("return total"), _lines("return total")],
    ]
    loop = ranges[2]
    assert loop["first"] == "for step in range(3):"
    assert loop["last"] == "spin(SLOW)  # the planted slow statement"
    assert str(loop["name"]).startswith(f"Pipeline.compute:{_lines('for step')} for step")


def test_feedback_inside_a_loop_proposes_the_loop_body() -> None:
    planner = MarkerPlanner(RewriteConfig())
    proposal = planner.for_feedback(
        MODULE, _lines("for step in range(3):"), _lines("spin(SLOW)  #")
    )
    lines = [r["lines"][0] for r in _ranges(proposal)]
    assert lines == [
        _lines("for step in range(3):"),  # the loop itself, as the parent
        _lines("total += step"),
        LOOP_FAST,
        _lines("spin(SLOW)  #"),
    ]


def test_feedback_on_one_statement_follows_its_calls() -> None:
    planner = MarkerPlanner(RewriteConfig())
    line = _lines("return self.compute(y)")
    proposal = planner.for_feedback(MODULE, line, line)
    assert {"qualname": "Pipeline.compute"} in proposal.markers[KEY]["functions"]


def test_proposals_never_cross_the_users_ranges() -> None:
    user = RewriteConfig.from_dict(
        {
            "version": 1,
            "targets": [
                {
                    "module": MODULE,
                    "ranges": [
                        {
                            "in": "Pipeline.compute",
                            "lines": [_lines("total = x"), COMPUTE_FAST],
                            "name": "mine",
                        }
                    ],
                }
            ],
        }
    )
    planner = MarkerPlanner(user)
    end = _lines("spin(SLOW)  #")
    proposal = planner.for_feedback(MODULE, COMPUTE_FAST, end)
    kept = [r["lines"] for r in _ranges(proposal)]
    assert [COMPUTE_FAST, end] not in kept  # the parent range would cross "mine"
    assert [_lines("for step in range(3):"), end] in kept
    assert any("overlap without nesting" in reason for reason in proposal.dropped)


def test_drilling_follows_the_hottest_marker() -> None:
    planner = MarkerPlanner(RewriteConfig())
    line = _lines("for step in range(3):")
    record = IterationRecord(
        iteration=1,
        spec_version=1,
        spec_path=None,
        trace_path="t.json",
        markers={
            "loop": MarkerTime(2, 50_000.0, 50_000.0, 0.0),
            "cheap": MarkerTime(2, 1_000.0, 1_000.0, 0.0),
        },
        manifest=[
            {
                "name": "loop",
                "kind": "range",
                "module": MODULE,
                "qualname": "Pipeline.compute",
                "start_line": line,
                "end_line": _lines("spin(SLOW)  #"),
                "dynamic": False,
            },
            {
                "name": "cheap",
                "kind": "function",
                "module": MODULE,
                "qualname": "Pipeline.prepare",
                "start_line": 0,
                "end_line": 0,
                "dynamic": False,
            },
        ],
    )
    proposal = planner.drill(record, limit=1)
    assert [r["lines"][0] for r in _ranges(proposal)] == [
        _lines("total += step"),
        LOOP_FAST,
        _lines("spin(SLOW)  #"),
    ]
    assert "drilled into 'loop'" in proposal.reasons[-1]


@pytest.mark.parametrize(
    ("module", "lines", "message"),
    [
        ("no_such_module_anywhere", (1, 2), "not found"),
        (MODULE, (900, 901), "past the end"),
        (MODULE, (9, 8), "not a range"),
    ],
)
def test_bad_feedback_is_a_clear_error(module: str, lines: tuple[int, int], message: str) -> None:
    from ncompass.errors import NcompassError

    with pytest.raises(NcompassError, match=message):
        MarkerPlanner(RewriteConfig()).for_feedback(module, *lines)


def test_feedback_on_blank_lines_is_a_clear_error(tmp_path: Path) -> None:
    target = tmp_path / "blanky.py"
    target.write_text("x = 1\n\n\n# a comment\n\ny = 2\n")
    with pytest.raises(SessionInputError, match="hold no statement"):
        MarkerPlanner(RewriteConfig()).for_feedback(str(target), 2, 4)
