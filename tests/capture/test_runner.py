"""``ncompass run`` semantics: a faithful ``__main__``, exit codes, traces always written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ncompass.capture.runner import RunOptions, run
from ncompass.errors import SpecError
from ncompass.importer.hook import active_config
from ncompass.importer.script import ScriptNotFoundError

SCRIPT = """
import json, os, sys

def work(n):
    total = 0
    for i in range(n):
        total += i
    return total

print(json.dumps({
    "argv": sys.argv,
    "path0": sys.path[0],
    "name": __name__,
    "file": __file__,
    "mp_main": sys.modules["__mp_main__"] is sys.modules["__main__"],
    "profile_env": os.environ.get("NCOMPASS_PROFILE"),
    "work": work(5),
}))
if __name__ == "__main__":
    code = sys.argv[1] if len(sys.argv) > 1 else "0"
    if code == "raise":
        raise RuntimeError("boom from the script")
    if code == "message":
        sys.exit("stopping with a message")
    sys.exit(int(code))
"""


def _script(tmp_path: Path, text: str = SCRIPT) -> Path:
    folder = tmp_path / "app"
    folder.mkdir(exist_ok=True)
    path = folder / "main_script.py"
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def _spec(tmp_path: Path, script: Path) -> Path:
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        f"version: 1\ntargets:\n  - file: {script}\n    functions:\n      - qualname: work\n        name: script.work\n"
    )
    return spec


def test_script_runs_as_a_faithful_main(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    script = _script(tmp_path)
    monkeypatch.chdir(tmp_path)
    relative = os.path.join("app", script.name)  # as typed: `ncompass run app/main_script.py`
    result = run(
        RunOptions(script=relative, args=["0", "--flag"], profiler="none", output_dir=tmp_path)
    )
    assert result.exit_code == 0
    shown = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert shown["argv"] == [relative, "0", "--flag"]
    assert shown["file"] == str(script)  # absolute, as Python sets it
    assert shown["path0"] == str(script.parent.resolve())
    assert shown["name"] == "__main__" and shown["mp_main"]
    assert shown["profile_env"] == "1"
    assert shown["work"] == 10
    assert sys.argv[0] != str(script)  # restored afterwards
    assert active_config() is None  # rewrites disabled afterwards


@pytest.mark.parametrize(("argument", "code"), [("0", 0), ("3", 3), ("message", 1), ("raise", 1)])
def test_exit_codes_pass_through(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argument: str, code: int
) -> None:
    result = run(RunOptions(script=str(_script(tmp_path)), args=[argument], profiler="none"))
    assert result.exit_code == code
    err = capsys.readouterr().err
    if argument == "message":
        assert "stopping with a message" in err
    if argument == "raise":
        assert "RuntimeError: boom from the script" in err
        assert f'File "{tmp_path / "app" / "main_script.py"}", line 21' in err
        assert "ncompass" not in err.split("Traceback")[1].split("RuntimeError")[0]


def test_torch_trace_is_written_even_when_the_script_raises(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = _script(tmp_path)
    result = run(
        RunOptions(
            specs=[_spec(tmp_path, script)],
            script=str(script),
            args=["raise"],
            output_dir=tmp_path / "traces",
            trace_name="crash",
        )
    )
    assert result.exit_code == 1
    assert result.trace_path == tmp_path / "traces" / "crash.json"
    events = json.loads(result.trace_path.read_text())["traceEvents"]
    names = {e["name"] for e in events if e.get("cat") == "user_annotation"}
    assert "script.work" in names
    sidecar = json.loads((tmp_path / "traces" / "crash.ncompass.json").read_text())
    assert sidecar["exit_code"] == 1
    assert [m["name"] for m in sidecar["markers"]] == ["script.work"]
    assert sidecar["markers"][0]["qualname"] == "work"


def test_default_trace_names_never_overwrite(tmp_path: Path) -> None:
    script = _script(tmp_path)
    first = run(RunOptions(script=str(script), output_dir=tmp_path / "t"))
    second = run(RunOptions(script=str(script), output_dir=tmp_path / "t"))
    assert first.trace_path is not None and second.trace_path is not None
    assert first.trace_path != second.trace_path
    assert first.trace_path.exists() and second.trace_path.exists()


def test_module_mode(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "tool_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "__main__.py").write_text(
        "import sys\nprint('args', sys.argv[1:], __name__)\nsys.exit(4)\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    result = run(RunOptions(module="tool_pkg", args=["x"], profiler="none"))
    assert result.exit_code == 4
    assert "args ['x'] __main__" in capsys.readouterr().out


def test_missing_script_and_bad_spec_are_user_errors(tmp_path: Path) -> None:
    with pytest.raises(ScriptNotFoundError, match="no such script"):
        run(RunOptions(script=str(tmp_path / "absent.py"), profiler="none"))
    script = _script(tmp_path)
    spec = tmp_path / "bad.yaml"
    spec.write_text(
        f"version: 1\ntargets:\n  - file: {script}\n    functions:\n      - qualname: wrk\n"
    )
    with pytest.raises(SpecError, match=r"bad.yaml:5: no function 'wrk'.*closest functions: work"):
        run(
            RunOptions(specs=[spec], script=str(script), profiler="none", output_dir=tmp_path / "t")
        )
    assert not list((tmp_path / "t").glob("*.json")) if (tmp_path / "t").exists() else True
    assert os.environ.get("NCOMPASS_PROFILE") is None


def test_gpu_monitor_samples_become_counter_tracks(tmp_path: Path) -> None:
    from ncompass.capture.gpu_timeline import GpuMonitorOptions

    script = _script(tmp_path, "import time\nsum(i * i for i in range(300_000))\ntime.sleep(0.2)\n")
    result = run(
        RunOptions(
            script=str(script),
            output_dir=tmp_path / "traces",
            trace_name="monitored",
            gpu_monitor=GpuMonitorOptions(device=0, interval_s=0.02, backend="cpu"),
        )
    )
    assert result.gpu is not None and result.gpu.summaries
    assert result.gpu.counter_events > 5
    events = json.loads((tmp_path / "traces" / "monitored.json").read_text())["traceEvents"]
    counters = [e for e in events if e.get("ph") == "C"]
    assert len(counters) >= result.gpu.counter_events - 1  # (plus maybe a process name)
    spans = [e for e in events if e.get("ph") == "X" and "dur" in e]
    first, last = min(e["ts"] for e in spans), max(e["ts"] + e["dur"] for e in spans)
    inside = [c for c in counters if first - 50_000 <= c["ts"] <= last + 50_000]
    assert len(inside) >= len(counters) // 2  # on the profiler's clock, not somewhere else
    sidecar = json.loads((tmp_path / "traces" / "monitored.ncompass.json").read_text())
    assert sidecar["gpu"]["counter_events"] == result.gpu.counter_events


def test_markers_also_go_to_an_attached_nvtx_tool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = _script(tmp_path)
    monkeypatch.setenv("NVTX_INJECTION64_PATH", "/nonexistent/libinjection.so")  # as nsys sets it
    result = run(RunOptions(specs=[_spec(tmp_path, script)], script=str(script), profiler="none"))
    assert result.config.context == "torch+nvtx"
    monkeypatch.delenv("NVTX_INJECTION64_PATH")
    result = run(RunOptions(specs=[_spec(tmp_path, script)], script=str(script), profiler="none"))
    assert result.config.context == "torch"


def _ncompass(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The real command line in a fresh process (``ncompass`` is a console script: its
    ``sys.path[0]`` is the venv's bin folder, never the user's folder)."""
    command = [str(Path(sys.executable).with_name("ncompass")), *args]
    env = {**os.environ, "PYTHONPATH": ""}
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=300, env=env)


