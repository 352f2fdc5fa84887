"""``ncompass run`` follows the Python processes a script starts: real children, real traces.

Each run here starts real processes (spawn, forkserver, fork, a process pool, a subprocess) and
checks the merged trace, the per-process traces, the sidecar and the CLI's warnings.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytestmark = pytest.mark.slow  # every test starts real processes that import torch

REPO = Path(__file__).resolve().parents[2]

WORK = """
def step(i):
    return sum(range(100 + i))


def hold(go, done):
    go.set()
    done.wait(60)


def moment():
    return 1
"""

SPEC = """
version: 1
targets:
  - module: work
    functions:
      - qualname: step
        name: work.step
      - qualname: hold
        name: work.hold
      - qualname: moment
        name: work.moment
"""

EVERY_KIND = """
import concurrent.futures
import multiprocessing
import subprocess
import sys

from ncompass import capture_trace

import work


def child(n):
    for i in range(n):
        work.step(i)


@capture_trace(trace_name="child-window")
def measured():
    work.moment()


def windowed():
    work.step(0)
    measured()


def at_the_same_moment(go, done):
    go.wait(60)
    work.moment()
    done.set()


if __name__ == "__main__":
    work.step(0)
    for n, method in ((2, "spawn"), (3, "forkserver"), (4, "fork")):
        process = multiprocessing.get_context(method).Process(
            target=child, args=(n,), name=f"{method} child"
        )
        process.start()
        process.join()
    spawn = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=spawn) as pool:
        list(pool.map(child, [5]))
    subprocess.run(
        [sys.executable, "-c", "import work\\nfor i in range(6): work.step(i)"], check=True
    )
    go, done = spawn.Event(), spawn.Event()
    clock = spawn.Process(target=at_the_same_moment, args=(go, done), name="clock child")
    clock.start()
    work.hold(go, done)
    clock.join()
    window = spawn.Process(target=windowed, name="windowed child")
    window.start()
    window.join()
