"""``ncompass session``: three iterations from the command line find the planted slow statement,
one level deeper each time, and every spec and trace is kept."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO
from tests.session import planted
from tests.support.lines import line_of

SOURCE = Path(planted.__file__).read_text()


def _ncompass(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "ncompass", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_three_iterations_find_the_planted_statement(tmp_path: Path) -> None:
    script = tmp_path / "app.py"
    script.write_text("from tests.session.planted import run\n\nrun(2)\n")
    spec = tmp_path / "start.yaml"
    spec.write_text(
        "version: 1\ntargets:\n  - module: tests.session.planted\n    functions:\n"
        "      - qualname: 'Pipeline.*'\n"
    )
    done = _ncompass(
        "session",
        "run",
        "--one-level",
        "--config",
        str(spec),
        "-n",
        "3",
        "--name",
        "t",
        str(script),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    hottest = [
        line.split("hottest: ", 1)[1] for line in done.stdout.splitlines() if "hottest: " in line
    ]
    assert len(hottest) == 3
    assert hottest[0].startswith("tests.session.planted:Pipeline.compute ")
    assert hottest[1].startswith(f"Pipeline.compute:{line_of(SOURCE, 'for step')} for step")
    slow = line_of(SOURCE, "spin(SLOW)  #")
    assert hottest[2].startswith(f"Pipeline.compute:{slow} spin(SLOW)")
    assert f"line {slow} of" in hottest[2]
    # the answer is the conclusion (the old "slowest so far" line named a marker beside it)
    [answer] = [line for line in done.stdout.splitlines() if line.startswith("answer: ")]
    assert "spin(SLOW)" in answer and "slowest so far" not in done.stdout
    session_dir = tmp_path / "traces" / "t"
    assert sorted(p.name for p in (session_dir / "specs").glob("*.yaml")) == [
        "v001.yaml",
        "v002.yaml",
        "v003.yaml",
    ]
    assert sorted(p.name for p in (tmp_path / "traces").glob("t-i00?.json")) == [
        "t-i001.json",
        "t-i002.json",
        "t-i003.json",
    ]

    history = _ncompass("session", "history", "--name", "t", "--json", cwd=tmp_path)
    assert history.returncode == 0, history.stderr
    iterations = json.loads(history.stdout)
    assert [entry["iteration"] for entry in iterations] == [1, 2, 3]
    assert iterations[2]["changes"]  # markers present in both iterations are compared
    text = _ncompass("session", "history", "--name", "t", cwd=tmp_path)
    assert "iteration 3" in text.stdout

    missing = _ncompass("session", "show", "--name", "t", "9", cwd=tmp_path)
    assert missing.returncode == 2 and "no iteration 9 in session 't'" in missing.stderr
    assert "it has 1, 2, 3" in missing.stderr
    empty = _ncompass("session", "show", "--name", "none-yet", cwd=tmp_path)
    assert empty.returncode == 2 and "has no iterations yet" in empty.stderr

    shown = _ncompass("session", "show", "--name", "t", "2", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "# Trace summary" in shown.stdout and "v002.yaml" in shown.stdout


def test_feedback_from_the_command_line(tmp_path: Path) -> None:
    script = tmp_path / "app.py"
    script.write_text("from tests.session.planted import run\n\nrun(1)\n")
    start, end = line_of(SOURCE, "def compute"), line_of(SOURCE, "return total")
    target = f"tests.session.planted:{start}-{end}"
    proposed = _ncompass(
        "session", "feedback", "--name", "f", "--target", target, "why so slow?", cwd=tmp_path
    )
    assert proposed.returncode == 0, proposed.stderr
    assert "markers proposed" in proposed.stdout
    done = _ncompass("session", "run", "-n", "1", "--name", "f", str(script), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"hottest: Pipeline.compute:{line_of(SOURCE, 'for step')} for step" in done.stdout
    bad = _ncompass(
        "session", "feedback", "--name", "f", "--target", "nowhere_module:1-3", "?", cwd=tmp_path
    )
    assert bad.returncode == 2 and "error:" in bad.stderr and "not found" in bad.stderr


def test_feedback_on_a_module_beside_the_script(tmp_path: Path) -> None:
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "beside.py").write_text(SOURCE)  # found the way the script finds it
    script = tmp_path / "app" / "main.py"
    script.write_text("from beside import run\n\nrun(1)\n")
    start, end = line_of(SOURCE, "def compute"), line_of(SOURCE, "return total")
    done = _ncompass(
        "session", "run", "-n", "1", "--name", "b", "--feedback", "why?",
        "--target", f"beside:{start}-{end}", str(script), cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"hottest: Pipeline.compute:{line_of(SOURCE, 'for step')} for step" in done.stdout


def test_a_failing_script_shows_its_error_and_its_exit_code(tmp_path: Path) -> None:
    script = tmp_path / "fails.py"
    script.write_text("import sys\n\nsum(range(1000))\nsys.exit('bad config: batch must be > 0')\n")
    done = _ncompass("session", "run", "-n", "1", "--name", "x", str(script), cwd=tmp_path)
    assert done.returncode == 1
    assert "the script exited with 1:\n    bad config: batch must be > 0" in done.stderr
    assert "USDT" not in done.stderr.split("exited with 1:")[1]
    assert "specs and traces:" in done.stdout  # the iteration is still kept and reported


def test_feedback_markers_that_would_cross_the_users_range_are_dropped_with_why(
    tmp_path: Path,
) -> None:
    fast, slow = line_of(SOURCE, "spin(FAST)", 2), line_of(SOURCE, "spin(SLOW)  #")
    spec = tmp_path / "mine.yaml"
    spec.write_text(
        "version: 1\ntargets:\n  - module: tests.session.planted\n    ranges:\n"
        f"      - {{in: Pipeline.compute, lines: [{line_of(SOURCE, 'total = x')}, {fast}], "
        "name: mine}\n"
    )
    script = tmp_path / "app.py"
    script.write_text("from tests.session.planted import run\n\nrun(1)\n")
    done = _ncompass(
        "session", "run", "-n", "1", "--name", "c", "--config", str(spec), "--feedback", "why?",
        "--target", f"tests.session.planted:{fast}-{slow}", str(script), cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    dropped = [line for line in done.stdout.splitlines() if line.startswith("  dropped: ")]
    assert dropped and "overlap without nesting" in dropped[0]
    assert "mine" in done.stdout  # the user's own marker still ran


def test_a_window_measures_the_same_calls_every_run(tmp_path: Path) -> None:
    script = tmp_path / "app.py"
    script.write_text("from tests.session.planted import run\n\nrun(4)\n")
    spec = tmp_path / "start.yaml"
    spec.write_text(
        "version: 1\ntargets:\n  - module: tests.session.planted\n    functions:\n"
        "      - qualname: 'Pipeline.*'\n"
    )
    marker = "tests.session.planted:Pipeline.forward"
    done = _ncompass(
        *("session", "run", "--config", str(spec), "-n", "2", "--name", "w"),
        *("--window", f"{marker}:3:1", str(script)),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    traces = sorted((tmp_path / "traces").rglob("w-i*-w1.json"))
    assert len(traces) == 2
    for trace in traces:
        events = json.loads(trace.read_text())["traceEvents"]
        forwards = [e for e in events if e.get("name") == marker]
        assert len(forwards) == 1  # the third call only, in every run
    assert "hottest: " in done.stdout
