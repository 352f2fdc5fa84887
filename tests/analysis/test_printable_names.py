"""A lone surrogate in an event name (``"a\\ud800b"``, valid JSON) is reported, not a crash.

The trace is HTA's real AMD trace with one marker renamed through its JSON text, the way a
profiler that writes names byte for byte produces it. Every command runs as a user runs it (a
subprocess writing to a pipe in UTF-8), because the failure was in writing the report.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.traces.builders import shared_trace

REPO = Path(__file__).resolve().parents[2]
LONE = "\\ud800"  # as the JSON text spells it


@pytest.fixture(scope="module")
def odd_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = shared_trace("amd_trace")
    with gzip.open(source, "rt", encoding="utf-8") as file:
        text = file.read()
    assert '"name": "Optimizer.step#SGD.step"' in text
    text = text.replace('"name": "Optimizer.step#SGD.step"', f'"name": "Optimizer{LONE}step"')
    path = tmp_path_factory.mktemp("odd") / "odd.json"
    path.write_text(text, encoding="utf-8")
    return path


def _ncompass(*args: str | Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONIOENCODING="utf-8")
    return subprocess.run(
        [sys.executable, "-m", "ncompass", *map(str, args)],
        env=env,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=300,
    )


def test_summarize_names_the_marker_with_a_replacement_mark(odd_trace: Path) -> None:
    result = _ncompass("summarize", odd_trace)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert "`Optimizer\ufffdstep`" in result.stdout


def test_summarize_json_and_html_are_written(odd_trace: Path, tmp_path: Path) -> None:
    result = _ncompass("summarize", odd_trace, "--json")
    assert result.returncode == 0, result.stderr
    names = [row["name"] for row in json.loads(result.stdout)["structured"]["markers"]]
    assert "Optimizer\ufffdstep" in names
    page = tmp_path / "odd.html"
    result = _ncompass("summarize", odd_trace, "--html", page)
    assert result.returncode == 0, result.stderr
    assert "Optimizer\ufffdstep" in page.read_text(encoding="utf-8")


def test_compare_reports_the_marker(odd_trace: Path) -> None:
    result = _ncompass("compare", odd_trace, "--", odd_trace, "--json")
    assert result.returncode == 0, result.stderr
    assert "Optimizer\ufffdstep" in result.stdout


def test_filter_keeps_the_name_exactly(odd_trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "kept.json"
    result = _ncompass("filter", odd_trace, "-o", out)
    assert result.returncode == 0, result.stderr
    text = out.read_text(encoding="utf-8")
    assert f'"Optimizer{LONE}step"' in text  # the same escape as the source: nothing replaced
    names = {event.get("name") for event in json.loads(text)["traceEvents"]}
    assert "Optimizer\ud800step" in names
