"""``ncompass monitor [OPTIONS] -- CMD``: exit codes, summaries, JSON, user errors."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from ncompass.cli._group import ncompass_cli
from ncompass.cli._monitor import monitor_command
from tests.gpu.conftest import hide_gpu_tools, install_fake_smi

PYTHON = sys.executable


@pytest.fixture(autouse=True)
def registered(monkeypatch: pytest.MonkeyPatch) -> None:
    """The root group with ``monitor`` in it, as the CLI will register it."""
    monkeypatch.setitem(ncompass_cli.commands, "monitor", monitor_command)


def ncompass(*args: str) -> Result:
    return CliRunner().invoke(ncompass_cli, ["monitor", *args])


def test_exit_code_of_the_command_passes_through_and_the_summary_goes_to_stderr() -> None:
    result = ncompass("--backend", "cpu", "--interval", "0.01", "--", PYTHON, "-c", "exit(3)")
    assert result.exit_code == 3
    assert result.stdout == ""
    assert result.stderr.startswith("host CPU, process tree")
    assert "samples every 0.01 s" in result.stderr


def test_json_summary_is_one_object_on_stdout() -> None:
    result = ncompass("--backend", "cpu", "--json", "--warmup", "0", "--", PYTHON, "-c", "pass")
    assert result.exit_code == 0
    report = json.loads(result.stdout.splitlines()[-1])
    assert report["command"] == [PYTHON, "-c", "pass"]
    assert report["exit_code"] == 0 and report["backend"] == "cpu"
    (device,) = report["devices"]
    assert device["device"] == -1 and device["sample_count"] >= 1


def test_every_device_through_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    smi = install_fake_smi(tmp_path / "bin", monkeypatch)
    result = ncompass("--device", "all", "--interval", "0.02", "--json", "--", PYTHON, "-c", "pass")
    assert result.exit_code == 0
    report = json.loads(result.stdout.splitlines()[-1])
    assert report["backend"] == "smi"
    assert [device["device"] for device in report["devices"]] == [0, 1]
    assert len(smi.loop_invocations()) == 1


def test_device_list(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install_fake_smi(tmp_path / "bin", monkeypatch)
    result = ncompass("--device", "1,0", "--backend", "smi", "--", PYTHON, "-c", "pass")
    assert result.exit_code == 0
    assert [
        line.split(" · ")[0] for line in result.stderr.splitlines() if line.startswith("GPU")
    ] == [
        "GPU 1",
        "GPU 0",
    ]


def test_a_command_killed_by_a_signal_exits_like_a_shell_would() -> None:
    result = ncompass(
        "--backend", "none", "--", PYTHON, "-c", "import os; os.kill(os.getpid(), 15)"
    )
    assert result.exit_code == 128 + signal.SIGTERM


def test_without_gpu_tooling_the_host_cpu_is_watched_and_said_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The README promises "GPU (or host CPU) utilisation": without a GPU, CMD runs under the
    # host CPU backend and one line says why (it exited 2 without running CMD before).
    hide_gpu_tools(tmp_path / "empty", monkeypatch)
    marker = tmp_path / "ran"
    result = ncompass("--", PYTHON, "-c", f"open({str(marker)!r}, 'w'); exit(3)")
    assert result.exit_code == 3
    assert marker.exists()  # the command ran
    notes = [line for line in result.stderr.splitlines() if line.startswith("ncompass monitor:")]
    assert len(notes) == 1
    assert "no GPU here" in notes[0] and "watching the host CPU of the command" in notes[0]
    assert "nvml: nvmlInit() failed" in notes[0] and "smi: nvidia-smi not found" in notes[0]
    assert "host CPU, process tree" in result.stderr
    assert "Traceback" not in result.output
    assert "strict=False" not in result.stderr  # the Python API's wording is not for the CLI


def test_without_gpu_tooling_json_names_the_cpu_backend(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hide_gpu_tools(tmp_path / "empty", monkeypatch)
    result = ncompass("--json", "--", PYTHON, "-c", "pass")
    assert result.exit_code == 0
    report = json.loads(result.stdout.splitlines()[-1])
    assert report["backend"] == "cpu"


def test_an_explicit_gpu_backend_that_fails_is_still_a_user_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hide_gpu_tools(tmp_path / "empty", monkeypatch)
    marker = tmp_path / "ran"
    result = ncompass("--backend", "smi", "--", PYTHON, "-c", f"open({str(marker)!r}, 'w')")
    assert result.exit_code == 2
    assert not marker.exists()
    assert "Use --backend cpu to watch the host CPU of the command instead" in result.stderr


def test_a_missing_command_is_a_user_error() -> None:
    result = ncompass("--backend", "none", "--", "no-such-command-ncompass")
    assert result.exit_code == 2
    assert "error: command not found: no-such-command-ncompass" in result.stderr


@pytest.mark.parametrize("device", ["gpu0", "-1", "", "0,x"])
def test_bad_device_is_a_usage_error(device: str) -> None:
    result = ncompass("--device", device, "--", PYTHON, "-c", "pass")
    assert result.exit_code == 2
    assert "--device" in result.stderr


def test_a_command_is_required() -> None:
    assert ncompass("--backend", "none").exit_code == 2


def test_the_commands_output_passes_through_untouched() -> None:
    cli = "from ncompass.cli._monitor import monitor_command; monitor_command()"
    child = "import sys; print('from the command'); print('oops', file=sys.stderr); sys.exit(4)"
    done = subprocess.run(
        [PYTHON, "-c", cli, "--backend", "none", "--", PYTHON, "-c", child],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        timeout=60,
    )
    assert done.returncode == 4
    assert done.stdout == "from the command\n"
    assert done.stderr.startswith("oops\nGPU 0 · not sampled (none)")
