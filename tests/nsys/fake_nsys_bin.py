"""Installing the fake ``nsys`` (``fake_nsys.py``) where a test's PATH finds it."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

FAKE_NSYS = Path(__file__).with_name("fake_nsys.py")


class FakeNsys:
    """The fake ``nsys`` installed in ``bin``, and what it was asked to do."""

    def __init__(self, bin_dir: Path) -> None:
        self.bin = bin_dir

    def calls(self) -> list[list[str]]:
        """Every command line it received, in order."""
        log = self.bin / "nsys.log"
        if not log.exists():
            return []
        return [json.loads(line)["argv"] for line in log.read_text().splitlines()]


def install_fake_nsys(bin_dir: Path, export: Path, monkeypatch: pytest.MonkeyPatch) -> FakeNsys:
    """Write the fake as ``bin_dir/nsys`` (run by this Python), first on PATH, whose reports
    hold the SQLite file ``export``."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / "nsys"
    script.write_text(f"#!{sys.executable}\n" + FAKE_NSYS.read_text())
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_NSYS_EXPORT", str(export))
    monkeypatch.delenv("NCOMPASS_NSYS", raising=False)
    return FakeNsys(bin_dir)
