"""The optional C extensions: every source compiles without warnings, and CI builds them all."""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).parents[1]
SOURCES = sorted((REPO / "ncompass").glob("*/_*.c"))
MODULES = {
    "ncompass/traces/_fold.c": "ncompass.traces._fold",
    "ncompass/analysis/_sweep.c": "ncompass.analysis._sweep",
}


def test_every_c_source_is_a_known_extension() -> None:
    assert [str(path.relative_to(REPO)) for path in SOURCES] == sorted(MODULES)


@pytest.mark.parametrize("source", SOURCES, ids=lambda path: path.name)
def test_the_source_compiles_without_warnings(source: Path) -> None:
    compiler = shutil.which("gcc")
    if compiler is None:
        pytest.skip("no gcc here")
    include = sysconfig.get_paths()["include"]
    done = subprocess.run(
        [compiler, "-fsyntax-only", "-O2", "-Wall", "-Wextra", "-Werror", f"-I{include}", source],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("module", sorted(MODULES.values()))
def test_the_extension_is_built_in_ci(module: str) -> None:
    try:
        importlib.import_module(module)
    except ImportError:
        # CI installs with `pip install -e .`, which builds them: there, a missing build is a bug.
        assert not os.environ.get("CI"), f"the C extension {module} was not built"
        pytest.skip(f"{module} is not built here (pip install -e . builds it)")
