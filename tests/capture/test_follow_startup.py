"""What following costs a child that imports nothing heavy: real ``ncompass run`` runs, real
children (``subprocess`` and ``spawn``), compared with the same children under ``--no-follow``.

Start-up time itself is not asserted (it depends on the machine's load); what decides it is:
the modules a followed child imports beyond an unfollowed one, and what it compiles.
"""

from __future__ import annotations

import ast
import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from ncompass import environment_variables
from ncompass.capture.follow import bootstrap, run_sitecustomize

REPO = Path(__file__).resolve().parents[2]

CHILDREN = ["bare-0", "bare-1", "spawn-0", "spawn-1"]
FOLLOWING_ADDS = {"sitecustomize", "ncompass.capture.follow.bootstrap", "atexit"}
"""The modules a followed child that never imports a target or torch may import beyond an
unfollowed one: the run's ``sitecustomize``, the bootstrap (not the ``ncompass`` package, nor
``json`` or ``typing``) and the builtin ``atexit``."""

PROBE = """
import os
import sys


def report(path):
    \"\"\"Write this process's modules, and when the run's compiled files were written.\"\"\"
    modules = sorted(sys.modules)
    folder = os.environ.get("NCOMPASS_FOLLOW")
    written = {}
    if folder:
        cache = os.path.join(folder, "__pycache__")
        names = ["bootstrap.code"] if os.path.exists(os.path.join(folder, "bootstrap.code")) else []
        if os.path.isdir(cache):
            names += [os.path.join("__pycache__", name) for name in os.listdir(cache)]
        written = {name: os.stat(os.path.join(folder, name)).st_mtime_ns for name in names}
    with open(path, "w") as stream:
        stream.write(repr([modules, written]))
"""

MAIN = """
import multiprocessing
import subprocess
import sys

import probe

if __name__ == "__main__":
    out = sys.argv[1]
    for index in range(2):
        code = f"import probe; probe.report({out + f'/bare-{index}'!r})"
        subprocess.run([sys.executable, "-c", code], check=True)
    spawn = multiprocessing.get_context("spawn")
    for index in range(2):
        process = spawn.Process(target=probe.report, args=(f"{out}/spawn-{index}",))
        process.start()
        process.join()
    killed = subprocess.run(
        [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"]
    )
    print("killed", killed.returncode)
"""


SPEC = """
version: 1
targets:
  - module: never_imported
    functions:
      - qualname: step
        name: never.step
"""


