"""Fixtures shared by the whole suite."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.modules import ModuleLab

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleLab]:
    """Write modules into a temporary folder on sys.path and import them under rewrites."""
    root = tmp_path / "lab"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    laboratory = ModuleLab(root)
    try:
        yield laboratory
    finally:
        laboratory.close()
