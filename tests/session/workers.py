"""Programs whose slow statement runs only in a worker process, for the session tests and
``benchmarks/bench_session.py --shapes``.

The parent starts the workers and waits: a ``spawn``ed ``multiprocessing`` child running a
function of ``workload.py``, two DataLoader workers (fork, Linux's default) calling
``slow_items.SlowItems.__getitem__``, or ``torch.distributed.run`` starting two gloo ranks of
``train.py`` that call ``workload.py`` (the benchmark only: a minute and more per run here). The planted statement is a 500x500 matmul; the cheap one a
40x40 matmul beside it.
"""

from __future__ import annotations

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

TRAIN = """\
import torch.distributed as dist

import workload

dist.init_process_group("gloo")
workload.work(32)
dist.barrier()
dist.destroy_process_group()
"""

TORCHRUN = """\
import os

from torch.distributed.run import main

if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    main(["--standalone", "--nproc-per-node", "2", os.path.join(here, "train.py")])
"""
