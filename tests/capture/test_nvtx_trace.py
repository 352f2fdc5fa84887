"""``ncompass run --profiler nvtx-trace``: real child processes with the real recorder attached."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from ncompass.capture.nvtx_markers import record_torch_markers_with_nvtx
from ncompass.capture.nvtx_recorder import find_compiler
from ncompass.capture.runner import RunOptions, run
from ncompass.errors import SpecError
from ncompass.spec.models import RewriteConfig
from tests.conftest import REPO
from tests.nsys.trace_checks import assert_viewer_nesting, load_trace, track_names

pytestmark = pytest.mark.skipif(
    find_compiler() is None, reason="no C compiler on PATH: the NVTX recorder cannot be built"
)

ATTN_MARKERS = {"attn.qkv_proj", "attn.out_proj", "attn.split_heads", "attn.core", "decode"}

# Emits NVTX ranges the way libraries do: two domains, nesting, a worker thread, a start/end
# range that another thread ends, a mark; prints the thread ids and exits with code 3.
PROGRAM = """
import json, sys, threading
import nvtx

main_tid = threading.get_native_id()
nvtx.push_range("outer", domain="app")
nvtx.push_range("inner", domain="app", color="green", payload=7)
nvtx.mark("tick", domain="app")
nvtx.pop_range(domain="app")
nvtx.pop_range(domain="app")
nvtx.push_range("x.first", domain="x")  # two domains interleave: the ranges overlap
nvtx.push_range("y.second", domain="y")
nvtx.pop_range(domain="x")
nvtx.pop_range(domain="y")
request = nvtx.start_range("request", domain="io")
worker = {}

def work():
    worker["tid"] = threading.get_native_id()
    for step in range(2):
        nvtx.push_range(f"worker.step{step}")
        nvtx.pop_range()
    nvtx.end_range(request)

