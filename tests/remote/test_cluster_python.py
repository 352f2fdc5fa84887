"""The wrong Python on the cluster: a missing ``python`` command, or one without Ray, named with
the likely cause (a cluster started outside the virtualenv) and the fix."""

from __future__ import annotations

import io
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from ncompass.remote import launch
from ncompass.remote.cluster_python import (
    entrypoint_python,
    python_not_found,
    ray_python,
    wrong_python_hint,
)
from ncompass.remote.job_plan import JobPlan, RankLayout

PLAN = JobPlan("job-1", RankLayout(1, 2, "GPU"), "demo", ("--profiler", "torch", "demo.py"))


def test_the_python_of_an_entrypoint_is_read_back() -> None:
    assert entrypoint_python(PLAN.entrypoint()) == "python"
    custom = JobPlan("job-1", RankLayout(1, 1, "GPU"), "demo", ("demo.py",), python="env X=1 python3")  # fmt: skip
    assert entrypoint_python(custom.entrypoint()) == "env X=1 python3"
    assert entrypoint_python("bash run.sh") is None


@pytest.mark.parametrize(
    "shell_said",
    [
        "/bin/sh: 1: python: not found",  # dash (Debian, Ubuntu)
        "bash: line 1: python: command not found",  # bash
        "sh: python: not found",  # busybox
    ],
)
def test_a_missing_python_command_is_explained(shell_said: str) -> None:
    logs = f"Runtime env is setting up.\n{shell_said}\nRunning entrypoint for job job-1: ...\n"
    hint = python_not_found(127, PLAN.entrypoint(), logs)
    assert hint is not None
    assert hint.startswith("the cluster's shell has no `python` command to run the job with")
    assert "started (`ray start`) outside the virtualenv" in hint
    assert (
        "Set `python: /path/to/that/virtualenv/bin/python` in ~/.config/ncompass/remote.yaml"
        in hint
    )


def test_a_script_that_exits_127_is_not_taken_for_a_missing_python() -> None:
    assert python_not_found(127, PLAN.entrypoint(), "[rank 0] tool: not found\n") is None
    assert python_not_found(1, PLAN.entrypoint(), "/bin/sh: 1: python: not found") is None
    assert python_not_found(127, "bash run.sh", "/bin/sh: 1: python: not found") is None


def test_the_hint_names_the_python_ray_runs_on() -> None:
    hint = wrong_python_hint("/usr/bin/python3", "/home/me/venv/bin/python3.11")
    assert hint.startswith("/usr/bin/python3 cannot import Ray either")
    assert "(Ray runs on /home/me/venv/bin/python3.11)" in hint
    assert "Set `python: /home/me/venv/bin/python3.11` in ~/.config/ncompass/remote.yaml" in hint
    unknown = wrong_python_hint("/usr/bin/python3", None)
    assert "Set `python: /path/to/that/virtualenv/bin/python`" in unknown


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="needs Linux's /proc")
def test_the_python_ray_runs_on_is_found_from_a_process_that_loaded_ray() -> None:
    pytest.importorskip("ray", reason="Ray is not installed: pip install 'ncompass[remote]'")
    code = "import sys, ray._raylet; print('ready', flush=True); sys.stdin.read()"
    with subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as child:
        try:
            assert child.stdout is not None and child.stdout.readline() == "ready\n"
            found = ray_python(child.pid, generations=1)
        finally:
            child.communicate("")
    assert found is not None
    # The virtualenv's own Python (its site-packages hold Ray), not the one it was made from.
    assert Path(found).parent == Path(sys.executable).parent
    assert ray_python(child.pid, generations=1) is None  # gone: nothing to tell


def test_a_python_without_the_dependencies_or_ray_says_the_cluster_runs_another(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(launch.REQUIRED_MODULES, "no_such_module_xyz", "no-such-dist")
    monkeypatch.setitem(sys.modules, "ray", None)  # this Python cannot import Ray
    output = io.StringIO()
    with redirect_stdout(output):
        code = launch.main(["--job-id", "job-1", "--trace-name", "t", "--", "x.py"])
    assert code == launch.DEPENDENCY_EXIT_CODE
    said = output.getvalue()
    assert "lacks no-such-dist, which `ncompass run` needs." in said
    assert f"{sys.executable} cannot import Ray either, so it is not the Python" in said
    assert "outside the virtualenv" in said and "--requirements" not in said