SPAWNING = """
import multiprocessing as mp
import sys

def work(n):
    total = 0
    for i in range(n):
        total += i
    return total

if __name__ == "__main__":
    print("builtins:", type(__builtins__).__name__)
    print("parent:", work(4))
    with mp.get_context(sys.argv[1]).Pool(2) as pool:
        print("children:", pool.map(work, [3, 4, 5]))
    raise SystemExit(5)
"""


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_spawned_workers_of_a_rewritten_script(tmp_path: Path, method: str) -> None:
    script = _script(tmp_path, SPAWNING)
    done = _ncompass(
        "run",
        "--config",
        str(_spec(tmp_path, script)),
        "--output-dir",
        str(tmp_path / "traces"),
        "--trace-name",
        "spawned",
        str(script),
        method,
        cwd=tmp_path,
    )
    # the workers re-import the script as __mp_main__ (without rewrites) and find `work` there
    assert done.returncode == 5, done.stderr
    assert "builtins: module" in done.stdout
    assert "parent: 6" in done.stdout and "children: [3, 6, 10]" in done.stdout
    events = json.loads((tmp_path / "traces" / "spawned.json").read_text())["traceEvents"]
    assert [e["name"] for e in events if e.get("cat") == "user_annotation"] == ["script.work"]


def test_module_mode_finds_modules_in_the_current_folder(tmp_path: Path) -> None:
    package = tmp_path / "tool"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "cli.py").write_text(
        textwrap.dedent(
            """
            import sys

            def work(n):
                return n * 2

            if __name__ == "__main__":
                print(sys.argv[1:], sys.path[0], work(2))
                print("rewritten:", any(name.startswith("_ncompass") for name in globals()))
                raise ValueError("bad input")
            """
        ).lstrip("\n")
    )
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "version: 1\ntargets:\n  - module: tool.cli\n    functions:\n      - qualname: work\n"
    )
    done = _ncompass(
        "run", "--profiler", "none", "--config", str(spec), "-m", "tool.cli", "x", cwd=tmp_path
    )
    assert done.returncode == 1, done.stderr
    assert f"['x'] {tmp_path} 4" in done.stdout
    assert "rewritten: True" in done.stdout
    assert f'File "{package / "cli.py"}", line 9, in <module>' in done.stderr
    assert "ValueError: bad input" in done.stderr
    missing = _ncompass("run", "-o", str(tmp_path / "t"), "-m", "tool.absent", cwd=tmp_path)
    assert missing.returncode == 2
    assert "no module named 'tool.absent'; run from the folder" in missing.stderr
    assert not list((tmp_path / "t").glob("*.json"))  # no empty trace left behind


