"""``--profiler nvtx-trace`` with recording windows: the NVTX recorder keeps nothing outside them.

Real runs of ``ncompass run`` with the real recorder attached; the programs ask the recorder
how many events it has kept (``ncompass_nvtx_recorder_events``) as they go, so "nothing outside
a window" is measured in records, not in memory.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from ncompass.capture.nvtx_recorder import (
    build_recorder,
    environment,
    find_compiler,
    read_recordings,
)
from ncompass.capture.nvtx_windows import WINDOWS_VARIABLE

pytestmark = pytest.mark.skipif(
    find_compiler() is None, reason="no C compiler on PATH: the NVTX recorder cannot be built"
)

REPOSITORY = Path(__file__).resolve().parents[2]

LOOP = """
import json, sys, time
from ncompass.capture.nvtx_windows import recorder_gate

def tag(n):
    return n

def step(n):
    tag(n)
    return n

def outer(first, last):
    for n in range(first, last + 1):
        step(n)
        seen.append((n, gate.number, gate.events()))

gate = recorder_gate()
seen = []          # (call, the window open after it, the recorder's events after it)
calls = int(sys.argv[1])
n = 1
while n <= calls:
    if n == OUTER:  # a marker around calls OUTER .. OUTER + 5
        outer(n, n + 5)
        n += 6
        continue
    step(n)
    seen.append((n, gate.number, gate.events()))
    n += 1
print(json.dumps(seen))
"""


def _write(tmp_path: Path, outer_at: int = 4, source: str = LOOP) -> tuple[Path, Path]:
    script = tmp_path / "loop.py"
    script.write_text(textwrap.dedent(source).lstrip("\n").replace("OUTER", str(outer_at)))
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        textwrap.dedent(
            f"""\
            version: 1
            targets:
              - file: {script}
                functions:
                  - qualname: step
                    name: step
                  - qualname: tag
                    name: "tag.{{n}}"
                  - qualname: outer
                    name: outer
            """
        )
    )
    return script, spec


def _run(tmp_path: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    script, spec = _write(tmp_path)
    return _cli(tmp_path, spec, script, *arguments)


def _cli(
    tmp_path: Path, spec: Path, script: Path, *arguments: str
) -> subprocess.CompletedProcess[str]:
    *options, calls = arguments
    run = ["run", "-c", str(spec), "-o", "traces", "--trace-name", "nv", "--profiler"]
    done = subprocess.run(
        [sys.executable, "-m", "ncompass", *run, "nvtx-trace", *options, str(script), calls],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPOSITORY)},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return done


def _ranges(trace: Path) -> list[dict[str, Any]]:
    """The trace's ranges (complete events and async begins) in start order."""
    events = json.loads(trace.read_text())["traceEvents"]
    ranges = [e for e in events if e.get("ph") in ("X", "b")]
    return sorted(ranges, key=lambda e: (e["ts"], -e.get("dur", 0)))


def _names(trace: Path) -> list[str]:
    return [e["name"] for e in _ranges(trace)]


def _seen(done: subprocess.CompletedProcess[str]) -> list[tuple[int, int, int]]:
    return [tuple(row) for row in json.loads(done.stdout.strip().splitlines()[-1])]


def test_a_window_by_marker_holds_exactly_its_calls_and_nothing_is_kept_outside(
    tmp_path: Path,
) -> None:
    done = _run(tmp_path, "--window", "step:1000:3", "3000")
    folder = tmp_path / "traces"
    names = _names(folder / "nv-w1.json")
    calls = ["step", "tag.1000", "step", "tag.1001", "step", "tag.1002"]
    assert names == ["recording window 1", *calls]
    assert not (folder / "nv.json").exists(), "no whole-run trace, as under --profiler torch"
    seen = _seen(done)
    before = [events for call, _, events in seen if call < 1000]
    assert len(before) == 999 and set(before) == {0}, "nothing kept before the window"
    at_close = dict((call, events) for call, _, events in seen)[1002]
    after = [events for call, _, events in seen if call > 1002]
    assert len(after) == 1998 and set(after) == {at_close}, "nothing kept after it"
    assert at_close == 2 * len(names)  # a push and a pop (a start and an end) per range
    assert "NVTX recorder: 7 ranges recorded in 1 window, nothing outside them" in done.stderr


