"""``ncompass convert`` as a user types it, in a fresh process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.nsys.fake_nsys_bin import install_fake_nsys
from tests.nsys.report_builder import ReportBuilder
from tests.nsys.trace_checks import load_trace, only


def _ncompass(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ncompass", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ.copy(),
    )


def _report(path: Path) -> Path:
    builder = ReportBuilder(path)
    builder.push_pop(5, 5, 1_000, 9_000, "train_step")
    builder.kernel(5, builder.call(5, 5, 2_000, 2_500), 3_000, 7_000, "gemm")
    return builder.close()


def test_convert_an_export_and_summarize_it(tmp_path: Path) -> None:
    report = _report(tmp_path / "run.sqlite")
    done = _ncompass("convert", str(report), "-o", str(tmp_path / "run.json.gz"))
    assert done.returncode == 0, done.stderr
    assert f"wrote {tmp_path / 'run.json.gz'}: 1 kernel" in done.stderr
    assert "1 of 1 GPU operations launched inside NVTX ranges" in done.stderr
    events = load_trace(tmp_path / "run.json.gz")["traceEvents"]
    assert only(events, "void gemm<float>(float*)", "kernel")["args"]["nvtx_range"] == "train_step"
    summary = _ncompass("summarize", str(tmp_path / "run.json.gz"))
    assert summary.returncode == 0, summary.stderr
    assert "| `train_step` | 1 | 8.0 µs | 8.0 µs | 4.0 µs | 1 |" in summary.stdout


def test_default_output_is_beside_the_report(tmp_path: Path) -> None:
    report = _report(tmp_path / "run.sqlite")
    assert _ncompass("convert", str(report)).returncode == 0
    assert (tmp_path / "run.json.gz").is_file()


def test_nsys_rep_is_exported_with_nsys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    export = _report(tmp_path / "export.sqlite")
    report = tmp_path / "run.nsys-rep"
    report.write_bytes(export.read_bytes())  # the fake nsys' "report" is its export
    fake = install_fake_nsys(tmp_path / "bin", export, monkeypatch)
    done = _ncompass("convert", str(report), "-o", str(tmp_path / "out.json"))
    assert done.returncode == 0, done.stderr
    (call,) = fake.calls()
    assert call[:3] == ["export", "--type=sqlite", "--force-overwrite=true"]
    assert call[-1] == str(report)
    assert (tmp_path / "out.json").is_file()
    assert not list(tmp_path.glob("ncompass-nsys-*")), "the temporary export is removed"


def test_user_errors_exit_2_with_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    missing = _ncompass("convert", str(tmp_path / "gone.nsys-rep"))
    assert missing.returncode == 2
    assert (
        missing.stderr.strip()
        == f"error: {tmp_path / 'gone.nsys-rep'}: no such report; check the path"
    )
    report = tmp_path / "run.nsys-rep"
    report.write_bytes(b"\0")
    monkeypatch.setenv("PATH", str(tmp_path))
    no_nsys = subprocess.run(
        [sys.executable, "-m", "ncompass", "convert", str(report)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert no_nsys.returncode == 2
    assert "install Nsight Systems" in no_nsys.stderr and "Traceback" not in no_nsys.stderr