"""


def _project(tmp_path: Path, main: str) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "work.py").write_text(textwrap.dedent(WORK).lstrip())
    (folder / "spec.yaml").write_text(textwrap.dedent(SPEC).lstrip())
    (folder / "main.py").write_text(textwrap.dedent(main).lstrip())
    return folder


def _ncompass_run(
    folder: Path, *args: str, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(folder), str(REPO)])
    return subprocess.run(
        [sys.executable, "-m", "ncompass", "run", "-c", "spec.yaml", "-o", "out", *args],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _trace(path: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(path.read_text())
    return document


def _markers_by_pid(trace: dict[str, Any], name: str) -> Counter[int]:
    return Counter(
        event["pid"]
        for event in trace["traceEvents"]
        if event.get("cat") == "user_annotation" and event.get("name") == name
    )


def _warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("ncompass: warning")]


@pytest.fixture(scope="module")
def every_kind(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    folder = _project(tmp_path_factory.mktemp("follow"), EVERY_KIND)
    result = _ncompass_run(folder, "--trace-name", "run", "main.py")
    assert result.returncode == 0, result.stderr
    return folder, result


def test_every_child_kind_has_its_markers_on_its_own_track(every_kind: tuple[Path, Any]) -> None:
    folder, _ = every_kind
    trace = _trace(folder / "out" / "run.json")
    processes = trace["ncompass_processes"]
    by_role = {process["role"]: process for process in processes}
    steps = _markers_by_pid(trace, "work.step")
    assert processes[0]["pid"] not in {p["pid"] for p in processes[1:]}
    assert steps[processes[0]["pid"]] == 1  # the run's own process, first
    assert steps[by_role["spawn child"]["pid"]] == 2
    assert steps[by_role["forkserver child"]["pid"]] == 3
    assert steps[by_role["fork child"]["pid"]] == 4  # the parent's call is not recorded twice
    (pool_worker,) = [p for p in processes if p["role"].startswith("SpawnProcess-")]
    assert steps[pool_worker["pid"]] == 5
    subprocess_child = next(p for p in processes if p["command"].endswith("work.step(i)"))
    assert steps[subprocess_child["pid"]] == 6
    assert steps[by_role["windowed child"]["pid"]] == 1
    names = {
        event["pid"]: event["args"]["name"]
        for event in trace["traceEvents"]
        if event.get("ph") == "M" and event.get("name") == "process_name"
    }
    for process in processes:
        if process["trace_file"]:
            assert names[process["pid"]] == process["role"]


def test_each_process_keeps_its_own_trace_beside_the_run(every_kind: tuple[Path, Any]) -> None:
    folder, _ = every_kind
    trace = _trace(folder / "out" / "run.json")
    written = [p for p in trace["ncompass_processes"] if p["trace_file"]]
    assert len(written) == 8
    for process in written:
        own = _trace(folder / process["trace_file"])
        assert Path(process["trace_file"]).parent.name == "run.processes"
        identity = own["ncompass_process"]
        assert identity["pid"] == process["pid"]
        assert identity["ppid"] == process["ppid"]
        assert set(identity) == {"pid", "ppid", "rank", "role", "command"}
    sidecar = json.loads((folder / "out" / "run.ncompass.json").read_text())
    assert [p["pid"] for p in sidecar["processes"]] == [
        p["pid"] for p in trace["ncompass_processes"]
    ]
    assert all(p["exit_code"] == 0 for p in sidecar["processes"])
    assert {p["ppid"] for p in sidecar["processes"][1:]} >= {sidecar["processes"][0]["pid"]}


def test_parent_and_child_share_one_clock(every_kind: tuple[Path, Any]) -> None:
    folder, _ = every_kind
    trace = _trace(folder / "out" / "run.json")
    (clock,) = [p for p in trace["ncompass_processes"] if p["role"] == "clock child"]
    (hold,) = [e for e in trace["traceEvents"] if e.get("name") == "work.hold"]
    (moment,) = [
        e
        for e in trace["traceEvents"]
        if e.get("name") == "work.moment" and e["pid"] == clock["pid"]
    ]
    assert hold["pid"] != moment["pid"]
    # the child marks its moment while the parent holds: inside the parent's span on one clock
    assert hold["ts"] <= moment["ts"] <= hold["ts"] + hold["dur"]


def test_summarize_counts_the_childrens_markers(every_kind: tuple[Path, Any]) -> None:
    folder, result = every_kind
    assert _warnings(result.stderr) == []
    summary = subprocess.run(
        [sys.executable, "-m", "ncompass", "summarize", "out/run.json"],
        cwd=folder,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert summary.returncode == 0, summary.stderr
    row = next(line for line in summary.stdout.splitlines() if "`work.step`" in line)
    assert row.split("|")[2].strip() == str(1 + 2 + 3 + 4 + 5 + 6 + 1)


def test_capture_trace_in_a_child_cuts_its_window_from_the_childs_trace(
    every_kind: tuple[Path, Any],
) -> None:
    folder, _ = every_kind
    run = _trace(folder / "out" / "run.json")
    (child,) = [p for p in run["ncompass_processes"] if p["role"] == "windowed child"]
    window = _trace(folder / "out" / "child-window.json")
    names = [e["name"] for e in window["traceEvents"] if e.get("cat") == "user_annotation"]
    assert sorted(names) == ["child-window", "work.moment"]
    assert {e["pid"] for e in window["traceEvents"] if e.get("name") == "work.moment"} == {
        child["pid"]
    }


def test_no_follow_profiles_only_the_run_process(tmp_path: Path) -> None:
    main = """
    import multiprocessing
    import work

    if __name__ == "__main__":
        work.step(0)
        process = multiprocessing.get_context("spawn").Process(target=work.step, args=(1,))
        process.start()
        process.join()
    """
    folder = _project(tmp_path, main)
    result = _ncompass_run(folder, "--no-follow", "--trace-name", "run", "main.py")
    assert result.returncode == 0, result.stderr
    trace = _trace(folder / "out" / "run.json")
    assert "ncompass_processes" not in trace
    assert sum(_markers_by_pid(trace, "work.step").values()) == 1
    assert not (folder / "out" / "run.processes").exists()


FAULTS = """
import multiprocessing
import os
import signal
import subprocess
import sys
import time

import work


def killed(ready):
    work.step(0)
    ready.set()
    time.sleep(600)


def exits_hard():
    work.step(1)
    os._exit(3)


def crashes():
    work.step(2)
    raise RuntimeError("the child crashes")


