"""``ncompass submit`` and ``ncompass jobs`` without a cluster: every user error in one line."""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from ncompass.remote.job_plan import JobPlan
from tests.conftest import REPO

needs_ray = pytest.mark.skipif(
    importlib.util.find_spec("ray") is None,
    reason="Ray is not installed: pip install 'ncompass[remote]'",
)


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def _ncompass(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {
        key: value for key, value in os.environ.items() if not key.startswith(("RAY_", "NCOMPASS_"))
    }
    environment.update({"PYTHONPATH": str(REPO), "NCOMPASS_REMOTE_CONFIG": str(cwd / "none.yaml")})
    environment.update(env)
    return subprocess.run(
        [sys.executable, "-m", "ncompass", *args],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "train.py").write_text("print('training')\n")
    return tmp_path


def test_neither_import_nor_help_imports_ray() -> None:
    code = (
        "import sys, ncompass, ncompass.remote, ncompass.remote.launch\n"
        "from ncompass.cli import main\n"
        "for argv in (['--help'], ['submit', '--help'], ['jobs', '--help']):\n"
        "    try:\n"
        "        main(argv)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print('RAY' if any(m == 'ray' or m.startswith('ray.') for m in sys.modules) else 'NO RAY')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.splitlines()[-1] == "NO RAY"
    assert "submit" in done.stdout and "--upload-dir" in done.stdout and "fetch" in done.stdout


def test_submit_without_ray_says_how_to_install_it(project: Path) -> None:
    code = (
        "import sys\n"
        "sys.modules['ray'] = None  # as if Ray were not installed\n"
        "from ncompass.cli import main\n"
        "main(['submit', '--address', 'http://127.0.0.1:1', 'train.py'])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=project, capture_output=True, text=True, check=False
    )
    assert done.returncode == 2
    assert "error: ncompass submit needs Ray's job client" in done.stderr
    assert "pip install 'ncompass[remote]'" in done.stderr
    assert "Traceback" not in done.stderr


@needs_ray
def test_an_unreachable_cluster_is_named_within_seconds(project: Path) -> None:
    port = _closed_port()
    started = time.perf_counter()
    done = _ncompass("submit", "--address", f"127.0.0.1:{port}", "train.py", cwd=project)
    assert done.returncode == 2
    assert f"error: cannot reach the Ray cluster at http://127.0.0.1:{port} (from --address)" in (
        done.stderr
    )
    assert time.perf_counter() - started < 30  # Python and the CLI start; the check itself is fast


def test_fetch_from_an_unreachable_cluster_names_the_address(project: Path) -> None:
    port = _closed_port()
    done = _ncompass("jobs", "fetch", "some-job", cwd=project, RAY_ADDRESS=f"127.0.0.1:{port}")
    assert done.returncode == 2
    assert f"cannot reach the Ray cluster at http://127.0.0.1:{port} (from RAY_ADDRESS)" in (
        done.stderr
    )


@needs_ray
def test_an_upload_over_the_limit_is_refused_before_anything_is_sent(project: Path) -> None:
    (project / "weights.bin").write_bytes(b"\0" * (2 << 20))
    done = _ncompass(
        "submit",
        "--address",
        f"127.0.0.1:{_closed_port()}",
        "--max-upload-mb",
        "1",
        "train.py",
        cwd=project,
    )
    assert done.returncode == 2
    assert "over the 1.0 MiB limit. Biggest: weights.bin (2.0 MiB)" in done.stderr
    assert "cannot reach" not in done.stderr  # refused here, before connecting


@needs_ray
def test_a_script_outside_the_upload_folder_is_refused(project: Path, tmp_path: Path) -> None:
    (project / "sub").mkdir()
    done = _ncompass(
        "submit",
        "--address",
        f"127.0.0.1:{_closed_port()}",
        "--upload-dir",
        "sub",
        "train.py",
        cwd=project,
    )
    assert done.returncode == 2
    assert f"the script train.py is not inside the upload folder {project / 'sub'}" in done.stderr


def test_no_address_anywhere_is_a_clear_error(project: Path) -> None:
    done = _ncompass("jobs", "fetch", "some-job", cwd=project)
    assert done.returncode == 2
    assert "error: no Ray cluster address: pass --address" in done.stderr


def test_bad_env_pairs_are_usage_errors(project: Path) -> None:
    done = _ncompass("submit", "--env", "NOEQUALS", "train.py", cwd=project)
    assert done.returncode == 2
    assert "'NOEQUALS': use KEY=VALUE" in done.stderr


@needs_ray
def test_an_ignored_script_is_named_with_the_fix(project: Path) -> None:
    (project / ".gitignore").write_text("train.py\n")
    done = _ncompass("submit", "--address", f"127.0.0.1:{_closed_port()}", "train.py", cwd=project)
    assert done.returncode == 2
    assert "the script train.py is left out of the upload by an ignore rule" in done.stderr
    assert "`!train.py`" in done.stderr


@needs_ray
def test_no_follow_reaches_each_ranks_ncompass_run(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ncompass.cli import main
    from ncompass.remote import submission

    plans: list[JobPlan] = []
    prepare = submission.prepare_job

    def prepare_and_keep(*args: Any, **kwargs: Any) -> submission.PreparedJob:
        prepared = prepare(*args, **kwargs)
        plans.append(prepared.plan)
        return prepared

    monkeypatch.setattr(submission, "prepare_job", prepare_and_keep)
    monkeypatch.chdir(project)
    monkeypatch.setenv("NCOMPASS_REMOTE_CONFIG", str(project / "none.yaml"))
    address = f"127.0.0.1:{_closed_port()}"
    for flags in (["--no-follow"], []):
        with pytest.raises(SystemExit):  # the job is planned, then the cluster is not there
            main(["submit", "--address", address, *flags, "train.py", "--no-follow"])
    # the script's own --no-follow stays the script's
    assert [plan.run_args for plan in plans] == [
        ("--profiler", "torch", "--no-follow", "train.py", "--no-follow"),
        ("--profiler", "torch", "train.py", "--no-follow"),
    ]
    assert "-- --profiler torch --no-follow train.py" in plans[0].entrypoint()
