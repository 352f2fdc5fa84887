"""Recording windows: ``ncompass run --window``, ``--delay/--duration``; real runs, real traces."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ncompass.capture.nvtx_recorder import find_compiler
from ncompass.capture.runner import RunOptions, run
from ncompass.capture.triggers import RecordingWindowOptions

REPOSITORY = Path(__file__).resolve().parents[2]

LOOP = """
import json, os, signal, sys, time
import torch
import torch.autograd.profiler as autograd_profiler

seen = []          # the calls of step during which a profiler was recording

def tag(n):
    return n

def step(n, x):
    seen.append((n, autograd_profiler._is_profiler_enabled))
    tag(n)
    if os.environ.get("INTERRUPT_AT") == str(n):
        os.kill(os.getpid(), signal.SIGINT)
    return x * 2 + 1

def between(x):
    return x - 1

def outer(x, first, last):
    for n in range(first, last + 1):
        x = between(step(n, x))
    return x

calls = int(sys.argv[1])
x = torch.ones(4)
n = 1
while n <= calls:
    if n == 4 and calls >= 6:
        x = outer(x, 4, 6)  # a marker that opens before the window (calls 4-6)
        n = 7
        continue
    x = between(step(n, x))
    n += 1
print(json.dumps({
    "recorded": [n for n, on in seen if on],
    "inductor": "torch._inductor" in sys.modules,
}))
"""


def _write(tmp_path: Path, calls_source: str = LOOP) -> tuple[Path, Path]:
    script = tmp_path / "loop.py"
    script.write_text(textwrap.dedent(calls_source).lstrip("\n"))
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
                  - qualname: between
                    name: between
                  - qualname: outer
                    name: outer
            """
        )
    )
    return script, spec


def _annotations(trace: Path) -> list[str]:
    events = json.loads(trace.read_text())["traceEvents"]
    ordered = sorted(
        (e for e in events if e.get("cat") == "user_annotation"), key=lambda e: e["ts"]
    )
    return [e["name"] for e in ordered]


def _run(
    tmp_path: Path, windows: RecordingWindowOptions, calls: int, capsys: pytest.CaptureFixture[str]
) -> tuple[list[Path], dict[str, object], str | None]:
    script, spec = _write(tmp_path)
    result = run(
        RunOptions(
            specs=[spec],
            script=str(script),
            args=[str(calls)],
            output_dir=tmp_path / "traces",
            trace_name="loop",
            recording_windows=windows,
        )
    )
    assert result.exit_code == 0
    assert result.trace_path is None
    shown = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    return result.window_traces, shown, result.window_warning


