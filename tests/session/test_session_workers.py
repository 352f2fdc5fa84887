"""``session run`` finds a slow statement that runs only in a worker process, in two runs.

The discovery run samples every process the run follows (a ``multiprocessing`` child, a
DataLoader worker), and the markers run measures the markers placed in them: the parent only
waits for its workers, and waiting is not the answer. Every session here is ``ncompass session
run --json`` in a subprocess, as a user runs it, on real processes and the real torch profiler.
"""

from __future__ import annotations

import json
import multiprocessing.spawn
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from ncompass.session.callstacks import stack_profile
from ncompass.session.child_sampling import merge_processes
from ncompass.session.sampler import Frame, StackSampler, StackSamples
from tests.conftest import REPO
from tests.session.chains import line_of_text
from tests.session.workers import DATASET, LOADING, PLANTED, SPAWNING, WORK


def _session(folder: Path, run: Path) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "ncompass", "session", "run", "--json", "-n", "2",
         "-o", str(folder / "traces"), str(run)],
        cwd=folder, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    document: dict[str, Any] = json.loads(done.stdout)
    return document


def _check_found_in_the_worker(document: dict[str, Any], module: Path, process: str) -> None:
    planted = line_of_text(module, PLANTED)
    answer = document["answer"]
    assert Path(answer["file"]).resolve() == module.resolve(), answer
    assert answer["lines"] == [planted, planted], answer
    assert answer["runs"] <= 2 and len(document["iterations"]) <= 2
    assert answer["measured_by"] == "markers"
    assert str(answer["process"]).startswith(process), answer
    # the discovery run saw the worker: the planted statement is among its hottest, in it
    hottest = document["iterations"][0]["discovery"]["hottest"]
    seen = [h for h in hottest if h["lines"] == [planted, planted]]
    assert seen and str(seen[0]["process"]).startswith(process), hottest
    # no run is sure of a wrong answer (the parent's wait is not the slow statement)
    for iteration in document["iterations"]:
        estimate = iteration.get("answer") or {}
        if estimate.get("confidence") == "high":
            assert estimate["lines"] == [planted, planted], estimate


def test_a_slow_statement_in_a_spawned_worker_is_found_in_two_runs(tmp_path: Path) -> None:
    module = tmp_path / "workload.py"
    module.write_text(WORK)
    run = tmp_path / "run.py"
    run.write_text(SPAWNING)
    document = _session(tmp_path, run)
    _check_found_in_the_worker(document, module, "SpawnProcess-1")


def test_a_slow_statement_in_a_dataloader_worker_is_found_in_two_runs(tmp_path: Path) -> None:
    module = tmp_path / "slow_items.py"
    module.write_text(DATASET)
    run = tmp_path / "run.py"
    run.write_text(LOADING)
    document = _session(tmp_path, run)
    _check_found_in_the_worker(document, module, "DataLoader worker")


def test_a_thread_waiting_for_others_weighs_nothing_while_they_work() -> None:
    """The parent's ``join()``: its own thread waits while other threads (here one that spins,
    in a run the profiler's and the workers' feeders) use the CPU."""
    done = threading.Event()

    def busy() -> None:
        end = time.thread_time() + 0.3
        while time.thread_time() < end:
            pass
        done.set()

    sampler = StackSampler(interval_s=0.005)
    sampler.start()
    worker = threading.Thread(target=busy)
    started = time.thread_time()
    worker.start()
    assert done.wait(timeout=120)
    worker.join()
    samples = sampler.stop()
    assert time.thread_time() - started < 0.1  # this thread only waited
    assert sum(samples.weights_us) < 0.3 * 1e6 / 3, samples.weights_us


def test_samples_of_a_worker_are_read_from_its_first_frame_and_name_it(tmp_path: Path) -> None:
    """A spawned worker's stacks never hold the script: they start in multiprocessing."""
    script = tmp_path / "run.py"
    script.write_text("import workload\nworkload.work(1)\n")
    module = tmp_path / "workload.py"
    module.write_text("def work(n):\n    return n * 2\n")
    spawn = Frame(multiprocessing.spawn.__file__, 120, "spawn_main", 100, "multiprocessing.spawn")
    work = Frame(str(module), 2, "work", 1, "workload")
    parent = StackSamples(
        frames=[Frame(str(script), 2, "<module>", 1, "__main__")],
        stacks=[[0]],
        times_us=[1.0],
        weights_us=[10.0],
    )
    child = StackSamples(frames=[spawn, work], stacks=[[0, 1]] * 3, times_us=[0.5, 2, 3],
                         weights_us=[100.0] * 3)  # fmt: skip
    merged = merge_processes(parent, 11, [(22, "SpawnProcess-1", child)])
    assert merged.pids == [22, 11, 22, 22] and merged.times_us == sorted(merged.times_us)
    profile = stack_profile(merged, script)
    hottest, time_ = profile.ranked()[0]
    assert (Path(hottest.file), hottest.line, time_.self_us) == (module, 2, 300.0)
    assert profile.process_of([hottest]) == "SpawnProcess-1"
    top_of_parent = next(line for line in profile.lines if line.file == str(script))
    assert profile.process_of([top_of_parent]) is None


def test_gpu_time_goes_to_the_launching_process_not_to_the_nearest_sample(tmp_path: Path) -> None:
    """A rank launches a kernel while its parent's sample is nearer in time than the rank's."""
    script = tmp_path / "run.py"
    script.write_text("import workload\nworkload.work(1)\n")
    module = tmp_path / "workload.py"
    module.write_text("def work(n):\n    return n * 2\n")
    parent = StackSamples(
        frames=[Frame(str(script), 2, "<module>", 1, "__main__")],
        stacks=[[0]] * 4,
        times_us=[100.0, 200.0, 300.0, 400.0],
        weights_us=[1.0] * 4,
    )
    rank = StackSamples(
        frames=[Frame(str(module), 2, "work", 1, "workload")],
        stacks=[[0]] * 4,
        times_us=[130.0, 230.0, 330.0, 430.0],
        weights_us=[1.0] * 4,
    )
    merged = merge_processes(parent, 11, [(22, "rank 1", rank)])
    launches = [(at, 50.0, 22) for at in (205.0, 305.0, 405.0)]  # nearer the parent's samples
    profile = stack_profile(merged, script, gpu_launches_us=launches)
    by_line = {Path(line.file).name: time.gpu_us for line, time in profile.lines.items()}
    assert by_line == {"run.py": 0.0, "workload.py": 150.0}
    assert profile.process_of([profile.ranked()[0][0]]) == "rank 1"


def test_a_launcher_watching_its_ranks_is_setup(tmp_path: Path) -> None:
    """torchrun's elastic agent, called from the script, costs the same however long the ranks
    train: it is set apart like an import, not ranked against the ranks' statements."""
    import torch.distributed.run

    script = tmp_path / "run.py"
    launch = Frame(str(script), 7, "<module>", 1, "__main__")
    agent = Frame(torch.distributed.run.__file__, 900, "main", 890, "torch.distributed.run")
    samples = StackSamples(frames=[launch, agent], stacks=[[0, 1]], times_us=[1.0],
                           weights_us=[400.0])  # fmt: skip
    profile = stack_profile(samples, script)
    assert profile.setup_us == {"process launch": 400.0} and not profile.lines