def _ncompass_run(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``ncompass run --profiler none ARGS`` in ``folder`` (nothing to record: children only)."""
    (folder / "spec.yaml").write_text(textwrap.dedent(SPEC).lstrip())
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(folder), str(REPO)])}
    command = [sys.executable, "-m", "ncompass", "run", "-c", "spec.yaml", "-o", "traces"]
    return subprocess.run(
        [*command, "--profiler", "none", *args],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def children(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Each child's modules and the run folder's listing, under ``--no-follow`` and following."""
    folder = tmp_path_factory.mktemp("startup")
    (folder / "main.py").write_text(textwrap.dedent(MAIN).lstrip())
    (folder / "probe.py").write_text(textwrap.dedent(PROBE).lstrip())
    found: dict[str, Any] = {}
    for mode in ("no-follow", "follow"):
        (folder / mode).mkdir()
        options = ["--no-follow"] if mode == "no-follow" else []
        result = _ncompass_run(folder, *options, "main.py", str(folder / mode))
        assert result.returncode == 0, result.stderr
        found[mode] = {
            path.name: ast.literal_eval(path.read_text()) for path in (folder / mode).iterdir()
        }
        found[mode]["stderr"] = result.stderr
        found[mode]["stdout"] = result.stdout
    return found


@pytest.mark.parametrize("child", CHILDREN)
def test_a_followed_child_imports_only_the_bootstrap_beyond_an_unfollowed_one(
    children: dict[str, Any], child: str
) -> None:
    unfollowed, _ = children["no-follow"][child]
    followed, _ = children["follow"][child]
    assert "ncompass.capture.follow.bootstrap" in followed  # it is followed
    assert "ncompass.capture.follow.bootstrap" not in unfollowed
    assert set(followed) - set(unfollowed) <= FOLLOWING_ADDS


def test_the_runs_first_child_compiles_for_all_the_others(children: dict[str, Any]) -> None:
    """The bootstrap's code and the run's ``sitecustomize``'s bytecode are written once, by
    the first child, whether or not Python writes bytecode (``PYTHONDONTWRITEBYTECODE``)."""
    written = [children["follow"][child][1] for child in CHILDREN]
    assert "bootstrap.code" in written[0], written[0]
    assert any(
        name.startswith(os.path.join("__pycache__", "sitecustomize.")) for name in written[0]
    )
    assert all(stamps == written[0] for stamps in written[1:]), written


def test_a_child_killed_at_start_is_still_named(children: dict[str, Any]) -> None:
    followed = children["follow"]
    assert "killed -9" in followed["stdout"]
    named = [line for line in followed["stderr"].splitlines() if "killed by SIGKILL" in line]
    assert len(named) == 1 and "os.kill(os.getpid(), signal.SIGKILL)" in named[0], followed[
        "stderr"
    ]


def test_the_bootstrap_loaded_at_start_is_the_one_ncompass_imports(tmp_path: Path) -> None:
    """Loaded without its package, it is still the module (and the state) the package sees."""
    check = """
    import sys
    loaded = sys.modules["ncompass.capture.follow.bootstrap"]
    import ncompass.capture.follow.bootstrap
    from ncompass.capture.follow import bootstrap
    from ncompass.capture.follow.bootstrap import current
    assert ncompass.capture.follow.bootstrap is bootstrap is loaded
    assert current() is not None and current().pid == __import__("os").getpid()
    print("same module")
    """
    main = f"import subprocess, sys\nsubprocess.run([sys.executable, '-c', {textwrap.dedent(check)!r}], check=True)\n"
    (tmp_path / "main.py").write_text(main)
    result = _ncompass_run(tmp_path, "main.py")
    assert result.returncode == 0, result.stderr
    assert "same module" in result.stdout


PLAIN_VALUES: list[object] = [
    None,
    True,
    False,
    0,
    -12,
    10**30,
    1.5,
    -0.0,
    1e300,
    "",
    "plain text",
    'quote " and \\ backslash',
    "tab\t newline\n return\r bell\x07 del\x7f form\f back\b",
    "accents é, CJK 漢字, emoji 🎉",
    "surrogate escaped \udcff from argv",
    [],
    [1, "two", None, [3.0, {"four": 4}]],
    ("a", "tuple"),
    {"pid": 4242, "ppid": 1, "rank": None, "role": "rank 0 · worker", "command": "python -c x"},
    {"markers": [], "modules": [["work", "/tmp/work.py"]], "exit_code": -9},
]


@pytest.mark.parametrize("value", PLAIN_VALUES, ids=range(len(PLAIN_VALUES)))
def test_records_are_written_exactly_as_json_writes_them(value: object) -> None:
    assert bootstrap._plain_json(value) == json.dumps(value)
    assert json.loads(bootstrap._plain_json(value)) == json.loads(json.dumps(value))


@pytest.mark.parametrize("value", [math.nan, math.inf, True.__class__, {1: "int key"}, b"bytes"])
def test_what_is_not_plain_is_left_to_json(value: object) -> None:
    with pytest.raises(TypeError):
        bootstrap._plain_json(value)


def test_the_follow_variable_is_spelled_as_ncompass_spells_it() -> None:
    assert environment_variables.NCOMPASS_FOLLOW == bootstrap.FOLLOW_ENV
    assert environment_variables.NCOMPASS_FOLLOW == run_sitecustomize._FOLLOW_ENV


def test_settings_read_back_as_written(tmp_path: Path) -> None:
    settings = {"root_pid": 1, "modules": ["a", "b"], "spec": "/x/spec.pickle", "traces": None}
    bootstrap.write_settings(str(tmp_path), settings)
    assert bootstrap.read_settings(str(tmp_path)) == settings