if __name__ == "__main__":
    work.step(0)
    spawn = multiprocessing.get_context("spawn")
    ready = spawn.Event()
    process = spawn.Process(target=killed, args=(ready,), name="killed child")
    process.start()
    ready.wait(300)
    os.kill(process.pid, signal.SIGKILL)
    process.join()
    for target, name in ((exits_hard, "exiting child"), (crashes, "crashing child")):
        process = spawn.Process(target=target, name=name)
        process.start()
        process.join()
    # a Python child that cannot import ncompass runs untouched
    site, broken = os.environ["PYTHONPATH"].split(os.pathsep)[0], sys.argv[1]
    untouched = subprocess.run(
        [sys.executable, "-c", "import os; print('untouched', os.getpid())"],
        env={**os.environ, "PYTHONPATH": site + os.pathsep + broken},
        capture_output=True,
        text=True,
    )
    sys.stderr.write(untouched.stderr)
    print(untouched.stdout.strip())
    # a child still running when the script ends
    marked = os.path.abspath("running.marked")
    subprocess.Popen(
        [sys.executable, "-c",
         f"import time, work; work.step(3); open({marked!r}, 'w').close(); time.sleep(30)"]
    )
    while not os.path.exists(marked):
        time.sleep(0.05)
    sys.exit(5)
"""


def test_faults_lose_nothing_recorded(tmp_path: Path) -> None:
    folder = _project(tmp_path, FAULTS)
    broken = tmp_path / "elsewhere" / "ncompass"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("raise ImportError('another environment')\n")
    result = _ncompass_run(folder, "--trace-name", "run", "main.py", str(broken.parent))
    assert result.returncode == 5, result.stderr
    trace = _trace(folder / "out" / "run.json")
    by_role = {p["role"]: p for p in trace["ncompass_processes"]}
    steps = _markers_by_pid(trace, "work.step")
    assert steps[trace["ncompass_processes"][0]["pid"]] == 1
    assert steps[by_role["crashing child"]["pid"]] == 1  # it crashed, its trace is merged
    assert by_role["crashing child"]["exit_code"] == 1
    assert by_role["killed child"]["exit_code"] == -9
    assert by_role["exiting child"]["exit_code"] == 3
    running = next(p for p in trace["ncompass_processes"] if "time.sleep(30)" in p["command"])
    warnings = _warnings(result.stderr)
    untouched_pid = next(
        line.split()[1] for line in result.stdout.splitlines() if line.startswith("untouched")
    )
    assert len(warnings) == 3, result.stderr
    assert any(
        f"process {untouched_pid} (" in w and "cannot import ncompass" in w for w in warnings
    )
    killed = by_role["killed child"]["pid"]
    assert any(f"process {killed} (killed child)" in w and "SIGKILL" in w for w in warnings)
    assert any(f"process {running['pid']} " in w and "still running" in w for w in warnings)
    assert by_role["killed child"]["trace_file"] is None
    assert steps[killed] == 0
    # os._exit writes the trace first: the exiting child's is merged, and nothing is said
    exiting = by_role["exiting child"]["pid"]
    assert by_role["exiting child"]["trace_file"] is not None
    assert steps[exiting] == 1
    assert not any(f"process {exiting} " in w for w in warnings)


TRAIN = """
import torch
import torch.distributed as dist

import model

dist.init_process_group("gloo")
net = torch.nn.parallel.DistributedDataParallel(model.Tiny())
optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
for _ in range(5):
    optimizer.zero_grad()
    net(torch.randn(4, 8)).sum().backward()
    optimizer.step()
dist.destroy_process_group()
"""

MODEL = """
import torch


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)

    def forward(self, x):
        return self.linear(x)
"""

MODEL_SPEC = """
version: 1
targets:
  - module: model
    functions:
      - qualname: Tiny.forward
        name: model.forward
"""


def test_torchrun_ranks_each_have_their_markers(tmp_path: Path) -> None:
    folder = _project(tmp_path, TRAIN)
    (folder / "model.py").write_text(textwrap.dedent(MODEL).lstrip())
    (folder / "spec.yaml").write_text(textwrap.dedent(MODEL_SPEC).lstrip())
    result = _ncompass_run(
        folder,
        "--trace-name",
        "run",
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        "2",
        "main.py",
    )
    assert result.returncode == 0, result.stderr
    assert "never imported" not in result.stderr
    trace = _trace(folder / "out" / "run.json")
    by_role = {p["role"]: p for p in trace["ncompass_processes"]}
    forwards = _markers_by_pid(trace, "model.forward")
    assert by_role["rank 0"]["rank"] == 0 and by_role["rank 1"]["rank"] == 1
    assert forwards[by_role["rank 0"]["pid"]] == 5
    assert forwards[by_role["rank 1"]["pid"]] == 5


LOADER = """
import sys

