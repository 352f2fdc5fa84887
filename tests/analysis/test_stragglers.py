"""The straggler is the rank that arrives last at collectives, not the one with the most time.

On a real gloo job (torchrun, two CPU ranks) where rank 1 takes twice as long (compute and a
wait) before each ``all_reduce`` and rank 0 then does extra work of its own after the last one: wall time names
rank 0, the collectives name rank 1 (rank 0 waits for it). And on HTA's two sampled ranks of a
128-rank NCCL job, the waiting is the arrival skew of the kernels that overlap.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ncompass.analysis.ranks import summarize_traces
from ncompass.analysis.summary import summarize_trace as summarize
from tests.traces.builders import shared_trace

REPO = Path(__file__).resolve().parents[2]

MAIN = """
import torch
import torch.distributed as dist

import work

dist.init_process_group("gloo")
rank = dist.get_rank()
x = torch.randn(192, 192)
for _ in range(6):
    work.compute(x, 2 if rank == 1 else 1)
    work.sync(torch.ones(1 << 14))
if rank == 0:  # rank 0 ends last (writes a checkpoint, say): the longest wall, no straggler
    work.compute(x, 12)
dist.destroy_process_group()
"""

WORK = """
import time

import torch
import torch.distributed as dist


def compute(x, factor):
    y = x
    for _ in range(30 * factor):
        y = torch.tanh(y @ x)
    # and a wait that scales too (a data loader, I/O): on a busy machine compute alone can be
    # stretched on either rank, a 100 ms difference a step cannot
    time.sleep(0.1 * factor)
    return y


def sync(t):
    dist.all_reduce(t)
"""

SPEC = """
version: 1
targets:
  - module: work
    functions:
      - qualname: compute
        name: work.compute
      - qualname: sync
        name: work.sync
"""


@pytest.fixture(scope="module")
def gloo_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of a real two-rank gloo run with an unbalanced rank 1 (its traces in out/)."""
    folder = tmp_path_factory.mktemp("gloo")
    for name, text in (("main.py", MAIN), ("work.py", WORK), ("spec.yaml", SPEC)):
        (folder / name).write_text(textwrap.dedent(text).lstrip())
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(folder), str(REPO)]))
    result = subprocess.run(
        [
            *(sys.executable, "-m", "ncompass", "run", "-c", "spec.yaml", "-o", "out"),
            *("--trace-name", "run", "-m", "torch.distributed.run", "--standalone"),
            *("--nproc-per-node", "2", "main.py"),
        ],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    return folder


def test_merged_run_names_the_late_rank_not_the_longest(gloo_run: Path) -> None:
    summary = summarize(gloo_run / "out" / "run.json")
    ranks = summary["structured"]["run"]["ranks"]
    walls = {row["label"]: row["cpu_wall_us"] for row in ranks["ranks"]}
    assert walls["0"] > walls["1"]  # the premise: wall time points at rank 0
    stragglers = ranks["stragglers"]
    assert stragglers["straggler"] == "1" and ranks["slowest"]["label"] == "1"
    assert stragglers["matched"] == 6 and stragglers["unmatched"] == 0
    by_rank = {row["label"]: row for row in stragglers["ranks"]}
    # on a busy machine rank 0 can be preempted before a collective and arrive last at it once:
    # rank 1 is last at most of them, and the waiting it causes is most of the waiting
    assert by_rank["1"]["last_arrivals"] > by_rank["0"]["last_arrivals"]
    assert by_rank["1"]["last_arrivals"] + by_rank["0"]["last_arrivals"] == 6
    assert by_rank["0"]["wait_us"] > 0.3 * by_rank["0"]["collective_us"]
    assert by_rank["0"]["wait_us"] > 2 * by_rank["1"]["wait_us"]
    assert by_rank["1"]["wait_caused_us"] > 2 * by_rank["0"]["wait_caused_us"]
    # every wait is caused by the rank that arrived last: the totals agree
    assert by_rank["0"]["wait_us"] + by_rank["1"]["wait_us"] == pytest.approx(
        by_rank["0"]["wait_caused_us"] + by_rank["1"]["wait_caused_us"]
    )
    markdown = summary["markdown"]
    assert "Straggler: **rank 1**, the last to arrive at" in markdown
    assert "Slowest rank: **rank 0**" not in markdown


def test_per_rank_files_agree_with_the_merged_run(gloo_run: Path) -> None:
    merged = summarize(gloo_run / "out" / "run.json")["structured"]["run"]["ranks"]
    files = [  # the ranks' own traces (the launcher's is there too)
        path
        for path in sorted((gloo_run / "out" / "run.processes").glob("*.json"))
        if json.loads(path.read_text()).get("ncompass_process", {}).get("rank") is not None
    ]
    assert len(files) == 2
    apart = summarize_traces(files)["structured"]
    assert apart["stragglers"]["straggler"] == "1"
    for mine, theirs in zip(
        merged["stragglers"]["ranks"], apart["stragglers"]["ranks"], strict=True
    ):
        assert mine["label"] == theirs["label"]
        assert mine["wait_us"] == pytest.approx(theirs["wait_us"])
        assert mine["transfer_us"] == pytest.approx(theirs["transfer_us"])


def test_cpu_only_rank_table_has_no_gpu_columns(gloo_run: Path) -> None:
    markdown = summarize(gloo_run / "out" / "run.json")["markdown"]
    ranks_section = markdown[markdown.index("## Ranks") :]
    assert "| rank | processes | CPU wall |" in ranks_section
    assert "GPU span" not in ranks_section


def _nccl_kernels(path: Path) -> list[tuple[float, float]]:
    with gzip.open(path, "rt") as file:
        events = json.load(file)["traceEvents"]
    return sorted(
        (event["ts"], event["ts"] + event["dur"])
        for event in events
        if event.get("cat") == "kernel" and event["name"].startswith("ncclKernel")
    )


def test_hta_sampled_ranks_wait_is_the_arrival_skew_of_overlapping_kernels() -> None:
    paths = [shared_trace("trace_filter").with_name(f"sampled_rank-{n}.json.gz") for n in (0, 1)]
    stragglers = summarize_traces(paths)["structured"]["stragglers"]
    # the same collective is in progress on both ranks at once: pair the kernels that overlap
    first, second = (_nccl_kernels(path) for path in paths)
    pairs = []
    position = 0
    for start, end in first:
        while position < len(second) and second[position][1] < start:
            position += 1
        if position < len(second) and second[position][0] <= end:
            pairs.append(((start, end), second[position]))
            position += 1
    assert stragglers["matched"] == len(pairs) > 0
    assert stragglers["unmatched"] == len(first) + len(second) - 2 * len(pairs)
    skew = [b[0] - a[0] for a, b in pairs]
    assert all(value > 0 for value in skew)  # rank 1 arrives last at every one
    by_rank = {row["label"]: row for row in stragglers["ranks"]}
    assert stragglers["straggler"] == "1" and by_rank["1"]["last_arrivals"] == len(pairs)
    assert by_rank["0"]["wait_us"] == pytest.approx(sum(skew))
    assert by_rank["0"]["collective_us"] == pytest.approx(sum(a[1] - a[0] for a, _ in pairs))
