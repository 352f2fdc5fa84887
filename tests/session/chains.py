"""Programs with a slow statement planted at a known depth, written to a folder for a session.

Every level of the chain does a little work of its own (a small matmul) and calls the next; the
last one holds the planted statement (a large matmul). With ``dispatch``, one level reaches the next the way
transformers reaches its attention: a function looked up at run time in a dict and wrapped in
``functools.partial`` (no static resolution can follow it).
"""

from __future__ import annotations

from pathlib import Path

SPIN = """\
import time


def spin(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass
"""

HEADER = """\
import functools

import torch

torch.set_num_threads(1)
FAST = 32
SLOW = {slow}


def work(size):
    return (torch.ones(size, size) @ torch.ones(size, size)).sum()

"""

PLANTED = "x = x + (torch.ones(SLOW, SLOW) @ torch.ones(SLOW, SLOW)).sum()  # planted"
SMALL = "x = x + work(FAST)"


def chain_module(levels: int, *, dispatch_at: int | None = None, slow: int = 1000) -> str:
    """A module whose ``Model().forward(x)`` goes ``levels`` functions deep to the planted line.

    ``dispatch_at``: the level that calls the next through a dict of functions and a partial.
    """
    parts = [HEADER.format(slow=slow)]
    for level in range(levels, 0, -1):
        if level == levels:
            body = f"    {SMALL}\n    {PLANTED}\n    return x\n"
        elif level == dispatch_at:
            body = (
                f"    {SMALL}\n"
                "    interface = functools.partial(FUNCTIONS[MODE], scale=1)\n"
                "    return interface(x) + 1\n"
            )
        else:
            body = f"    {SMALL}\n    return level_{level + 1}(x) + 1\n"
        signature = "x, scale=1" if dispatch_at is not None and level == dispatch_at + 1 else "x"
        parts.append(f"def level_{level}({signature}):\n{body}\n")
    if dispatch_at is not None:
        parts.append(f'MODE = "eager"\nFUNCTIONS = {{"eager": level_{dispatch_at + 1}}}\n\n')
    parts.append(
        f"class Model:\n    def forward(self, x):\n        {SMALL}\n        return level_1(x)\n"
    )
    return "\n".join(parts)


# two statements that do the same pure-Python work (a CPU-bound spin, steadier than two
# allocations of large tensors, which the allocator does not treat alike)
TIED = (
    HEADER.format(slow=0)
    + SPIN.replace("import time\n", "import time\n\nSPIN = 0.02\n")
    + """

class Model:
    def forward(self, x):
        x = x + work(FAST)
        spin(SPIN)  # one
        x = x + 1
        spin(SPIN)  # two
        return x
"""
)

HEAVY_IMPORT = SPIN + "\nspin(1.5)  # a slow import: setup, not the answer\n"


def script(folder: Path, module: str, *, calls: int = 4, imports: str = "") -> Path:
    """A script that imports ``module`` from ``folder`` and calls its model ``calls`` times."""
    path = folder / "run.py"
    path.write_text(
        f"import sys\nsys.path.insert(0, {str(folder)!r})\n{imports}"
        f"from {module} import Model\n\nmodel = Model()\n"
        f"for _ in range({calls}):\n    model.forward(1)\n"
    )
    return path


def line_of_text(path: Path, text: str) -> int:
    """The first line of ``path`` holding ``text``."""
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if text in line:
            return number
    raise AssertionError(f"{text!r} not in {path}")
