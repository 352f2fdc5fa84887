"""What compare says about the runs behind its verdicts: a contended side, too few runs, and the
reason for each verdict (issue 22, item 7)."""

from __future__ import annotations

import random
from pathlib import Path

from ncompass.analysis.comparison import check_slowdown, compare
from ncompass.analysis.comparison.noise import runs_needed
from tests.traces.builders import TraceBuilder

OPERATORS = ("aten::mm", "aten::add", "aten::relu", "aten::softmax", "aten::copy_")


def _run(
    path: Path, *, seed: int, stretched: float = 0.0, scale: float = 1.0, setup_us: float = 0.0
) -> Path:
    """A run of 40 steps calling five operators; ``stretched`` of the calls take 3x longer, as
    when another process takes the CPU; ``scale`` slows every call (a real change);
    ``setup_us`` adds one ``aten::div`` call of that length before the steps."""
    rng = random.Random(seed)
    builder, clock = TraceBuilder(), 0.0
    if setup_us:
        builder.cpu_op("aten::div", clock, setup_us)
        clock += setup_us + 1
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


def test_three_runs_a_side_must_be_apart_by_more_than_the_band(tmp_path: Path) -> None:
    """Every after run slower than every before run is the order an unchanged program's runs
    take by chance 1 time in 20 with three a side: it takes the span of the runs clearing the
    band (the closest runs over 10 % apart) to call it, and a real 30 % slowdown still does."""

    def side(label: str, scales: tuple[float, ...]) -> list[Path]:
        return [
            _run(tmp_path / f"{label}{index}.json", seed=index + (10 if label == "b" else 0),
                 scale=scale)
            for index, scale in enumerate(scales)
        ]  # fmt: skip

    before = side("a", (1.0, 1.0, 1.12))  # one run contended
    apart_by_chance = compare(before, side("b", (1.14, 1.20, 1.22)))
    step = apart_by_chance.marker("step")
    assert step is not None and step.interval is not None and step.interval.low > 1.0
    assert step.ratio is not None and step.ratio > 1.1
    assert step.lower_quartile_ratio is not None and step.lower_quartile_ratio > 1.1
    assert step.verdict == "same" and "does not clear ±10%" in step.reason
    assert step.interval.span
    assert not [change for change in apart_by_chance.cpu_ops if change.is_real]
    assert not check_slowdown(apart_by_chance, 0.05, "step").failed
    slower = compare(before, side("b", (1.3, 1.3, 1.4)))
    step = slower.marker("step")
    assert step is not None and step.verdict == "slower"
    assert check_slowdown(slower, 0.05, "step").failed
    mirrored = compare(side("b", (1.3, 1.3, 1.4)), before).marker("step")
    assert mirrored is not None and mirrored.verdict == "faster"


def test_an_operator_called_once_a_run_must_double_in_three_runs(tmp_path: Path) -> None:
    """Three runs a side hold three calls of a setup operator: its lower quartile is its fastest
    call, and such operators of an unchanged program came out 1.2-2x apart 4 times in 10 under
    load. 1.6x is `same`, and the reason says why; 3x is `slower`; the step marker beside it
    (40 calls a run) is judged as before."""

    def side(label: str, setup_us: float, scale: float) -> list[Path]:
        return [
            _run(tmp_path / f"{label}{index}.json", seed=index, scale=scale,
                 setup_us=setup_us * (1 + index / 100))
            for index in range(3)
        ]  # fmt: skip

    comparison = compare(side("a", 20.0, 1.0), side("b", 32.0, 1.3))
    div = next(change for change in comparison.cpu_ops if change.name == "aten::div")
    assert div.interval is not None and div.interval.low > 1.5  # every run 1.6x as slow
    assert div.verdict == "same" and div.reason.startswith("3 calls on a side: under 5 the span")
    step = comparison.marker("step")
    assert step is not None and step.verdict == "slower"
    tripled = compare(side("a", 20.0, 1.0), side("b", 60.0, 1.0))  # beyond a doubling: real
    assert next(c for c in tripled.cpu_ops if c.name == "aten::div").verdict == "slower"