def test_repeat_every_writes_one_trace_per_window_from_the_gated_recording(
    tmp_path: Path,
) -> None:
    done = _run(tmp_path, "--window", "step:12:2", "--repeat", "3", "--every", "5", "40")
    folder = tmp_path / "traces"
    for number, first in ((1, 12), (2, 17), (3, 22)):
        trace = folder / f"nv-w{number}.json"
        tags = [name for name in _names(trace) if name.startswith("tag.")]
        assert tags == [f"tag.{first}", f"tag.{first + 1}"]
        sidecar = json.loads((folder / f"nv-w{number}.ncompass.json").read_text())
        assert sidecar["profiler"] == "nvtx-trace" and sidecar["exit_code"] == 0
        assert sidecar["window"]["number"] == number
        assert f"window trace written to {folder / f'nv-w{number}.json'}" in done.stderr
    outside = [events for call, window, events in _seen(done) if call < 12]
    assert set(outside) == {0}
    assert sorted(p.name for p in folder.glob("*.json")) == [
        "nv-w1.json",
        "nv-w1.ncompass.json",
        "nv-w2.json",
        "nv-w2.ncompass.json",
        "nv-w3.json",
        "nv-w3.ncompass.json",
    ]


def test_ranges_straddling_the_edges(tmp_path: Path) -> None:
    # outer (calls 4-9) opens before a window of calls 6-7: not in it.
    _run(tmp_path, "--window", "step:6:2", "20")
    assert "outer" not in _names(tmp_path / "traces" / "nv-w1.json")

    # outer opens inside a window of calls 3-4 and is still open at its close: ends there.
    second = tmp_path / "second"
    second.mkdir()
    _run(second, "--window", "step:3:2", "20")
    ranges = _ranges(second / "traces" / "nv-w1.json")
    assert [r["name"] for r in ranges] == [
        "recording window 1",
        "step",
        "tag.3",
        "outer",
        "step",
        "tag.4",
    ]
    window_end = next(
        e["ts"]
        for e in json.loads((second / "traces" / "nv-w1.json").read_text())["traceEvents"]
        if e.get("ph") == "e" and e["name"] == "recording window 1"
    )
    outer = next(r for r in ranges if r["name"] == "outer")
    assert outer["ts"] + outer["dur"] == pytest.approx(window_end, abs=0.01)


def test_a_window_by_time_keeps_nothing_before_it_opens(tmp_path: Path) -> None:
    source = """
    import json, time
    from ncompass.capture.nvtx_windows import recorder_gate

    def step(n):
        return n

    def tag(n): ...
    def outer(first, last): ...

    gate = recorder_gate()
    seen = []
    deadline = time.monotonic() + 120
    n = 0
    while time.monotonic() < deadline:  # until the window has opened and closed again
        n += 1
        step(n)
        seen.append((n, gate.number, gate.events()))
        time.sleep(0.005)
        opened = any(window for _, window, _ in seen)
        if opened and not seen[-1][1]:
            break
    print(json.dumps(seen))
    """
    script, spec = _write(tmp_path, source=source)
    done = _cli(tmp_path, spec, script, "--delay", "0.5", "--duration", "0.5", "0")
    seen = _seen(done)
    first_open = next(index for index, (_, window, _) in enumerate(seen) if window)
    assert first_open > 0 and {events for _, _, events in seen[:first_open]} == {0}
    names = _names(tmp_path / "traces" / "nv-w1.json")
    assert names[0] == "recording window 1"
    steps_open = sum(1 for _, window, _ in seen if window)
    assert 1 <= names.count("step") <= steps_open + 1
    sidecar = json.loads((tmp_path / "traces" / "nv-w1.ncompass.json").read_text())
    assert sidecar["window"]["trigger"] == "time"


