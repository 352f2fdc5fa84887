"""What ``ncompass session`` prints: the hottest marker, the slowest statement, where they are."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ncompass.session.history import IterationRecord, MarkerTime
from ncompass.session.report import finding, iteration_report, where


def _site(name: str, kind: str, qualname: str, lines: tuple[int, int], file: str) -> dict[str, Any]:
    return {
        "name": name,
        "kind": kind,
        "module": "tinyformer.model",
        "file": file,
        "qualname": qualname,
        "start_line": lines[0],
        "end_line": lines[1],
        "dynamic": False,
    }


@pytest.fixture
def record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> IterationRecord:
    monkeypatch.chdir(tmp_path)
    file = str(tmp_path / "tinyformer" / "model.py")
    return IterationRecord(
        iteration=2,
        spec_version=2,
        spec_path=None,
        trace_path="t.json",
        markers={
            "tinyformer.model:Block.forward": MarkerTime(32, 3000.0, 500.0, 0.0),
            "MLP.forward:63 hidden = self.fc1(x)": MarkerTime(32, 430.0, 430.0, 0.0),
            "Attention.forward:49 out = weights @ v": MarkerTime(32, 280.0, 280.0, 0.0),
        },
        manifest=[
            _site("tinyformer.model:Block.forward", "function", "Block.forward", (78, 81), file),
            _site("MLP.forward:63 hidden = self.fc1(x)", "range", "MLP.forward", (63, 63), file),
            _site(
                "Attention.forward:49 out = weights @ v",
                "range",
                "Attention.forward",
                (49, 49),
                file,
            ),
        ],
    )


def test_a_marker_named_after_its_function_is_not_named_twice(record: IterationRecord) -> None:
    assert where(record, "tinyformer.model:Block.forward") == "lines 78-81 of tinyformer/model.py"


def test_a_statement_says_which_method_it_is_in(record: IterationRecord) -> None:
    assert where(record, "MLP.forward:63 hidden = self.fc1(x)") == (
        "in tinyformer.model:MLP.forward, line 63 of tinyformer/model.py"
    )


def test_the_report_names_the_slowest_statement_when_a_method_is_hottest(
    record: IterationRecord,
) -> None:
    text = iteration_report(record)
    assert "  hottest: tinyformer.model:Block.forward — lines 78-81" in text
    assert (
        "  slowest statement: MLP.forward:63 hidden = self.fc1(x) — in "
        "tinyformer.model:MLP.forward, line 63 of tinyformer/model.py, 0.43 ms self"
    ) in text
    assert "slowest statement: MLP.forward:63" in finding(record)


def test_no_statement_line_when_the_hottest_is_a_statement(record: IterationRecord) -> None:
    record.markers["tinyformer.model:Block.forward"] = MarkerTime(32, 3000.0, 100.0, 0.0)
    assert "slowest statement" not in iteration_report(record)
    assert "slowest statement" not in finding(record)


def test_a_statement_with_a_negligible_share_is_not_named(record: IterationRecord) -> None:
    record.markers["tinyformer.model:Block.forward"] = MarkerTime(32, 90_000.0, 20_000.0, 0.0)
    assert "slowest statement" not in iteration_report(record)  # 430 µs of ~20.7 ms: 2 %
