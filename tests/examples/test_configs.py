"""The example specs in ``configs/`` match the demo as it is: no drift, every marker placed."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from ncompass.importer.validate import validate_spec
from ncompass.spec.models import RewriteConfig
from tests.conftest import REPO

CONFIGS = sorted((REPO / "configs").glob("*.yaml"))


@pytest.mark.parametrize("spec", CONFIGS, ids=[path.name for path in CONFIGS])
def test_example_specs_match_the_demo_without_drift(
    spec: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(REPO / "examples"))
    config = RewriteConfig.from_yaml(spec)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        checks = validate_spec(config)
    placed = [check for check in checks if check.skipped is None]
    assert placed, "no target of the spec applies to what is installed"
    for check in checks:
        if check.skipped is not None:  # the section of another version of the same module
            assert any(p.target.module == check.target.module for p in placed), check.skipped
            continue
        assert not check.notes, check.notes
        assert check.sites or check.replacements
        assert check.source is not None
        if check.target.sha256 is not None:  # edit the model, then update the specs' hashes
            assert check.target.sha256 == hashlib.sha256(check.source.read_bytes()).hexdigest()


def test_the_demo_runs_plain_without_ncompass() -> None:
    done = subprocess.run(
        [sys.executable, "examples/tiny_transformer.py", "--layers", "1", "--new-tokens", "1"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "generated 1 tokens" in done.stdout
    assert "ncompass" not in done.stderr