thread = threading.Thread(target=work)
thread.start()
thread.join()
print(json.dumps({"main": main_tid, "worker": worker["tid"]}))
sys.exit(3)
"""


def _ncompass(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ncompass", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


def _events(path: Path) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = load_trace(path)["traceEvents"]
    return events


def test_every_nvtx_range_of_a_program_is_on_the_timeline(tmp_path: Path) -> None:
    script = tmp_path / "program.py"
    script.write_text(textwrap.dedent(PROGRAM))
    done = _ncompass(
        "run", "--profiler", "nvtx-trace", "-o", str(tmp_path), "--trace-name", "t", str(script)
    )
    assert done.returncode == 3, done.stderr  # the script's exit code
    tids = json.loads(done.stdout)
    assert "NVTX recorder: 7 ranges and 1 mark from 1 process" in done.stderr
    events = _events(tmp_path / "t.json")
    assert_viewer_nesting(events)
    ranges = {e["name"]: e for e in events if e.get("ph") == "X"}
    assert set(ranges) == {"outer", "inner", "x.first", "y.second", "worker.step0", "worker.step1"}
    assert ranges["x.first"]["tid"] == tids["main"]
    threads = track_names(events)
    assert threads[(ranges["y.second"]["pid"], ranges["y.second"]["tid"])].endswith(" · overlap 1")
    outer, inner = ranges["outer"], ranges["inner"]
    assert outer["tid"] == inner["tid"] == tids["main"]
    assert outer["ts"] <= inner["ts"] and inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"]
    assert outer["args"]["domain"] == inner["args"]["domain"] == "app"
    assert inner["args"]["payload"] == 7 and inner["args"]["color"] == "#008000"
    assert ranges["worker.step0"]["tid"] == tids["worker"]
    assert ranges["worker.step0"]["args"]["domain"] == "default"
    # the OS names (Python 3.11 does not name OS threads)
    assert threads[(outer["pid"], tids["main"])] and threads[(outer["pid"], tids["worker"])]
    begin = next(e for e in events if e.get("ph") == "b")
    end = next(e for e in events if e.get("ph") == "e")
    assert begin["name"] == "request" and begin["args"]["domain"] == "io"
    assert (begin["tid"], end["tid"]) == (tids["main"], tids["worker"])
    assert begin["id"] == end["id"] and begin["ts"] < end["ts"]
    mark = next(e for e in events if e.get("ph") == "i")
    assert mark["name"] == "tick" and inner["ts"] <= mark["ts"] <= inner["ts"] + inner["dur"]
    document = load_trace(tmp_path / "t.json")
    # wall-clock time, as in PyTorch profiler traces
    assert abs(document["baseTimeNanoseconds"] / 1e9 - (tmp_path / "t.json").stat().st_mtime) < 60
    sidecar = json.loads((tmp_path / "t.ncompass.json").read_text())
    assert sidecar["profiler"] == "nvtx-trace" and sidecar["exit_code"] == 3


def test_demo_markers_without_nsight(tmp_path: Path) -> None:
    done = _ncompass(
        "run",
        "--profiler",
        "nvtx-trace",
        "--config",
        "configs/attn.yaml",
        "--output-dir",
        str(tmp_path),
        "--trace-name",
        "demo",
        "examples/tiny_transformer.py",
        "--layers",
        "2",
        "--new-tokens",
        "2",
    )
    assert done.returncode == 0, done.stderr
    assert "generated 2 tokens" in done.stdout
    assert f"trace written to {tmp_path / 'demo.json'} (6 markers placed" in done.stderr
    events = _events(tmp_path / "demo.json")
    names = {e["name"] for e in events if e.get("cat") == "user_annotation"}
    assert names >= ATTN_MARKERS | {"attn.forward[0]", "attn.forward[1]"}
    assert {e["args"]["domain"] for e in events if e.get("ph") == "X"} == {"ncompass"}
    sidecar = json.loads((tmp_path / "demo.ncompass.json").read_text())
    assert sidecar["profiler"] == "nvtx-trace"
    assert {m["name"] for m in sidecar["markers"]} >= ATTN_MARKERS
    summary = _ncompass("summarize", str(tmp_path / "demo.json"))
    assert summary.returncode == 0 and "`attn.core` | 4 |" in summary.stdout


def test_spec_objects_and_the_library_api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "work.py").write_text("def step(n):\n    return n * 2\n\nprint(step(4))\n")
    spec = RewriteConfig(
        context="torch",  # recorded too: torch markers also emit NVTX under an NVTX profiler
        targets=[{"file": "work.py", "functions": [{"qualname": "step", "name": "work.step"}]}],
    )
    result = run(RunOptions(specs=[spec], script="work.py", profiler="nvtx-trace"))
    assert result.exit_code == 0
    assert result.trace_path is not None and result.trace_path.parent == tmp_path / "traces"
    assert [m["name"] for m in result.markers] == ["work.step"]
    steps = [e for e in _events(result.trace_path) if e.get("name") == "work.step"]
    assert len(steps) == 1 and steps[0]["cat"] == "user_annotation"


def test_torch_markers_also_emit_nvtx_under_an_nvtx_profiler() -> None:
    spec = RewriteConfig(
        context="torch",
        targets=[
            {
                "module": "app",
                "functions": [
                    {"qualname": "a"},
                    {"qualname": "b", "context": "ncompass.trace.profile.torch.TorchRecordContext"},
                    {"qualname": "c", "context": "noop"},
                    {"qualname": "d", "context": "nvtx"},
                ],
            }
        ],
    )
    assert record_torch_markers_with_nvtx(spec) == 2  # the default and marker b
    contexts = [marker.context for marker in spec.targets[0].functions]
    assert spec.context == "torch+nvtx"
    assert contexts == [None, "torch+nvtx", "noop", "nvtx"]


def test_errors_in_the_child_are_reported_once(tmp_path: Path) -> None:
    script = tmp_path / "app.py"
    script.write_text("def run():\n    pass\n")
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        f"version: 1\ntargets:\n  - file: {script}\n    functions:\n      - qualname: nope\n"
    )
    done = _ncompass(
        "run", "--profiler", "nvtx-trace", "-c", str(spec), "-o", str(tmp_path), str(script)
    )
    assert done.returncode == 2
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and f"{spec}:5: no function 'nope'" in errors[0]
    assert "Traceback" not in done.stderr
    assert not list(tmp_path.glob("*.json")), "no empty trace is left behind"
    with pytest.raises(SpecError, match="no function 'nope'"):
        run(
            RunOptions(specs=[spec], script=str(script), profiler="nvtx-trace", output_dir=tmp_path)
        )


def test_without_a_c_compiler_the_error_says_what_to_do(tmp_path: Path) -> None:
    script = tmp_path / "app.py"
    script.write_text("print('hi')\n")
    env = {**os.environ, "PATH": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    env.pop("CC", None)
    done = _ncompass("run", "--profiler", "nvtx-trace", "-o", str(tmp_path), str(script), env=env)
    assert done.returncode == 2
    assert "error: no C compiler found" in done.stderr and "--nsys" in done.stderr
    assert not list(tmp_path.glob("*.json"))


def test_gpu_monitor_samples_land_on_the_recorded_timeline(tmp_path: Path) -> None:
    script = tmp_path / "busy.py"
    script.write_text(
        "import time, nvtx\nnvtx.push_range('busy')\nend = time.time() + 1.0\n"
        "while time.time() < end:\n    pass\nnvtx.pop_range()\n"
    )
    done = _ncompass(
        "run",
        "--profiler",
        "nvtx-trace",
        "--gpu-monitor",
        "--gpu-backend",
        "cpu",
        "--gpu-interval",
        "0.1",
        "-o",
        str(tmp_path),
        "--trace-name",
        "busy",
        str(script),
    )
    assert done.returncode == 0, done.stderr
    events = _events(tmp_path / "busy.json")
    busy = next(e for e in events if e.get("name") == "busy")
    counters = [e["ts"] for e in events if e.get("ph") == "C"]
    inside = [ts for ts in counters if busy["ts"] <= ts <= busy["ts"] + busy["dur"]]
    assert len(inside) >= 5, "samples are on the recorder's clock, under the range they measured"


def test_targets_the_child_never_imported_are_reported(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "version: 1\ntargets:\n  - module: no_such_pkg.model\n    functions:\n      - qualname: f\n"
    )
    script = tmp_path / "main.py"
    script.write_text("print('ran')\n")
    result = run(RunOptions(specs=[spec], script=str(script), profiler="nvtx-trace"))
    assert [target.label for target in result.unplaced] == ["no_such_pkg.model"]
