"""``ncompass run --nsys``, with a fake ``nsys`` (this machine has no Nsight Systems).

The fake runs the command it is given, as ``nsys profile`` does, and writes a report holding a
known export; the tests check what ncompass asked nsys to do, that the run itself happened
(script output, exit code, sidecar, markers) and that the report was converted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.nsys.fake_nsys_bin import FakeNsys, install_fake_nsys
from tests.nsys.report_builder import ReportBuilder
from tests.nsys.trace_checks import load_trace, only

SCRIPT = """
import sys

def step(n):
    return n + 1

print("stepped", step(1))
sys.exit(int(sys.argv[1]))
"""


def _ncompass(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ncompass", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env=os.environ.copy(),
    )


@pytest.fixture
def nsys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeNsys:
    builder = ReportBuilder(tmp_path / "known.sqlite")
    builder.domain(42, 42, 1, "ncompass")
    builder.push_pop(42, 42, 1_000, 20_000, "script.step", domain_id=1)
    builder.kernel(42, builder.call(42, 42, 2_000, 3_000), 5_000, 15_000, "step_kernel")
    return install_fake_nsys(tmp_path / "bin", builder.close(), monkeypatch)


@pytest.fixture
def app(tmp_path: Path) -> tuple[Path, Path]:
    script = tmp_path / "app.py"
    script.write_text(SCRIPT)
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        f"version: 1\ntargets:\n  - file: {script}\n    functions:\n"
        "      - qualname: step\n        name: script.step\n"
    )
    return script, spec


def test_the_run_goes_through_nsys_profile_and_its_report_is_converted(
    nsys: FakeNsys, app: tuple[Path, Path], tmp_path: Path
) -> None:
    script, spec = app
    out = tmp_path / "traces"
    done = _ncompass(
        "run", "--nsys", "-c", str(spec), "-o", str(out), "--trace-name", "t", str(script), "3"
    )
    assert done.returncode == 3, done.stderr  # the script's exit code, through nsys
    assert "stepped 2" in done.stdout
    profile = nsys.calls()[0]
    assert profile[:4] == [
        "profile",
        f"--output={out / 't'}",
        "--trace=cuda,nvtx,osrt",
        "--force-overwrite=true",
    ]
    child = profile[4:]
    assert child[:6] == [sys.executable, "-m", "ncompass", "run", "--profiler", "nvtx-trace"]
    assert child[-4:] == ["--config", str(spec), str(script), "3"]
    assert nsys.calls()[1][0] == "export"
    assert (out / "t.nsys-rep").is_file(), "the report stays, for the Nsight Systems GUI"
    assert f"Nsight Systems report {out / 't.nsys-rep'}: 1 kernel" in done.stderr
    assert f"trace written to {out / 't.json'} (1 marker placed" in done.stderr
    events = load_trace(out / "t.json")["traceEvents"]
    kernel = only(events, "void step_kernel<float>(float*)", "kernel")
    assert kernel["args"]["nvtx_range"] == "script.step"
    sidecar = json.loads((out / "t.ncompass.json").read_text())
    assert sidecar["profiler"] == "nsys" and sidecar["exit_code"] == 3
    assert sidecar["nsys"] == {"report": "t.nsys-rep", "args": []}
    assert [m["name"] for m in sidecar["markers"]] == ["script.step"]
    # the markers were NVTX ranges in the child (default context of an NVTX profiler)
    assert sidecar["spec"]["context"] == "nvtx"


def test_nsys_args_are_passed_and_replace_the_defaults_they_name(
    nsys: FakeNsys, app: tuple[Path, Path], tmp_path: Path
) -> None:
    script, _ = app
    done = _ncompass(
        "run",
        "--nsys",
        "--nsys-args",
        "--trace=cuda,nvtx --cuda-memory-usage=true",
        "-o",
        str(tmp_path),
        str(script),
        "0",
    )
    assert done.returncode == 0, done.stderr
    profile = nsys.calls()[0]
    options = profile[1 : profile.index(sys.executable)]
    assert options[1:] == [
        "--force-overwrite=true",
        "--trace=cuda,nvtx",
        "--cuda-memory-usage=true",
    ]
    (trace,) = [p for p in tmp_path.glob("app-*.json") if not p.name.endswith(".ncompass.json")]
    assert options[0] == f"--output={trace.with_suffix('')}"
    assert trace.with_suffix(".nsys-rep").is_file()


def test_user_mistakes_exit_2_with_one_line(
    nsys: FakeNsys, app: tuple[Path, Path], tmp_path: Path
) -> None:
    script, _ = app
    output = _ncompass("run", "--nsys", "--nsys-args", "-o elsewhere", str(script), "0")
    assert output.returncode == 2
    assert "error: --nsys-args cannot set nsys' --output" in output.stderr
    torch = _ncompass("run", "--nsys", "--profiler", "torch", str(script), "0")
    assert torch.returncode == 2 and "leave out --profiler torch" in torch.stderr
    lone = _ncompass("run", "--nsys-args", "--stats=true", str(script), "0")
    assert lone.returncode == 2 and "--nsys-args needs --nsys" in lone.stderr
    assert nsys.calls() == []


def test_without_nsys_the_error_says_how_to_install_it_or_what_else_to_use(
    app: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script, _ = app
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("NCOMPASS_NSYS", raising=False)
    done = _ncompass("run", "--nsys", "-o", str(tmp_path), str(script), "0")
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert line.startswith("error: --nsys needs Nsight Systems' `nsys` command: install")
    assert "--profiler nvtx-trace" in line
    assert not list(tmp_path.glob("*.json")), "the claimed trace name is released"
