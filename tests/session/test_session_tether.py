"""A session's run ends with the session: ``session run`` killed with SIGKILL leaves no
``ncompass run`` child writing into its folder. Every process here is real."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc (Linux)")

# Long enough that the run is still going when the session is killed; each turn it notes that
# it still runs, so the test can tell it stopped writing.
_SLOW = """\
import pathlib
import sys
import time

beat = pathlib.Path(sys.argv[1])
for turn in range(1200):
    beat.write_text(str(turn))
    time.sleep(0.05)
"""


def children_of(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        found += [int(child) for child in task.read_text().split()]
    return found


def running(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie (an orphan's zombie may wait for a reaper)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def wait_for(condition: object, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if callable(condition) and condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"{what} within {timeout_s} s")


@pytest.mark.parametrize("run_kind", ["discovery", "markers"])
def test_a_killed_session_takes_its_run_with_it(tmp_path: Path, run_kind: str) -> None:
    script, beat = tmp_path / "slow.py", tmp_path / "beat.txt"
    script.write_text(_SLOW)
    options = ["--one-level"] if run_kind == "markers" else []
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    session = subprocess.Popen(
        [sys.executable, "-m", "ncompass", "session", "run", "-n", "1", *options,
         "-o", str(tmp_path / "traces"), str(script), str(beat)],
        cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    child = 0
    try:
        # The script runs (its first beat) in the session's child.
        wait_for(lambda: beat.exists() and children_of(session.pid), 120.0, "the run started")
        (child,) = children_of(session.pid)
        assert b"ncompass" in Path(f"/proc/{child}/cmdline").read_bytes()
        session.send_signal(signal.SIGKILL)
        session.wait(timeout=30)
        # Gone within a few seconds (the kernel kills it as its parent dies): generous bound.
        wait_for(lambda: not running(child), 10.0, "the run did not end with its session")
        last = beat.read_text()
        time.sleep(0.5)
        assert beat.read_text() == last, "the run went on writing after its session was killed"
    finally:
        if session.poll() is None:
            session.kill()
            session.wait(timeout=30)
        if child and running(child):  # the run this test started, by its pid
            os.kill(child, signal.SIGKILL)


def test_a_run_started_by_hand_is_not_tied_to_anything(tmp_path: Path) -> None:
    """Without the session's variable, ``python -m ncompass`` behaves as always."""
    from ncompass.session.tether import PARENT_ENV

    env = {key: value for key, value in os.environ.items() if key != PARENT_ENV}
    env["PYTHONPATH"] = str(REPO)
    done = subprocess.run(
        [sys.executable, "-m", "ncompass", "--help"], env=env, capture_output=True, timeout=120
    )
    assert done.returncode == 0


def test_a_run_whose_session_is_already_gone_ends_at_once(tmp_path: Path) -> None:
    """The session died between starting the run and the run tying itself to it."""
    from ncompass.session.tether import PARENT_ENV

    env = {**os.environ, "PYTHONPATH": str(REPO), PARENT_ENV: "1"}  # not its parent
    done = subprocess.run(
        [sys.executable, "-m", "ncompass", "--help"], env=env, capture_output=True, timeout=120
    )
    assert done.returncode == -signal.SIGKILL and done.stdout == b""