def test_window_holds_exactly_the_chosen_calls_and_what_they_call(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    traces, shown, warning = _run(tmp_path, RecordingWindowOptions("step", 8, 3), 20, capsys)
    assert warning is None
    assert [trace.name for trace in traces] == ["loop-w1.json"]
    names = _annotations(traces[0])
    assert names.count("step") == 3
    assert [name for name in names if name.startswith("tag.")] == ["tag.8", "tag.9", "tag.10"]
    # what runs between the calls is recorded; after the last call's end, nothing
    assert names == ["step", "tag.8", "between", "step", "tag.9", "between", "step", "tag.10"]
    assert shown["recorded"] == [8, 9, 10]  # the profiler was off for every other call
    sidecar = json.loads((traces[0].parent / "loop-w1.ncompass.json").read_text())
    assert sidecar["window"] == {
        "number": 1,
        "trigger": "marker",
        "marker": "step",
        "first_call": 8,
        "last_call": 10,
    }
    assert sidecar["exit_code"] == 0
    assert {marker["name"] for marker in sidecar["markers"]} >= {"step", "between", "tag.{n}"}
    assert not (tmp_path / "traces" / "loop.json").exists()


def test_a_marker_open_when_the_window_opens_is_not_in_the_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `outer` starts before call 5 and ends after call 6: only what starts inside is recorded
    traces, shown, _ = _run(tmp_path, RecordingWindowOptions("step", 5, 2), 10, capsys)
    names = _annotations(traces[0])
    assert "outer" not in names
    assert names == ["step", "tag.5", "between", "step", "tag.6"]
    assert shown["recorded"] == [5, 6]


def test_repeat_every_writes_one_trace_and_sidecar_per_window(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    windows = RecordingWindowOptions("step", 2, 2, repeat=3, every=5)
    traces, shown, _ = _run(tmp_path, windows, 20, capsys)
    assert [trace.name for trace in traces] == ["loop-w1.json", "loop-w2.json", "loop-w3.json"]
    tags = [[n for n in _annotations(trace) if n.startswith("tag.")] for trace in traces]
    assert tags == [["tag.2", "tag.3"], ["tag.7", "tag.8"], ["tag.12", "tag.13"]]
    assert shown["recorded"] == [2, 3, 7, 8, 12, 13]
    records = [
        json.loads((trace.parent / f"loop-w{i}.ncompass.json").read_text())["window"]
        for i, trace in enumerate(traces, 1)
    ]
    assert [(r["number"], r["first_call"], r["last_call"]) for r in records] == [
        (1, 2, 3),
        (2, 7, 8),
        (3, 12, 13),
    ]
    compared = subprocess.run(
        [sys.executable, "-m", "ncompass", "compare", str(traces[0]), "--", str(traces[2])],
        capture_output=True,
        text=True,
        env=_environment(),
        timeout=300,
    )
    assert compared.returncode == 0, compared.stderr
    assert "step" in compared.stdout


def test_windows_back_to_back_each_get_their_calls(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    windows = RecordingWindowOptions("step", 1, 2, repeat=2, every=2)
    traces, shown, _ = _run(tmp_path, windows, 3, capsys)
    tags = [[n for n in _annotations(trace) if n.startswith("tag.")] for trace in traces]
    assert tags == [["tag.1", "tag.2"], ["tag.3"]]  # the second window ends with the run
    assert shown["recorded"] == [1, 2, 3]


def test_a_window_that_never_opens_warns_with_the_number_of_calls(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    traces, shown, warning = _run(tmp_path, RecordingWindowOptions("step", 50, 5), 12, capsys)
    assert traces == []
    assert warning is not None and "never opened" in warning and "12 calls" in warning
    assert shown["recorded"] == []
    assert list((tmp_path / "traces").glob("*.json")) == []


def test_a_window_by_time_records_after_the_delay(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = """
    import json, time
    import torch
    import torch.autograd.profiler as autograd_profiler

    def step(n, x):
        return x + n

    def tag(n): ...
    def between(x): ...
    def outer(x): ...

    x = torch.ones(2)
    states = []
    deadline = time.monotonic() + 120
    n = 0
    while time.monotonic() < deadline:  # until the window has opened and closed again
        n += 1
        states.append(autograd_profiler._is_profiler_enabled)
        x = step(n, x)
        time.sleep(0.01)
        if True in states and not states[-1]:
            break
    print(json.dumps({"calls": n, "first_on": states.index(True) + 1}))
    """
    script, spec = _write(tmp_path, source)
    result = run(
        RunOptions(
            specs=[spec],
            script=str(script),
            output_dir=tmp_path / "traces",
            trace_name="timed",
            recording_windows=RecordingWindowOptions(delay=0.5, duration=0.5),
        )
    )
    shown = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result.exit_code == 0
    assert shown["first_on"] > 1  # nothing recorded during the delay
    (trace,) = result.window_traces
    assert 1 <= _annotations(trace).count("step") < shown["calls"]
    window = json.loads((trace.parent / "timed-w1.ncompass.json").read_text())["window"]
    assert window["trigger"] == "time" and window["delay_s"] == 0.5


def _environment() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPOSITORY)}


def _cli(tmp_path: Path, *arguments: str, **environment: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ncompass", "run", *arguments],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**_environment(), **environment},
        timeout=300,
    )


def test_ctrl_c_inside_a_window_still_writes_its_trace(tmp_path: Path) -> None:
    script, spec = _write(tmp_path)
    ran = _cli(
        tmp_path,
        *("-c", str(spec), "-o", "traces", "--trace-name", "loop", "--window", "step:8:5"),
        *(str(script), "20"),
        INTERRUPT_AT="9",
    )
    assert ran.returncode == 128 + signal.SIGINT or ran.returncode == 130, ran.stderr
    trace = tmp_path / "traces" / "loop-w1.json"
    assert [n for n in _annotations(trace) if n.startswith("tag.")] == ["tag.8", "tag.9"]
    assert (tmp_path / "traces" / "loop-w1.ncompass.json").exists()


def test_a_window_starts_the_profiler_without_importing_inductor(tmp_path: Path) -> None:
    script, spec = _write(tmp_path)
    ran = _cli(tmp_path, "-c", str(spec), "-o", "traces", "--window", "step:3:2", str(script), "8")
    assert ran.returncode == 0, ran.stderr
    shown = json.loads(ran.stdout.strip().splitlines()[-1])
    assert shown["recorded"] == [3, 4]
    assert shown["inductor"] is False  # torch.profiler.profile's start would have imported it


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--window", "nosuch:1:2"], "no marker named 'nosuch'"),
        (["--window", "step:3"], "MARKER:FIRST:COUNT"),
        (["--window", "step:x:2"], "MARKER:FIRST:COUNT"),
        (["--window", "step:1:0"], "COUNT must be at least 1"),
        (["--window", "step:0:2"], "FIRST counts calls from 1"),
        (["--window", "step:1:2", "--profiler", "none"], "--profiler none records nothing"),
        (["--window", "step:1:2", "--repeat", "2"], "--repeat needs --every"),
        (["--window", "step:1:5", "--repeat", "2", "--every", "3"], "windows would overlap"),
        (["--repeat", "2", "--every", "3"], "go with --window"),
        (["--window", "step:1:2", "--delay", "1"], "choose one way"),
    ],
)
def test_bad_window_options_are_one_line_and_run_nothing(
    tmp_path: Path, arguments: list[str], message: str
) -> None:
    script, spec = _write(tmp_path)
    ran = _cli(tmp_path, "-c", str(spec), "-o", "traces", *arguments, str(script), "20")
    assert ran.returncode == 2
    assert message in ran.stderr
    assert "Traceback" not in ran.stderr
    assert ran.stdout == ""  # the script never ran
    if "nosuch" in message:
        assert "its marker names: between, outer, step, tag.{n}" in ran.stderr
    assert (
        not list((tmp_path / "traces").glob("*.json")) if (tmp_path / "traces").exists() else True
    )


SERVER = """
import sys, time
import torch

def step(n, x):
    return x + n

def tag(n): ...
def between(x): ...
def outer(x): ...

x = torch.ones(2)
print("serving", file=sys.stderr, flush=True)
stop_file = sys.argv[1]
deadline = time.monotonic() + 240
n = 0
while time.monotonic() < deadline:  # serves until the test says stop
    n += 1
    x = step(n, x)
    time.sleep(0.005)
    try:
        open(stop_file).close()
        break
    except OSError:
        pass
"""


def _wait_for_line(stream: object, pattern: str, deadline_s: float = 120.0) -> str:
    import time

    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        line = stream.readline()  # type: ignore[attr-defined]
        if pattern in line:
            return str(line)
    raise AssertionError(f"no line with {pattern!r}")


def test_two_captures_on_demand_from_another_process(tmp_path: Path) -> None:
    script, spec = _write(tmp_path, SERVER)
    stop_file = tmp_path / "stop"
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ncompass",
            "run",
            "-c",
            str(spec),
            "-o",
            "traces",
            "--trace-name",
            "srv",
            "--on-demand",
            str(script),
            str(stop_file),
        ],
        cwd=tmp_path,
        env=_environment(),
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stderr is not None
        line = _wait_for_line(server.stderr, "records on demand")
        assert f"run {server.pid} records on demand" in line
        _wait_for_line(server.stderr, "serving")
        traces = []
        for duration in ("0.5", "0.3"):
            captured = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "ncompass",
                    "capture",
                    str(server.pid),
                    "--duration",
                    duration,
                ],
                capture_output=True,
                text=True,
                env=_environment(),
                timeout=300,
            )
            assert captured.returncode == 0, captured.stderr
            traces.append(Path(captured.stdout.strip()))
        # a capture without --duration records until Ctrl-C
        until_interrupted = subprocess.Popen(
            [sys.executable, "-m", "ncompass", "capture", str(server.pid)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_environment(),
        )
        assert until_interrupted.stderr is not None
        _wait_for_line(until_interrupted.stderr, "until Ctrl-C")
        until_interrupted.send_signal(signal.SIGINT)
        out, _ = until_interrupted.communicate(timeout=300)
        assert until_interrupted.returncode == 0
        traces.append(Path(out.strip()))
        assert [trace.name for trace in traces] == ["srv-w1.json", "srv-w2.json", "srv-w3.json"]
        for number, trace in enumerate(traces, 1):
            trace = tmp_path / trace if not trace.is_absolute() else trace
            assert _annotations(trace).count("step") >= 1
            sidecar = json.loads(trace.with_name(f"srv-w{number}.ncompass.json").read_text())
            assert sidecar["window"]["trigger"] == "demand"
            assert sidecar["window"]["number"] == number
    finally:
        stop_file.touch()
        _, rest = server.communicate(timeout=300)
    assert server.returncode == 0, rest


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to start a process as another user")
def test_a_capture_of_another_users_process_is_refused(tmp_path: Path) -> None:
    other = subprocess.Popen(["sleep", "60"], user=65534)
    try:
        refused = subprocess.run(
            [sys.executable, "-m", "ncompass", "capture", str(other.pid)],
            capture_output=True,
            text=True,
            env=_environment(),
            timeout=120,
        )
    finally:
        other.kill()
        other.wait()
    assert refused.returncode == 2
    assert "belongs to another user" in refused.stderr


def test_a_window_trace_names_its_rank_like_a_whole_run_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = f"""
    import torch
    import torch.distributed as dist

    def step(n, x):
        return x + n

    def tag(n): ...
    def between(x): ...
    def outer(x): ...

    dist.init_process_group(
        "gloo", init_method="file://{tmp_path / "rendezvous"}", rank=0, world_size=1
    )
    x = torch.ones(2)
    for n in range(1, 4):
        x = step(n, x)
    dist.destroy_process_group()
    print("{{}}")
    """
    script, spec = _write(tmp_path, source)
    result = run(
        RunOptions(
            specs=[spec],
            script=str(script),
            output_dir=tmp_path / "traces",
            trace_name="ranked",
            recording_windows=RecordingWindowOptions("step", 2, 1),
        )
    )
    assert result.exit_code == 0
    (trace,) = result.window_traces
    document = json.loads(trace.read_text())
    assert document["distributedInfo"]["rank"] == 0
    assert document["distributedInfo"]["world_size"] == 1


def test_gpu_monitor_samples_go_to_the_window_they_were_taken_in(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ncompass.capture.gpu_timeline import GpuMonitorOptions

    source = """
    import time
    import torch

    def step(n, x):
        time.sleep(0.1)
        return x + n

    def tag(n): ...
    def between(x): ...
    def outer(x): ...

    x = torch.ones(2)
    for n in range(1, 31):
        x = step(n, x)
    print("{}")
    """
    script, spec = _write(tmp_path, source)
    result = run(
        RunOptions(
            specs=[spec],
            script=str(script),
            output_dir=tmp_path / "traces",
            trace_name="sampled",
            gpu_monitor=GpuMonitorOptions(interval_s=0.05, backend="cpu"),
            recording_windows=RecordingWindowOptions("step", 11, 5),
        )
    )
    assert result.exit_code == 0
    (trace,) = result.window_traces
    events = json.loads(trace.read_text())["traceEvents"]
    steps = [e for e in events if e.get("name") == "step"]
    counters = [e for e in events if e.get("ph") == "C"]
    assert len(steps) == 5 and counters
    first, last = min(e["ts"] for e in steps), max(e["ts"] + e["dur"] for e in steps)
    margin_us = 1e6  # the window opens and closes around its calls
    assert all(first - margin_us <= e["ts"] <= last + margin_us for e in counters)
    # the run lasted three times the window: samples outside it are not in its trace
    assert max(e["ts"] for e in counters) - min(e["ts"] for e in counters) < 2.5e6


@pytest.mark.skipif(
    find_compiler() is None, reason="no C compiler on PATH: the NVTX recorder cannot be built"
)
def test_nvtx_trace_windows_are_written_from_the_recording(tmp_path: Path) -> None:
    script, spec = _write(tmp_path)
    ran = _cli(
        tmp_path,
        *("-c", str(spec), "-o", "traces", "--trace-name", "nv", "--profiler", "nvtx-trace"),
        *("--window", "step:8:2", "--repeat", "2", "--every", "5", str(script), "20"),
    )
    assert ran.returncode == 0, ran.stderr
    folder = tmp_path / "traces"
    for number, tags in ((1, ["tag.8", "tag.9"]), (2, ["tag.13", "tag.14"])):
        names = _annotations_any(folder / f"nv-w{number}.json")
        assert names[0] == f"recording window {number}"
        assert [n for n in names if n.startswith("tag.")] == tags
        assert names.count("step") == 2
        sidecar = json.loads((folder / f"nv-w{number}.ncompass.json").read_text())
        assert sidecar["window"]["first_call"] == 8 + 5 * (number - 1)
    assert not (folder / "nv.json").exists()  # only the windows were recorded, as under torch
    assert not (folder / "nv.ncompass.json").exists()


def _annotations_any(trace: Path) -> list[str]:
    """Range names of a trace in start order, whatever the profiler wrote them as."""
    events = json.loads(trace.read_text())["traceEvents"]
    ranges = [e for e in events if e.get("ph") in ("X", "b") and e.get("cat") != "Trace"]
    return [e["name"] for e in sorted(ranges, key=lambda e: (e["ts"], -e.get("dur", 0)))]


def test_a_window_that_cannot_open_warns_and_the_program_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = """
    import torch
    from torch.autograd.profiler import profile

    def step(n, x):
        return x + n

    def tag(n): ...
    def between(x): ...
    def outer(x): ...

    x = torch.ones(2)
    with profile(use_kineto=True):  # the program's own profiler: ncompass cannot start one
        for n in range(1, 6):
            x = step(n, x)
    print("finished")
    """
    script, spec = _write(tmp_path, source)
    result = run(
        RunOptions(
            specs=[spec],
            script=str(script),
            output_dir=tmp_path / "traces",
            trace_name="clash",
            recording_windows=RecordingWindowOptions("step", 3, 2),
        )
    )
    captured = capsys.readouterr()
    assert result.exit_code == 0
    assert "finished" in captured.out
    assert "recording windows stopped: a torch profiler is already recording" in captured.err
    assert result.window_traces == []
