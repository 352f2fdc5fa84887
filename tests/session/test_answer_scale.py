"""The answer of a marker run grows linearly with its marker calls: a statement marked inside a
loop of many turns is a repeat per turn, and every marker call is placed in its repeat by a
binary search, not by a scan of all repeats. The traces here are real ``ncompass run`` traces."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson

from ncompass.capture.trace_files import sidecar_path
from ncompass.session.answer import _WindowIndex, answer_from_markers
from ncompass.session.history import IterationRecord
from tests.conftest import REPO

_LOOP = """\
import sys

s = 0
for i in range(int(sys.argv[1])):
    s += i
print(s)
"""


def _marked_loop_run(folder: Path, turns: int) -> IterationRecord:
    """A real run of the loop with a marker on its statement (one marker call per turn)."""
    folder.mkdir()
    script = folder / "loop.py"
    script.write_text(_LOOP)
    spec = folder / "spec.yaml"
    spec.write_text(
        f"version: 1\ntargets:\n- file: {script}\n  ranges:\n  - in: <module>\n"
        "    lines: [5, 5]\n    name: loop.py:5 s += i\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "ncompass", "run", "--config", str(spec), "-o", str(folder),
         "--trace-name", "loop", str(script), str(turns)],
        cwd=folder, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    trace = folder / "loop.json"
    markers = orjson.loads(sidecar_path(trace).read_bytes())["markers"]
    return IterationRecord(1, 1, None, str(trace), manifest=markers)


def _answer_seconds(record: IterationRecord, turns: int) -> float:
    started = time.process_time()
    answer = answer_from_markers(record, runs=1)
    spent = time.process_time() - started
    assert answer is not None and answer.lines == (5, 5)
    assert answer.repeats == turns  # the recurring marker is the statement: a repeat per turn
    return spent


def test_the_answer_is_linear_in_marker_calls(tmp_path: Path) -> None:
    small = _marked_loop_run(tmp_path / "small", 1_000)
    large = _marked_loop_run(tmp_path / "large", 10_000)
    # Ten times the calls: about ten times the time when linear, a hundred when every call
    # scanned every repeat. CPU time of this process (the small one the best of two), so a
    # busy machine does not decide.
    small_s = min(_answer_seconds(small, 1_000) for _ in range(2))
    large_s = _answer_seconds(large, 10_000)
    assert large_s < 30 * max(small_s, 0.005), (small_s, large_s)


def _first_window(windows: list[tuple[float, float, Any]], at: float, pid: Any) -> int | None:
    """The plain definition: the first repeat in order that holds the time (the last one holds
    its end too), of the marker's process or of any."""
    for position, (start, end, owner) in enumerate(windows):
        if owner is not None and owner != pid:
            continue
        if start <= at < end or (position == len(windows) - 1 and at == end):
            return position
    return None


def test_the_window_index_finds_what_a_scan_of_every_window_finds() -> None:
    chance = random.Random(7)
    for _ in range(200):
        owners = chance.choice([[None], [1, 2], [None, 3]])
        windows = []
        for _ in range(chance.randint(1, 12)):
            start = float(chance.randint(0, 40))
            windows.append((start, start + chance.randint(0, 15), chance.choice(owners)))
        windows.sort(key=lambda w: (w[0], w[1]))
        index = _WindowIndex(windows)
        for at in [x / 2 for x in range(-2, 120)]:
            for pid in (None, 1, 2, 3):
                assert index.slot(at, pid) == _first_window(windows, at, pid), (windows, at, pid)
