"""``ncompass spec validate`` checks custom contexts by reading their source, importing nothing.

Every module here leaves a file behind if its top-level code runs; the real command runs in a
subprocess (a fresh interpreter, so nothing is imported already).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
GOOD_CLASS = """
class Ctx:
    def __init__(self, name, values=None):
        self.name = name

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None
"""


def ran(marker: str) -> str:
    """Top-level code that proves it ran by writing ``marker`` into the working folder."""
    return f"from pathlib import Path\nPath({marker!r}).write_text('top-level code ran')\n"


def write_project(folder: Path, context: str, files: dict[str, str]) -> Path:
    (folder / "target.py").write_text("def work():\n    return 1\n")
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    spec = folder / "spec.yaml"
    spec.write_text(
        "version: 1\n"
        f"context: {context}\n"
        "targets:\n"
        "  - module: target\n"
        "    functions:\n"
        "      - qualname: work\n"
    )
    return spec


def validate(folder: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "ncompass", "spec", "validate", "-p", ".", "spec.yaml"],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_validate_does_not_run_the_module_of_a_custom_context(tmp_path: Path) -> None:
    write_project(tmp_path, "mymod:Ctx", {"mymod.py": ran("RAN-mymod") + GOOD_CLASS})
    result = validate(tmp_path)
    assert result.returncode == 0, result.stderr
    assert "✓ spec.yaml: 1 marker in 1 target" in result.stdout
    assert "note:" not in result.stdout
    assert not (tmp_path / "RAN-mymod").exists()


def test_validate_runs_no_parent_package_of_a_custom_context(tmp_path: Path) -> None:
    files = {
        "pkg/__init__.py": ran("RAN-pkg"),
        "pkg/sub/__init__.py": ran("RAN-sub"),
        "pkg/sub/contexts.py": ran("RAN-contexts") + GOOD_CLASS,
    }
    write_project(tmp_path, "pkg.sub.contexts:Ctx", files)
    result = validate(tmp_path)
    assert result.returncode == 0, result.stderr
    assert sorted(path.name for path in tmp_path.glob("RAN-*")) == []


@pytest.mark.parametrize(
    ("source", "context", "error"),
    [
        (GOOD_CLASS, "mymod:Ctz", "mymod ({path}) defines no 'Ctz'; did you mean 'Ctx'?"),
        (
            "class Ctx:\n    def __enter__(self):\n        return self\n",
            "mymod:Ctx",
            "class Ctx of mymod ({path}:3) has no __exit__ method; a custom context must be",
        ),
        ("class Ctx(:\n", "mymod:Ctx", "{path} is not valid Python (line 3: "),
        (GOOD_CLASS, "nomod:Ctx", "cannot find module 'nomod' on the search path"),
    ],
)
def test_a_bad_custom_context_is_reported_at_its_spec_line_without_running_it(
    tmp_path: Path, source: str, context: str, error: str
) -> None:
    write_project(tmp_path, context, {"mymod.py": ran("RAN-mymod") + source})
    result = validate(tmp_path)
    assert result.returncode == 2
    path = tmp_path / "mymod.py"
    assert f"spec.yaml:2: context {context!r}: " in result.stderr
    assert error.format(path=path) in result.stderr
    assert not (tmp_path / "RAN-mymod").exists()


@pytest.mark.parametrize(
    ("source", "why"),
    [
        ("from elsewhere import Ctx\n", "binds 'Ctx' by an import, an assignment or a function"),
        ("Ctx = object\n", "binds 'Ctx' by an import, an assignment or a function"),
        ("from elsewhere import *\n", "binds 'Ctx' by an import, an assignment or a function"),
        ("class Ctx(Base):\n    pass\n", "may get __enter__ and __exit__ from a base class"),
    ],
)
def test_what_only_importing_could_show_is_said_not_checked(
    tmp_path: Path, source: str, why: str
) -> None:
    write_project(tmp_path, "mymod:Ctx", {"mymod.py": ran("RAN-mymod") + source})
    result = validate(tmp_path)
    assert result.returncode == 0, result.stderr
    (note,) = [line for line in result.stdout.splitlines() if "note:" in line]
    assert note.startswith("    note: context 'mymod:Ctx': ")
    assert why in note and "not checked here, checked when `ncompass run` imports it" in note
    assert not (tmp_path / "RAN-mymod").exists()


def test_the_help_says_what_validate_reads_and_that_nothing_is_imported() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    help_text = subprocess.run(
        [sys.executable, "-m", "ncompass", "spec", "validate", "--help"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    flat = " ".join(help_text.split())
    assert "Nothing is imported or run" in flat
    assert "checked by reading its module's source" in flat
