"""``benchmarks/bench_check.py`` (``make bench-check``): figures against the committed baseline,
within their noise bands; a regression beyond its band fails, a damaged baseline is one line."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

from tests.conftest import REPO

BENCH_CHECK = REPO / "benchmarks" / "bench_check.py"


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_check", BENCH_CHECK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_check"] = module  # its dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def _run(tmp_path: Path, baseline: Path, *options: str) -> subprocess.CompletedProcess[str]:
    output = tmp_path / "figures.json"
    command = [sys.executable, str(BENCH_CHECK), "--baseline", str(baseline)]
    return subprocess.run(
        [*command, "--output", str(output), *options], capture_output=True, text=True
    )


def test_a_figure_within_its_band_passes_and_one_beyond_it_regresses() -> None:
    check = _module()
    bands = {"import.cached_rewrite_ratio": 0.3}
    baseline = {"import.cached_rewrite_ratio": 1.1}
    within = check.compare({"import.cached_rewrite_ratio": 1.4}, baseline, bands)
    beyond = check.compare({"import.cached_rewrite_ratio": 1.5}, baseline, bands)
    assert not within[0].regressed
    assert beyond[0].regressed
    assert beyond[0].limit == 1.1 * 1.3


def test_a_figure_the_baseline_lacks_never_fails() -> None:
    check = _module()
    verdicts = check.compare(
        {"trace.breakdown_per_decode": 9.0}, {}, {"trace.breakdown_per_decode": 0.5}
    )
    assert not verdicts[0].regressed


def test_every_gated_figure_is_in_the_committed_baseline() -> None:
    check = _module()
    committed = json.loads((REPO / "benchmarks" / "baseline.json").read_text())["figures"]
    for benchmark in check.MEASURES:
        assert set(check.bands_of(benchmark)) <= set(committed)


def test_a_real_measurement_beyond_the_baseline_fails_and_names_the_figure(
    tmp_path: Path,
) -> None:
    baseline = tmp_path / "baseline.json"
    tiny = {"markers.torch_marker_per_nvtx_pair": 0.001, "markers.nvtx_marker_per_nvtx_pair": 100}
    baseline.write_text(json.dumps({"figures": tiny}))
    done = _run(tmp_path, baseline, "markers")
    assert done.returncode == 1, done.stderr
    assert "markers.torch_marker_per_nvtx_pair" in done.stderr.splitlines()[-1]
    assert "markers.nvtx_marker" not in done.stderr  # within its (huge) baseline
    written = json.loads((tmp_path / "figures.json").read_text())["figures"]
    assert set(written) == set(tiny)


def test_update_writes_the_measured_figures_as_the_baseline(tmp_path: Path) -> None:
    baseline = tmp_path / "baseline.json"
    done = _run(tmp_path, baseline, "--update", "markers")
    assert done.returncode == 0, done.stderr
    figures = json.loads(baseline.read_text())["figures"]
    assert set(figures) == {
        "markers.torch_marker_per_nvtx_pair",
        "markers.nvtx_marker_per_nvtx_pair",
    }
    assert all(value > 0 for value in figures.values())


def test_a_damaged_baseline_is_one_line_exit_2_and_nothing_is_measured(tmp_path: Path) -> None:
    baseline = tmp_path / "baseline.json"
    baseline.write_text('{"figures": {"import.cached_rewrite_ratio": ')
    done = _run(tmp_path, baseline, "markers")
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert str(baseline) in done.stderr and "--update" in done.stderr
    assert not (tmp_path / "figures.json").exists()
    assert baseline.read_text().startswith('{"figures"')  # left as it was


def test_an_unknown_benchmark_name_is_refused(tmp_path: Path) -> None:
    done = _run(tmp_path, tmp_path / "baseline.json", "imports")
    assert done.returncode == 2
    assert "unknown benchmark 'imports'" in done.stderr
