"""``session run`` finds a slow statement that runs only in a worker process, in two runs.

The discovery run samples every process the run follows (a ``multiprocessing`` child, a
DataLoader worker), and the markers run measures the markers placed in them: the parent only
waits for its workers, and waiting is not the answer. Every session here is ``ncompass session
run --json`` in a subprocess, as a user runs it, on real processes and the real torch profiler.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.conftest import REPO
from tests.session.chains import line_of_text

PLANTED = "x = x + (torch.ones(SLOW, SLOW) @ torch.ones(SLOW, SLOW)).sum()  # planted"

WORK = f"""\
import torch

torch.set_num_threads(1)
SLOW = 500
FAST = 40


def step(x):
    x = x + (torch.ones(FAST, FAST) @ torch.ones(FAST, FAST)).sum()
    {PLANTED}
    return x


def work(steps):
    x = 0.0
    for _ in range(steps):
        x = step(x)
    return x
"""

SPAWNING = """\
import multiprocessing

import workload

if __name__ == "__main__":
    child = multiprocessing.get_context("spawn").Process(target=workload.work, args=(16,))
    child.start()
    child.join()
"""

DATASET = f"""\
import torch
from torch.utils.data import Dataset

torch.set_num_threads(1)
SLOW = 500
FAST = 40


class SlowItems(Dataset):
    def __len__(self):
        return 32

    def __getitem__(self, index):
        x = (torch.ones(FAST, FAST) @ torch.ones(FAST, FAST)).sum()
        {PLANTED}
        return x
"""

LOADING = """\
from torch.utils.data import DataLoader

import slow_items

if __name__ == "__main__":
    for batch in DataLoader(slow_items.SlowItems(), batch_size=2, num_workers=2):
        pass
"""


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