from torch.utils.data import DataLoader

import data

if __name__ == "__main__":
    for method in ("spawn", "fork"):
        loader = DataLoader(
            data.Squares(8), batch_size=2, num_workers=2, multiprocessing_context=method
        )
        assert sum(len(batch) for batch in loader) == 8
"""

DATA = """
import torch


class Squares(torch.utils.data.Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        return torch.tensor(index * index)
"""

DATA_SPEC = """
version: 1
targets:
  - module: data
    functions:
      - qualname: Squares.__getitem__
        name: data.getitem
"""


def test_dataloader_workers_have_their_markers_under_spawn_and_fork(tmp_path: Path) -> None:
    folder = _project(tmp_path, LOADER)
    (folder / "data.py").write_text(textwrap.dedent(DATA).lstrip())
    (folder / "spec.yaml").write_text(textwrap.dedent(DATA_SPEC).lstrip())
    result = _ncompass_run(folder, "--trace-name", "run", "main.py")
    assert result.returncode == 0, result.stderr
    trace = _trace(folder / "out" / "run.json")
    workers = [p for p in trace["ncompass_processes"] if p["role"].startswith("DataLoader")]
    assert sorted(p["role"] for p in workers) == [
        "DataLoader worker 0",
        "DataLoader worker 0",
        "DataLoader worker 1",
        "DataLoader worker 1",
    ]
    items = _markers_by_pid(trace, "data.getitem")
    assert sum(items[p["pid"]] for p in workers) == 16
    assert items[trace["ncompass_processes"][0]["pid"]] == 0


ENGINE = """
class Model:
    def forward(self, x):
        return x * 2


def run_engine_core(connection):
    model = Model()
    while (request := connection.recv()) is not None:
        connection.send(model.forward(request))
"""

FRONT_END = """
import multiprocessing

import engine

if __name__ == "__main__":
    context = multiprocessing.get_context("spawn")
    front, back = context.Pipe()
    core = context.Process(target=engine.run_engine_core, args=(back,), name="EngineCore_0")
    core.start()
    for request in range(3):
        front.send(request)
        assert front.recv() == request * 2
    front.send(None)
    core.join()
"""

ENGINE_SPEC = """
version: 1
targets:
  - module: engine
    functions:
      - qualname: Model.forward
        name: model.forward
"""


def test_vllm_shaped_engine_process_has_the_models_markers(tmp_path: Path) -> None:
    folder = _project(tmp_path, FRONT_END)
    (folder / "engine.py").write_text(textwrap.dedent(ENGINE).lstrip())
    (folder / "spec.yaml").write_text(textwrap.dedent(ENGINE_SPEC).lstrip())
    result = _ncompass_run(folder, "--trace-name", "run", "main.py")
    assert result.returncode == 0, result.stderr
    trace = _trace(folder / "out" / "run.json")
    by_role = {p["role"]: p for p in trace["ncompass_processes"]}
    forwards = _markers_by_pid(trace, "model.forward")
    assert forwards[by_role["EngineCore_0"]["pid"]] == 3
    assert sum(forwards.values()) == 3


NVTX_PROGRAM = """
import multiprocessing

import work


def child():
    for i in range(3):
        work.step(i)


if __name__ == "__main__":
    work.step(0)
    process = multiprocessing.get_context("spawn").Process(target=child, name="nvtx child")
    process.start()
    process.join()
"""


def test_nvtx_trace_records_the_markers_of_every_process(tmp_path: Path) -> None:
    from ncompass.capture.nvtx_recorder import find_compiler

    if find_compiler() is None:
        pytest.skip("no C compiler on PATH: the NVTX recorder cannot be built")
    folder = _project(tmp_path, NVTX_PROGRAM)
    result = _ncompass_run(folder, "--profiler", "nvtx-trace", "--trace-name", "run", "main.py")
    assert result.returncode == 0, result.stderr
    trace = _trace(folder / "out" / "run.json")
    steps = Counter(e["pid"] for e in trace["traceEvents"] if e.get("name") == "work.step")
    assert sorted(steps.values()) == [1, 3]
    sidecar = json.loads((folder / "out" / "run.ncompass.json").read_text())
    (child,) = [p for p in sidecar["processes"] if p["role"] == "nvtx child"]
    assert steps[child["pid"]] == 3
