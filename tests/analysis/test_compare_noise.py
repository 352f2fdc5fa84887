"""What compare says about the runs behind its verdicts: a contended side, too few runs, and the
reason for each verdict (issue 22, item 7)."""

from __future__ import annotations

import random
from pathlib import Path

from ncompass.analysis.comparison import check_slowdown, compare
from ncompass.analysis.comparison.noise import runs_needed
from tests.traces.builders import TraceBuilder

OPERATORS = ("aten::mm", "aten::add", "aten::relu", "aten::softmax", "aten::copy_")


def _run(path: Path, *, seed: int, stretched: float = 0.0, scale: float = 1.0) -> Path:
    """A run of 40 steps calling five operators; ``stretched`` of the calls take 3x longer, as
    when another process takes the CPU; ``scale`` slows every call (a real change)."""
    rng = random.Random(seed)
    builder, clock = TraceBuilder(), 0.0
    for _step in range(40):
        start = clock
        for index, name in enumerate(OPERATORS):
            duration = (100 + 20 * index) * scale * rng.uniform(0.97, 1.03)
            if rng.random() < stretched:
                duration *= 3
            builder.cpu_op(name, clock, duration)
            clock += duration + 1
        builder.marker("step", start, clock - start)
        clock += 5
    return builder.write(path)


def test_a_contended_side_is_named(tmp_path: Path) -> None:
    quiet = _run(tmp_path / "quiet.json", seed=1)
    busy = _run(tmp_path / "busy.json", seed=2, stretched=0.25)
    comparison = compare([quiet], [busy])
    [contended] = [w for w in comparison.warnings if "contended" in w]
    assert contended.startswith("the after side looks contended: its calls spread")
    assert "**Warning:** the after side looks contended" in comparison.to_markdown()
    mirrored = compare([busy], [quiet])
    assert any(w.startswith("the before side looks contended") for w in mirrored.warnings)
    calm = compare([quiet], [_run(tmp_path / "quiet2.json", seed=3)])
    assert not [w for w in calm.warnings if "contended" in w]


def test_one_run_a_side_says_how_many_a_gate_needs(tmp_path: Path) -> None:
    before = _run(tmp_path / "a.json", seed=1)
    after = _run(tmp_path / "b.json", seed=2)
    comparison = compare([before], [after])
    assert any(w.startswith("one run a side:") for w in comparison.warnings)
    gate = check_slowdown(comparison, 0.05)
    assert f"a 5% gate needs at least {runs_needed(0.05)} runs a side" in gate.message
    assert runs_needed(0.05) > runs_needed(0.10) >= 5
    several = compare(
        [_run(tmp_path / f"a{i}.json", seed=i) for i in range(5)],
        [_run(tmp_path / f"b{i}.json", seed=10 + i) for i in range(5)],
    )
    assert not [w for w in several.warnings if "run" in w.split(":")[0]]


def test_each_verdict_gives_the_ratio_and_the_reason_that_decided_it(tmp_path: Path) -> None:
    before = _run(tmp_path / "a.json", seed=1)
    slower = compare([before], [_run(tmp_path / "b.json", seed=2, scale=1.3)])
    mm = next(change for change in slower.cpu_ops if change.name == "aten::mm")
    assert mm.verdict == "slower" and mm.lower_quartile_ratio is not None
    assert mm.lower_quartile_ratio > 1.2 and mm.reason.startswith("interval excludes 1")
    # a few calls stretched 3x: the mean moves, its interval may exclude 1, the typical call not
    stretched = compare([before], [_run(tmp_path / "c.json", seed=2, stretched=0.1)])
    rows = {row["name"]: row for row in stretched.to_dict()["cpu_ops"]}
    judged_same = [row for row in rows.values() if row["verdict"] == "same"]
    assert judged_same and all(row["reason"] for row in judged_same)
    markdown = stretched.to_markdown()
    assert "| typical call | verdict |" in markdown
    for row in judged_same:
        low, high = row["interval"]
        if not low <= 1 <= high:  # the interval alone would say slower: the table says why not
            assert f"same: {row['reason']}" in markdown
