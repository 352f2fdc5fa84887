"""The public surface of ``ncompass.remote``: every name resolves, and none imports Ray."""

from __future__ import annotations

import subprocess
import sys

import pytest


def test_every_public_name_resolves_without_importing_ray() -> None:
    code = (
        "import sys, ncompass.remote as remote\n"
        "missing = [name for name in remote.__all__ if getattr(remote, name, None) is None]\n"
        "assert not missing, missing\n"
        "assert sorted(remote.__all__) == sorted(set(remote.__all__))\n"
        "print('ray' in sys.modules or any(m.startswith('ray.') for m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_a_version_mismatch_is_worth_a_warning() -> None:
    ray = pytest.importorskip("ray", reason="Ray is not installed")
    from ncompass.remote.submission import version_mismatch

    assert version_mismatch(ray.__version__) is None
    warning = version_mismatch("1.13.0")
    assert warning is not None and "install ray[default]==1.13.0 here" in warning
