"""``ncompass run --nsys`` with recording windows, through a fake ``nsys`` (no GPU here).

nsys records only its capture ranges (``--capture-range=cudaProfilerApi``); each window opens
and closes one with the CUDA profiler API. CUDA cannot be initialised on this machine, so the
programs stand in for it (``tests/nsys/fake_cuda.py``), behind the same torch calls.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.nsys.fake_cuda import PRETEND_CUDA
from tests.nsys.fake_nsys_bin import FakeNsys, install_fake_nsys
from tests.nsys.report_builder import ReportBuilder
from tests.nsys.trace_checks import load_trace

LOOP = """
import sys

def step(n):
    return n + 1

for n in range(1, 11):
    step(n)
print("stepped")
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


def _report(path: Path, kernel: str) -> Path:
    builder = ReportBuilder(path)
    builder.domain(42, 42, 1, "ncompass")
    builder.push_pop(42, 42, 1_000, 20_000, "script.step", domain_id=1)
    builder.kernel(42, builder.call(42, 42, 2_000, 3_000), 5_000, 15_000, kernel)
    return builder.close()


@pytest.fixture
def nsys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeNsys:
    first = _report(tmp_path / "first.sqlite", "first_kernel")
    second = _report(tmp_path / "second.sqlite", "second_kernel")
    fake = install_fake_nsys(tmp_path / "bin", first, monkeypatch)
    monkeypatch.setenv("FAKE_NSYS_EXPORT", f"{first}{os.pathsep}{second}")
    return fake


def _app(tmp_path: Path, cuda: bool) -> tuple[Path, Path]:
    script = tmp_path / "app.py"
    script.write_text((PRETEND_CUDA if cuda else "") + LOOP)
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        f"version: 1\ntargets:\n  - file: {script}\n    functions:\n"
        "      - qualname: step\n        name: script.step\n"
    )
    return script, spec


def _kernels(trace: Path) -> list[str]:
    events = load_trace(trace)["traceEvents"]
    return [e["name"] for e in events if e.get("cat") == "kernel" and e.get("ph") == "X"]


def test_windows_are_nsys_capture_ranges_one_report_and_trace_each(
    nsys: FakeNsys, tmp_path: Path
) -> None:
    script, spec = _app(tmp_path, cuda=True)
    out = tmp_path / "traces"
    done = _ncompass(
        *("run", "--nsys", "-c", str(spec), "-o", str(out), "--trace-name", "t"),
        *("--window", "script.step:3:2", "--repeat", "2", "--every", "4", str(script)),
    )
    assert done.returncode == 0, done.stderr
    assert "stepped" in done.stdout
    profile = nsys.calls()[0]
    assert "--capture-range=cudaProfilerApi" in profile
    assert "--capture-range-end=repeat" in profile
    assert profile.index("--capture-range-end=repeat") < profile.index(sys.executable)
    for number, kernel in ((1, "first_kernel"), (2, "second_kernel")):
        trace = out / f"t-w{number}.json"
        assert [k for k in _kernels(trace) if kernel in k], (number, _kernels(trace))
        assert (out / f"t-w{number}.nsys-rep").is_file(), "each window keeps its report"
        sidecar = json.loads((out / f"t-w{number}.ncompass.json").read_text())
        assert sidecar["profiler"] == "nsys" and sidecar["exit_code"] == 0
        assert sidecar["nsys"]["report"] == f"t-w{number}.nsys-rep"
        assert sidecar["window"]["first_call"] == 3 + 4 * (number - 1)
        assert f"window trace written to {trace}" in done.stderr
    assert not (out / "t.json").exists(), "no whole-run trace: nsys recorded the windows only"
    assert not (out / "t.ncompass.json").exists()
    assert not list(out.glob("t.*.nsys-rep")), "the per-range reports were renamed"


def test_one_window_stops_the_capture_at_its_end(nsys: FakeNsys, tmp_path: Path) -> None:
    script, spec = _app(tmp_path, cuda=True)
    out = tmp_path / "traces"
    done = _ncompass(
        *("run", "--nsys", "-c", str(spec), "-o", str(out), "--trace-name", "t"),
        *("--window", "script.step:5:2", str(script)),
    )
    assert done.returncode == 0, done.stderr
    assert "--capture-range-end=stop" in nsys.calls()[0]
    assert [k for k in _kernels(out / "t-w1.json") if "first_kernel" in k]
    assert sorted(p.name for p in out.iterdir()) == [
        "t-w1.json",
        "t-w1.ncompass.json",
        "t-w1.nsys-rep",
    ]


def test_without_cuda_the_run_says_in_one_line_that_nsys_captured_nothing(
    nsys: FakeNsys, tmp_path: Path
) -> None:
    script, spec = _app(tmp_path, cuda=False)
    out = tmp_path / "traces"
    done = _ncompass(
        *("run", "--nsys", "-c", str(spec), "-o", str(out), "--trace-name", "t"),
        *("--window", "script.step:3:2", str(script)),
    )
    assert done.returncode == 0, done.stderr
    assert "stepped" in done.stdout
    lines = [line for line in done.stderr.splitlines() if "nsys captured no window" in line]
    assert len(lines) == 1
    assert "CUDA was not initialised" in lines[0]
    assert "Traceback" not in done.stderr
    assert not list(out.glob("*.json")), "nothing recorded, nothing written"


def test_nsys_args_cannot_choose_a_capture_range_with_windows(
    nsys: FakeNsys, tmp_path: Path
) -> None:
    script, spec = _app(tmp_path, cuda=True)
    done = _ncompass(
        *("run", "--nsys", "--nsys-args", "--capture-range=nvtx", "-c", str(spec)),
        *("-o", str(tmp_path / "traces"), "--window", "script.step:3:2", str(script)),
    )
    assert done.returncode == 2
    assert "cannot choose a capture range with recording windows" in done.stderr
    assert nsys.calls() == []
