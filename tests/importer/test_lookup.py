"""Finding a target's file without importing it: packages, namespace packages, missing modules."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ncompass.errors import SpecError
from ncompass.importer.lookup import module_source


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``ns_a/ns_b/mod.py`` (folders without ``__init__.py``) and ``pkg_c/sub_d/mod.py``."""
    (tmp_path / "ns_a" / "ns_b").mkdir(parents=True)
    (tmp_path / "ns_a" / "ns_b" / "mod.py").write_text("def f():\n    return 1\n")
    (tmp_path / "pkg_c" / "sub_d").mkdir(parents=True)
    (tmp_path / "pkg_c" / "__init__.py").write_text("raise RuntimeError('imported')\n")
    (tmp_path / "pkg_c" / "sub_d" / "__init__.py").write_text("")
    (tmp_path / "pkg_c" / "sub_d" / "mod.py").write_text("x = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_a_module_two_namespace_folders_deep_is_found(tree: Path) -> None:
    assert module_source("ns_a.ns_b.mod") == tree / "ns_a" / "ns_b" / "mod.py"
    assert "ns_a" not in sys.modules


def test_a_module_in_a_regular_package_is_found_without_importing_it(tree: Path) -> None:
    assert module_source("pkg_c.sub_d.mod") == tree / "pkg_c" / "sub_d" / "mod.py"
    assert "pkg_c" not in sys.modules


def test_a_missing_module_in_a_namespace_folder_is_a_spec_error(tree: Path) -> None:
    with pytest.raises(SpecError, match=r"'ns_a\.ns_b\.nope' not found"):
        module_source("ns_a.ns_b.nope")
