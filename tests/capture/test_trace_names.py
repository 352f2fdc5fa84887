"""Trace files are never lost or replaced by accident: a failed run leaves no file behind, and a
trace name the user chose is never silently reused."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ncompass.capture.runner import RunOptions, run
from ncompass.capture.trace_files import TraceExistsError, claim_trace_path
from ncompass.errors import NcompassError, SpecError
from tests.conftest import REPO

SCRIPT = """
import sys
from pathlib import Path

def work():
    return sum(range(100))

work()
with open(Path(__file__).with_name("ran.txt"), "a") as log:
    log.write(" ".join(sys.argv[1:]) + "\\n")
"""

SPEC = """
version: 1
{context}targets:
  - file: {script}
    functions:
      - qualname: {function}
        name: app.work
"""


def _script(tmp_path: Path) -> Path:
    script = tmp_path / "app.py"
    script.write_text(SCRIPT)
    return script


def _spec(tmp_path: Path, script: Path, *, function: str = "work", context: str = "") -> Path:
    spec = tmp_path / "spec.yaml"
    line = f"context: {context}\n" if context else ""
    spec.write_text(SPEC.format(script=script, function=function, context=line))
    return spec


def _ran(tmp_path: Path) -> list[str]:
    log = tmp_path / "ran.txt"
    return log.read_text().splitlines() if log.exists() else []


@pytest.mark.parametrize(
    ("function", "context", "error"),
    [
        ("work", "tourch", SpecError),  # refused when rewrites are enabled, after the claim
        ("no_such_function", "", SpecError),  # refused when the script is imported
        ("work", "no_such_module_xyz:Timer", NcompassError),  # the custom class cannot load
    ],
    ids=["misspelt-context", "missing-function", "unimportable-context"],
)
def test_a_run_stopped_by_a_spec_error_leaves_no_file(
    tmp_path: Path, function: str, context: str, error: type[Exception]
) -> None:
    script = _script(tmp_path)
    spec = _spec(tmp_path, script, function=function, context=context)
    out = tmp_path / "traces"
    with pytest.raises(error):
        run(RunOptions(specs=[spec], script=str(script), output_dir=out))
    assert sorted(path.name for path in out.iterdir()) == []
    with pytest.raises(error):
        run(RunOptions(specs=[spec], script=str(script), output_dir=out, trace_name="named"))
    assert sorted(path.name for path in out.iterdir()) == []


def test_an_explicit_trace_name_that_exists_is_refused_before_the_script_runs(
    tmp_path: Path,
) -> None:
    script = _script(tmp_path)
    spec = _spec(tmp_path, script)
    out = tmp_path / "traces"
    first = run(
        RunOptions(specs=[spec], script=str(script), args=["first"], output_dir=out, trace_name="x")
    )
    assert first.trace_path == out / "x.json"
    trace, sidecar = (out / "x.json").read_bytes(), (out / "x.ncompass.json").read_bytes()
    with pytest.raises(TraceExistsError, match=r"x\.json already exists .*--force-overwrite"):
        run(
            RunOptions(
                specs=[spec], script=str(script), args=["second"], output_dir=out, trace_name="x"
            )
        )
    assert _ran(tmp_path) == ["first"]
    assert (out / "x.json").read_bytes() == trace
    assert (out / "x.ncompass.json").read_bytes() == sidecar
    assert sorted(path.name for path in out.iterdir()) == ["x.json", "x.ncompass.json"]


def test_force_overwrite_replaces_the_trace_and_its_sidecar(tmp_path: Path) -> None:
    script = _script(tmp_path)
    spec = _spec(tmp_path, script)
    out = tmp_path / "traces"
    run(
        RunOptions(specs=[spec], script=str(script), args=["first"], output_dir=out, trace_name="x")
    )
    again = RunOptions(
        specs=[spec],
        script=str(script),
        args=["second"],
        output_dir=out,
        trace_name="x",
        force_overwrite=True,
    )
    result = run(again)
    assert result.trace_path == out / "x.json"
    assert _ran(tmp_path) == ["first", "second"]
    assert '"second"' in (out / "x.ncompass.json").read_text()
    assert sorted(path.name for path in out.iterdir()) == ["x.json", "x.ncompass.json"]


def test_a_reexecuted_run_refuses_an_existing_name_before_starting_its_child(
    tmp_path: Path,
) -> None:
    script = _script(tmp_path)
    out = tmp_path / "traces"
    out.mkdir()
    (out / "x.json").write_text("{}")
    options = RunOptions(script=str(script), profiler="nvtx-trace", output_dir=out, trace_name="x")
    with pytest.raises(TraceExistsError):
        run(options)
    assert _ran(tmp_path) == []
    assert (out / "x.json").read_text() == "{}"


def test_an_exact_claim_is_atomic_and_a_default_one_moves_on(tmp_path: Path) -> None:
    first = claim_trace_path(tmp_path, "x", exact=True)
    with pytest.raises(TraceExistsError):
        claim_trace_path(tmp_path, "x", exact=True)
    assert claim_trace_path(tmp_path, "x") == tmp_path / "x-1.json"
    assert claim_trace_path(tmp_path, "x", exact=True, replace=True) == first


def test_the_command_line_refuses_an_existing_trace_name_in_one_line(tmp_path: Path) -> None:
    script = _script(tmp_path)
    out = tmp_path / "traces"
    out.mkdir()
    (out / "x.json").write_text('{"traceEvents": []}')
    done = subprocess.run(
        [sys.executable, "-m", "ncompass", "run", "-o", str(out), "--trace-name", "x", str(script)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if not line.startswith("USDT:")]
    assert len(lines) == 1 and "--force-overwrite" in lines[0], done.stderr
    assert (out / "x.json").read_text() == '{"traceEvents": []}'
    assert _ran(tmp_path) == []
