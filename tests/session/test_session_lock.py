"""A session has one writer at a time, and never overwrites a trace it has lost track of."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ncompass.session.lock import SessionBusyError
from ncompass.session.session import ProfilingSession
from ncompass.session.store import STATE_FILE
from tests.conftest import REPO

DEADLINE_S = 300.0

HOLDER = """
import sys
from ncompass.session.session import ProfilingSession

session = ProfilingSession(sys.argv[1], session_name="shared")
print("locked", flush=True)
sys.stdin.read()  # hold the session until the test closes our input
"""


@pytest.fixture
def other_writer(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process that has the session ``shared`` in ``tmp_path`` open to write."""
    process = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path)],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    deadline = time.monotonic() + DEADLINE_S
    line = process.stdout.readline()  # blocks until the holder locked (or died)
    assert line.strip() == "locked" and time.monotonic() < deadline
    yield process
    assert process.stdin is not None
    process.stdin.close()
    process.wait(timeout=DEADLINE_S)


def test_a_second_writer_process_is_refused_in_one_line(
    tmp_path: Path, other_writer: subprocess.Popen[str]
) -> None:
    with pytest.raises(SessionBusyError, match=rf"in use by process {other_writer.pid}"):
        ProfilingSession(str(tmp_path), session_name="shared")
    reader = ProfilingSession(str(tmp_path), session_name="shared", read_only=True)
    assert reader.iterations == []
    ProfilingSession(str(tmp_path), session_name="another")  # other sessions are free


def test_session_run_refuses_while_another_process_writes_the_session(
    tmp_path: Path,
    other_writer: subprocess.Popen[str],
) -> None:
    script = tmp_path / "app.py"
    script.write_text("print('ran')\n")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ncompass",
            "session",
            "run",
            "--name",
            "shared",
            "-o",
            str(tmp_path),
            str(script),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"error: session 'shared' ({tmp_path / 'shared'}) is in use by process "
        f"{other_writer.pid}; wait for it to end, or choose another --name"
    ]
    assert "ran" not in done.stdout
    assert sorted(path.name for path in tmp_path.glob("*.json")) == []


def test_the_lock_is_released_when_the_writer_closes(tmp_path: Path) -> None:
    code = textwrap.dedent(
        """
        import sys
        from ncompass.session.session import ProfilingSession
        ProfilingSession(sys.argv[1], session_name="s").close()
        print("ok")
        """
    )
    first = ProfilingSession(str(tmp_path), session_name="s")
    busy = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], cwd=REPO, capture_output=True, text=True
    )
    assert busy.returncode != 0 and "SessionBusyError" in busy.stderr
    first.close()
    free = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], cwd=REPO, capture_output=True, text=True
    )
    assert free.stdout.strip() == "ok", free.stderr


def test_a_restarted_session_never_overwrites_the_traces_it_lost_track_of(tmp_path: Path) -> None:
    """``session.json`` moved aside: the next run is iteration 1 again for the session, but the
    trace of the first iteration is still there, and is kept."""
    script = tmp_path / "app.py"
    script.write_text("import sys\nprint(sys.argv[1:])\n")
    out = tmp_path / "traces"
    first = ProfilingSession(str(out), session_name="s")
    kept = Path(first.run_script(str(script), ["first"], discovery=False))
    assert kept == out / "s-i001.json"
    kept_bytes = kept.read_bytes()
    (out / "s" / STATE_FILE).rename(out / "s" / "moved-aside.json")

    again = ProfilingSession(str(out), session_name="s")
    second = Path(again.run_script(str(script), ["second"], discovery=False))
    assert second == out / "s-i002.json"
    assert kept.read_bytes() == kept_bytes
    assert "first" in (out / "s-i001.ncompass.json").read_text()
    assert "second" in (out / "s-i002.ncompass.json").read_text()
    assert [record.iteration for record in again.iterations] == [2]