def test_the_recorder_keeps_only_ranges_that_start_in_the_open_window(tmp_path: Path) -> None:
    """The gate itself, on the NVTX calls of the ``nvtx`` package (push/pop and start/end)."""
    library = build_recorder(tmp_path / "cache")
    script = tmp_path / "child.py"
    script.write_text(
        textwrap.dedent(
            """
            import os
            import nvtx
            from ncompass.capture.nvtx_windows import RecorderGate

            domain = nvtx.get_domain("ncompass")
            gate = RecorderGate(os.environ["NVTX_INJECTION64_PATH"])
            for _ in range(1000):
                domain.push_range(message="outside")
                domain.pop_range()
            assert gate.events() == 0
            domain.push_range(message="open-before")
            early = domain.start_range(message="async-before")
            gate.open(1)
            domain.push_range(message="inside")
            domain.pop_range()
            domain.pop_range()               # open-before's pop: not kept
            domain.push_range(message="pushed-after-a-pop")
            late = domain.start_range(message="async-open-at-close")
            domain.end_range(early)          # started before the window: not kept
            gate.close()
            domain.pop_range()               # pushed-after-a-pop ends after the close
            domain.end_range(late)
            kept = gate.events()
            for _ in range(1000):
                domain.push_range(message="outside")
                domain.pop_range()
            assert gate.events() == kept, "nothing kept after the close"
            gate.open(2)
            domain.push_range(message="second")
            domain.pop_range()
            gate.close()
            """
        )
    )
    variables = environment(tmp_path / "out", library=library)
    done = subprocess.run(
        [sys.executable, str(script)],
        env={**os.environ, **variables, WINDOWS_VARIABLE: "1", "PYTHONPATH": str(REPOSITORY)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    (recording,) = read_recordings(tmp_path / "out")
    ends = {r.name: r.end_ns for r in recording.ranges}
    assert sorted(ends) == [
        "async-open-at-close",
        "inside",
        "pushed-after-a-pop",
        "second",
    ]
    assert ends["inside"] is not None and ends["second"] is not None
    assert ends["pushed-after-a-pop"] is None  # open at the close: its end is not kept
    assert ends["async-open-at-close"] is None
    assert recording.unmatched_pops == 0 and recording.unmatched_ends == 0


SERVER = """
import json, sys, time
from ncompass.capture.nvtx_windows import recorder_gate

def step(n):
    return n

def tag(n): ...
def outer(first, last): ...

gate = recorder_gate()
outside = []       # the recorder's events after each call made while no window was open
print("serving", file=sys.stderr, flush=True)
deadline = time.monotonic() + 240
n = 0
while time.monotonic() < deadline:  # serves until the test says stop
    n += 1
    step(n)
    closed, events = not gate.number, gate.events()
    if closed and not gate.number:  # closed before and after reading: no window in between
        outside.append(events)
    time.sleep(0.005)
    try:
        open(sys.argv[1]).close()
        break
    except OSError:
        pass
print(json.dumps({"calls": n, "outside": sorted(set(outside))}))
"""


def _wait_for_line(stream: Any, pattern: str, deadline_s: float = 120.0) -> str:
    import time

    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        line = str(stream.readline())
        if pattern in line:
            return line
    raise AssertionError(f"no line with {pattern!r}")


def test_on_demand_captures_each_write_a_window_when_the_run_ends(tmp_path: Path) -> None:
    script, spec = _write(tmp_path, source=SERVER)
    stop_file = tmp_path / "X"
    environment = {**os.environ, "PYTHONPATH": str(REPOSITORY)}
    run = ["run", "-c", str(spec), "-o", "traces", "--trace-name", "srv", "--profiler"]
    server = subprocess.Popen(
        [sys.executable, "-m", "ncompass", *run, "nvtx-trace", "--on-demand", str(script), "X"],
        cwd=tmp_path,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = _wait_for_line(server.stderr, "records on demand")
        pid = line.split("run ", 1)[1].split()[0]  # the re-executed run's pid
        _wait_for_line(server.stderr, "serving")
        for number in (1, 2):
            captured = subprocess.run(  # prints the path at once; written when the run ends
                [sys.executable, "-m", "ncompass", "capture", pid, "--duration", "0.3"],
                capture_output=True,
                text=True,
                env=environment,
                timeout=300,
            )
            assert captured.returncode == 0, captured.stderr
            assert captured.stdout.strip().endswith(f"srv-w{number}.json")
    finally:
        stop_file.touch()
        out, rest = server.communicate(timeout=300)
    assert server.returncode == 0, rest
    shown = json.loads(out.strip().splitlines()[-1])
    for number in (1, 2):
        trace = tmp_path / "traces" / f"srv-w{number}.json"
        assert 1 <= _names(trace).count("step") < shown["calls"]
        sidecar = json.loads(trace.with_name(f"srv-w{number}.ncompass.json").read_text())
        assert sidecar["window"]["trigger"] == "demand"
    # before, between and after the captures the recorder kept nothing new
    assert shown["outside"][0] == 0 and len(shown["outside"]) == 3


def test_ctrl_c_inside_a_window_still_writes_it(tmp_path: Path) -> None:
    source = """
    import os, signal, sys

    def tag(n):
        return n

    def step(n):
        tag(n)
        if n == 9:
            os.kill(os.getpid(), signal.SIGINT)
        return n

    def outer(first, last): ...

    for n in range(1, int(sys.argv[1]) + 1):
        step(n)
    """
    script, spec = _write(tmp_path, source=source)
    run = ["run", "-c", str(spec), "-o", "traces", "--trace-name", "nv", "--profiler"]
    window = ["--window", "step:8:5"]
    done = subprocess.run(
        [sys.executable, "-m", "ncompass", *run, "nvtx-trace", *window, str(script), "20"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPOSITORY)},
        timeout=300,
    )
    assert done.returncode == 130, done.stderr
    names = _names(tmp_path / "traces" / "nv-w1.json")
    assert [name for name in names if name.startswith("tag.")] == ["tag.8", "tag.9"]
    assert (tmp_path / "traces" / "nv-w1.ncompass.json").exists()


TREE_MAIN = """
import multiprocessing
import sys

import work


def child(calls):
    for n in range(1, calls + 1):
        work.step(n)


if __name__ == "__main__":
    context = multiprocessing.get_context("START_METHOD")
    calls = int(sys.argv[1])
    children = [context.Process(target=child, args=(calls,)) for _ in (1, 2)]
    for process in children:
        process.start()
    if PARENT_CALLS:
        child(calls)
    for process in children:
        process.join()
"""

TREE_WORK = """
def tag(n):
    return n


def step(n):
    tag(n)
    return n
"""


@pytest.mark.parametrize("parent_calls", [True, False], ids=["parent-too", "children-only"])
def test_every_followed_process_records_its_own_window(tmp_path: Path, parent_calls: bool) -> None:
    main = textwrap.dedent(TREE_MAIN).lstrip().replace("PARENT_CALLS", str(parent_calls))
    main = main.replace("START_METHOD", "spawn")
    (tmp_path / "main.py").write_text(main)
    (tmp_path / "work.py").write_text(textwrap.dedent(TREE_WORK).lstrip())
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        textwrap.dedent(
            """\
            version: 1
            targets:
              - module: work
                functions:
                  - qualname: step
                    name: step
                  - qualname: tag
                    name: "tag.{n}"
            """
        )
    )
    done = _cli(tmp_path, spec, tmp_path / "main.py", "--window", "step:4:3", "12")
    assert "never opened" not in done.stderr
    trace = json.loads((tmp_path / "traces" / "nv-w1.json").read_text())
    events = trace["traceEvents"]
    tags: dict[int, list[str]] = {}
    for event in sorted(events, key=lambda e: e.get("ts", 0)):
        if event.get("ph") in ("X", "b") and event["name"].startswith("tag."):
            tags.setdefault(event["pid"], []).append(event["name"])
    assert len(tags) == 2 + parent_calls, "each process that calls the step is its own track"
    assert all(names == ["tag.4", "tag.5", "tag.6"] for names in tags.values()), tags
    windows = [e for e in events if e.get("name") == "recording window 1" and e["ph"] in "Xb"]
    assert sorted(e["pid"] for e in windows) == sorted(tags)
    names = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
    assert sum("multiprocessing" in names.get(pid, "") for pid in tags) == 2, names


def test_forked_children_leave_their_recording_under_nvtx_trace(tmp_path: Path) -> None:
    """A ``fork`` child of ``multiprocessing`` leaves through ``os._exit``, which runs no exit
    handler, so the recorder never wrote its ranges; the follower now has it write them when
    the child's work returns (whole run, no window)."""
    main = textwrap.dedent(TREE_MAIN).lstrip().replace("PARENT_CALLS", "False")
    (tmp_path / "main.py").write_text(main.replace("START_METHOD", "fork"))
    (tmp_path / "work.py").write_text(textwrap.dedent(TREE_WORK).lstrip())
    spec = tmp_path / "spec.yaml"
    spec.write_text("version: 1\ntargets:\n  - module: work\n    functions:\n"
                    "      - qualname: step\n        name: step\n")  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "ncompass", "run", "-c", str(spec), "-o", "traces",
         "--trace-name", "nv", "--profiler", "nvtx-trace", str(tmp_path / "main.py"), "4"],
        capture_output=True, text=True, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPOSITORY)}, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    events = json.loads((tmp_path / "traces" / "nv.json").read_text())["traceEvents"]
    steps: dict[int, int] = {}
    for event in events:
        if event.get("name") == "step" and event.get("ph") in ("X", "b"):
            steps[event["pid"]] = steps.get(event["pid"], 0) + 1
    assert sorted(steps.values()) == [4, 4], steps  # each forked child, on its own track
