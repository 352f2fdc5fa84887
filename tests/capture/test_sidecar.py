"""The run's sidecar, as ``ncompass run`` really writes it, matches its TypedDict key for key."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import TypeAdapter

from ncompass.capture import RunOptions, Sidecar, read_sidecar, run

SCRIPT = "def work(n):\n    return sum(range(n))\n\n\nprint(work(1000))\n"


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real torch-profiled run of a script with one function marker."""
    pytest.importorskip("torch")
    folder = tmp_path_factory.mktemp("sidecar")
    script = folder / "main_script.py"
    script.write_text(SCRIPT)
    spec = folder / "spec.yaml"
    spec.write_text(
        f"version: 1\ntargets:\n  - file: {script}\n    functions:\n"
        "      - qualname: work\n        name: script.work\n"
    )
    result = run(
        RunOptions(specs=[spec], script=str(script), output_dir=folder / "out", trace_name="t")
    )
    assert result.exit_code == 0 and result.trace_path is not None
    return result.trace_path


def test_the_written_sidecar_matches_its_type(trace: Path) -> None:
    sidecar = read_sidecar(trace)
    assert sidecar is not None
    # strict, and validation drops undeclared keys: equal means exactly the declared keys
    assert TypeAdapter(Sidecar).validate_python(sidecar, strict=True) == sidecar
    [marker] = sidecar["markers"]
    assert (marker["name"], marker["kind"], marker["qualname"]) == (
        "script.work",
        "function",
        "work",
    )


def test_a_trace_without_a_sidecar_reads_as_none(tmp_path: Path) -> None:
    assert read_sidecar(tmp_path / "nothing.json") is None
    (tmp_path / "broken.ncompass.json").write_text("{")
    assert read_sidecar(tmp_path / "broken.json") is None
