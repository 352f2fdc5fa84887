"""The package layering in pyproject.toml holds, and the checker catches each kind of erosion.

The contracts are run by import-linter (`make layers`); docs/architecture.md explains them. The
erosion tests run the same contracts on a copy of the package with one import added.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def lint_imports(project: Path) -> subprocess.CompletedProcess[str]:
    """import-linter's own command, on the package and pyproject.toml found in ``project``."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    command = "import sys; from importlinter.cli import lint_imports_command as c; sys.exit(c())"
    return subprocess.run(
        [sys.executable, "-c", command, "--no-cache", "--no-logo"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_package_keeps_its_contracts() -> None:
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "4 kept, 0 broken" in result.stdout


def copy_project(tmp_path: Path) -> Path:
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    shutil.copytree(
        ROOT / "ncompass", tmp_path / "ncompass", ignore=shutil.ignore_patterns("__pycache__")
    )
    return tmp_path


def append(path: Path, text: str) -> None:
    path.write_text(path.read_text() + "\n\n" + text)


# a lazy import counts as much as a top-level one: both are written inside functions here
EROSIONS = {
    "spec-imports-session": (
        "ncompass/spec/models.py",
        "def _late() -> None:\n    from ncompass.session import session  # noqa: F401\n",
        "ncompass.spec is not allowed to import ncompass.session",
    ),
    "traces-imports-gpu": (
        "ncompass/traces/events.py",
        "def _late() -> None:\n    import ncompass.gpu  # noqa: F401\n",
        "ncompass.traces is not allowed to import ncompass.gpu",
    ),
    "traces-imports-rewrite": (
        "ncompass/traces/link.py",
        "def _late() -> None:\n    import ncompass.rewrite.source  # noqa: F401\n",
        "ncompass.traces is not allowed to import ncompass.rewrite",
    ),
    "rewrite-and-importer-import-each-other": (
        "ncompass/rewrite/plan.py",
        "def _late() -> None:\n    import ncompass.importer.hook  # noqa: F401\n",
        "No cycles are allowed in ncompass.",
    ),
    "a-module-imports-its-own-caller": (
        "ncompass/analysis/rules.py",
        "def _late() -> None:\n    import ncompass.analysis.summary  # noqa: F401\n",
        "No cycles are allowed in ncompass.analysis.",
    ),
}


@pytest.mark.parametrize("erosion", sorted(EROSIONS))
def test_an_added_import_that_erodes_the_layering_is_reported(tmp_path: Path, erosion: str) -> None:
    module, code, message = EROSIONS[erosion]
    project = copy_project(tmp_path)
    append(project / module, code)
    result = lint_imports(project)
    assert result.returncode == 1, result.stdout + result.stderr
    assert message in result.stdout


def test_a_new_package_must_be_given_a_layer(tmp_path: Path) -> None:
    project = copy_project(tmp_path)
    (project / "ncompass" / "newstage").mkdir()
    (project / "ncompass" / "newstage" / "__init__.py").write_text('"""A new stage."""\n')
    result = lint_imports(project)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "ncompass.newstage" in result.stdout


def test_an_exception_that_no_longer_matches_is_a_warning_to_delete_it(tmp_path: Path) -> None:
    # an exception whose import is gone: as if the import had been removed since
    project = copy_project(tmp_path)
    pyproject = project / "pyproject.toml"
    source = pyproject.read_text()
    switch = 'unmatched_ignore_imports_alerting = "warn"'
    assert switch in source
    stale = 'ignore_imports = ["ncompass.errors -> ncompass.cli"]'
    pyproject.write_text(source.replace(switch, f"{stale}\n{switch}", 1))
    result = lint_imports(project)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "No matches for ignored import ncompass.errors -> ncompass.cli." in result.stdout