def test_a_missing_script_starts_no_profiler(tmp_path: Path) -> None:
    with pytest.raises(ScriptNotFoundError, match="no such script"):
        run(RunOptions(script=str(tmp_path / "absent.py"), output_dir=tmp_path / "t"))
    assert not (tmp_path / "t").exists()


FAITHFUL_LIB = """
class Gate:
    def gate(self, x):
        if x > 2:
            raise ValueError(f"bad {x}")
        return x > 0

    def run(self, x):
        total = 0
        while self.gate(x) and total < 10:
            total += 1
            x += 1
        return total
"""

FAITHFUL_MAIN = """
import faithful_lib

def go():
    return faithful_lib.Gate().run(1)

try:
    go()
except ValueError as error:
    raise RuntimeError("wrapped") from error
"""

FAITHFUL_SPEC = """
version: 1
targets:
  - module: faithful_lib
    functions:
      - qualname: Gate.gate
    calls:
      - in: Gate.run
        call: self.gate
  - file: main.py
    functions:
      - qualname: go
"""


@pytest.mark.parametrize(
    ("main", "lib"),
    [
        (FAITHFUL_MAIN, FAITHFUL_LIB),  # chained, through function and header call markers
        ("x = 1\ndef f(:\n    pass\n", FAITHFUL_LIB),  # the script does not compile
        ("def go():\n    pass\n\nimport faithful_lib\n", "def f(:\n    pass\n"),  # a target
    ],
    ids=["chained", "script-syntax", "target-syntax"],
)
def test_errors_print_exactly_as_python_prints_them(tmp_path: Path, main: str, lib: str) -> None:
    (tmp_path / "faithful_lib.py").write_text(lib.lstrip("\n"))
    (tmp_path / "main.py").write_text(main.lstrip("\n"))
    (tmp_path / "spec.yaml").write_text(FAITHFUL_SPEC)
    env = {**os.environ, "PYTHONPATH": ""}
    plain = subprocess.run(
        [sys.executable, "main.py"], cwd=tmp_path, capture_output=True, text=True, env=env
    )
    marked = _ncompass("run", "--profiler", "none", "-c", "spec.yaml", "main.py", cwd=tmp_path)
    assert marked.returncode == plain.returncode == 1
    assert marked.stderr == plain.stderr


def test_targets_the_run_never_imported_are_reported(tmp_path: Path) -> None:
    script = _script(tmp_path)
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        f"version: 1\ntargets:\n  - module: no_such_pkg.model\n    functions:\n"
        f"      - qualname: f\n  - file: {script}\n    functions:\n      - qualname: work\n"
    )
    result = run(RunOptions(specs=[spec], script=str(script), profiler="none"))
    assert [target.label for target in result.unplaced] == ["no_such_pkg.model"]
    done = _ncompass("run", "--profiler", "none", "-c", str(spec), str(script), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (
        f"ncompass: warning: the run never imported target no_such_pkg.model ({spec}:3)"
        in done.stderr
    )


def test_a_whole_run_torch_profiler_starts_without_importing_inductor(tmp_path: Path) -> None:
    """``torch.profiler.profile``'s start imports Inductor, Dynamo and sympy (about 170 MB and a
    second or more) in every run, compiling or not; ncompass starts Kineto without it, and the
    trace still carries what that start adds (here: the shapes option)."""
    script = _script(
        tmp_path,
        """
        import json, sys
        import torch
        x = torch.ones(4, 4) @ torch.ones(4, 4)
        print(json.dumps({"inductor": "torch._inductor" in sys.modules}))
        """,
    )
    command = [
        sys.executable, "-m", "ncompass", "run", "--profiler", "torch", "--record-shapes",
        "-o", str(tmp_path / "traces"), "--trace-name", "light", str(script),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == {"inductor": False}
    trace = json.loads((tmp_path / "traces" / "light.json").read_text())
    assert trace.get("record_shapes") == 1
    shapes = [e["args"] for e in trace["traceEvents"] if e.get("name") == "aten::mm"]
    assert shapes and "Input Dims" in shapes[0]
