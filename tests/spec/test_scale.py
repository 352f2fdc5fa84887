"""Large specs: a 1 MiB spec without aliases is read, and thousands of markers on one function
are checked in time that grows with their number, not with its square."""

from __future__ import annotations

import gc
import time
from pathlib import Path

import pytest

from ncompass.errors import SpecError
from ncompass.importer.validate import validate_spec
from ncompass.spec.bounded_yaml import MAX_YAML_BYTES, MAX_YAML_VALUES
from ncompass.spec.models import RewriteConfig


def one_function(folder: Path, count: int, *, calls: bool) -> Path:
    """``big.py``: one function of ``count`` statements, each a call or an assignment."""
    body = "\n".join(f"    g{i}()" if calls else f"    x{i} = {i}" for i in range(count))
    path = folder / "big.py"
    path.write_text(f"def f():\n{body}\n    return 0\n")
    return path


def marker_spec(folder: Path, count: int, *, calls: bool) -> Path:
    """A spec with ``count`` markers on ``big.py``'s one function: a call marker per callee,
    or a range marker per line."""
    one_function(folder, count, calls=calls)
    lines = ["version: 1", "targets:", "  - file: big.py", "    calls:" if calls else "    ranges:"]
    for i in range(count):
        marker = f"call: g{i}" if calls else f"lines: [{i + 2}, {i + 2}]"
        lines.append(f"      - {{in: f, {marker}, name: m{i}}}")
    spec = folder / "spec.yaml"
    spec.write_text("\n".join(lines) + "\n")
    return spec


def test_a_spec_near_1_mib_without_aliases_is_read(tmp_path: Path) -> None:
    # found by trying it: 19k range markers (950 KB) were refused as "expands through aliases"
    spec = marker_spec(tmp_path, 19_000, calls=False)
    assert spec.stat().st_size < MAX_YAML_BYTES
    config = RewriteConfig.from_yaml(spec)
    assert len(config.targets[0].ranges) == 19_000 > MAX_YAML_VALUES / 10


def test_aliases_adding_more_than_the_limit_are_still_refused(tmp_path: Path) -> None:
    spec = tmp_path / "aliases.yaml"
    row = "[" + ", ".join(["1"] * 100) + "]"
    spec.write_text(
        f"version: 1\nrow: &row {row}\nrows: &rows [{', '.join(['*row'] * 1100)}]\ntargets: []\n"
    )
    with pytest.raises(SpecError, match=r"aliases.yaml:3: .*through aliases"):
        RewriteConfig.from_yaml(spec)


def validation_seconds(folder: Path, count: int, *, calls: bool) -> float:
    """CPU seconds to check a spec of ``count`` markers (CPU time: a busy machine adds none)."""
    config = RewriteConfig.from_yaml(marker_spec(folder, count, calls=calls))
    # without the collector, whose passes cost more the more objects earlier tests left alive
    gc.collect()
    gc.disable()
    try:
        started = time.process_time()
        [check] = validate_spec(config)
        elapsed = time.process_time() - started
    finally:
        gc.enable()
    assert len(check.sites) == count
    return elapsed


@pytest.mark.parametrize("calls", [False, True], ids=["ranges", "calls"])
def test_checking_markers_on_one_function_grows_linearly(calls: bool, tmp_path: Path) -> None:
    # found by trying it: 19k ranges took over a minute (a scan of the function per range, and
    # every pair compared for overlaps); 5k calls 150 s (the function walked once per callee)
    small, large = (tmp_path / "small", tmp_path / "large")
    small.mkdir()
    large.mkdir()
    count = 2000
    validation_seconds(small, 100, calls=calls)  # imports and caches warmed
    ratio = validation_seconds(large, 4 * count, calls=calls) / max(
        validation_seconds(small, count, calls=calls), 1e-3
    )
    assert ratio < 9, ratio  # 4 when linear, 16 when quadratic


def test_ranges_that_cross_among_thousands_are_still_found(tmp_path: Path) -> None:
    one_function(tmp_path, 3000, calls=False)
    lines = ["version: 1", "targets:", "  - file: big.py", "    ranges:"]
    for i in range(0, 2990, 10):  # nested pairs, disjoint from each other
        lines.append(f"      - {{in: f, lines: [{i + 2}, {i + 11}], name: outer{i}}}")
        lines.append(f"      - {{in: f, lines: [{i + 3}, {i + 5}], name: inner{i}}}")
    lines.append("      - {in: f, lines: [1504, 1520], name: across}")
    spec = tmp_path / "spec.yaml"
    spec.write_text("\n".join(lines) + "\n")
    with pytest.raises(SpecError) as refused:
        validate_spec(RewriteConfig.from_yaml(spec))
    message = str(refused.value)
    assert "'across' (lines 1504-1520) overlap without nesting" in message
    assert message.startswith(f"{spec}:{len(lines)}:")
