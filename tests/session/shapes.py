"""Small programs whose time is in one statement reached through one frame shape each.

Every program marks the statement that holds the time with ``# HOT``: the session must answer
that line, whatever frames lead there (a comprehension, a lambda, a nested function,
``functools.partial``, a decorator, a generator, recursion, a dispatch dict). Each has a cheap
competitor, so an answer that folds the wrong frames names a wrong statement.
"""

from __future__ import annotations

HEADER = """\
import functools
import torch

torch.set_num_threads(1)
torch.manual_seed(0)
A = torch.randn(260, 260)
"""

LOOP = """

x = torch.randn(10)
for _ in range(25):
    x = step(x)
"""

SHAPES: dict[str, str] = {
    "list comprehension": """
def work(x):
    junk = [A @ A @ A for _ in range(6)]  # HOT
    return x + 1


def step(x):
    y = work(x)
    return y * 2
""",
    "generator expression": """
def work(x):
    total = sum((A @ A @ A).sum() for _ in range(6))  # HOT
    return x + total * 0


def step(x):
    y = work(x)
    return y * 2
""",
    "dict comprehension": """
def work(x):
    table = {i: A @ A @ A for i in range(6)}  # HOT
    small = torch.randn(20) + 1
    return x + small.sum() * 0 + len(table) * 0


def step(x):
    y = work(x)
    return y * 2
""",
    "set comprehension": """
def work(x):
    seen = {float((A @ A @ A)[0, 0]) + i for i in range(6)}  # HOT
    return x + len(seen) * 0


def step(x):
    y = work(x)
    return y * 2
""",
    "lambda": """
MATMUL = lambda a: a @ a @ a  # noqa: E731


def work(x):
    for _ in range(6):
        out = MATMUL(A)  # HOT
    small = torch.randn(20) + 1
    return x + out[0, 0] * 0 + small.sum() * 0


def step(x):
    y = work(x)
    return y * 2
""",
    "nested function": """
def work(x):
    def inner():
        for _ in range(6):
            product = A @ A @ A  # HOT
        return product[0, 0] * 0

    small = torch.randn(20) + 1
    return x + inner() + small.sum() * 0


def step(x):
    y = work(x)
    return y * 2
""",
    "functools.partial": """
def work(x, repeat):
    for _ in range(repeat):
        product = A @ A @ A  # HOT
    return x + product[0, 0] * 0


WORK = functools.partial(work, repeat=6)


def step(x):
    y = WORK(x)
    return y * 2
""",
    "decorator with functools.wraps": """
def logged(function):
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        return function(*args, **kwargs)

    return wrapper


@logged
def work(x):
    for _ in range(6):
        product = A @ A @ A  # HOT
    return x + product[0, 0] * 0


@logged
def light(x):
    return x + 1


def step(x):
    y = work(x)
    return light(y) * 2
""",
    "generator consumed by the caller": """
def products(count):
    for _ in range(count):
        yield A @ A @ A  # HOT


def step(x):
    total = 0.0
    for product in products(6):
        total += float(product[0, 0])
    return x + total * 0
""",
    "recursion": """
def walk(depth, x):
    if depth == 0:
        for _ in range(6):
            x = x + (A @ A @ A)[0, :10].sum() * 0  # HOT
        return x
    return walk(depth - 1, x) + 0


def step(x):
    y = walk(4, x)
    return y * 2
""",
    "dispatch dict": """
def eager_attention(q):
    scores = q @ q.T
    for _ in range(6):
        scores = scores @ A  # HOT
    return scores.sum(-1)


def cheap_attention(q):
    return q.sum(-1)


ATTENTION_FUNCTIONS = {"eager": eager_attention, "cheap": cheap_attention}


class Attention:
    def __init__(self, implementation):
        self.implementation = implementation

    def forward(self, q):
        attention_interface = ATTENTION_FUNCTIONS[self.implementation]
        out = attention_interface(q)
        return out


LAYER = Attention("eager")
Q = torch.randn(260, 260)


def step(x):
    y = LAYER.forward(Q)
    return x + y[:10] * 0
""",
}


def program(shape: str) -> str:
    """The whole script of one shape."""
    return HEADER + SHAPES[shape] + LOOP


def hot_line(source: str) -> int:
    """The line marked ``# HOT``."""
    return next(n for n, line in enumerate(source.splitlines(), 1) if "# HOT" in line)


# The same shapes planted in a copy of a real transformers modeling file: the statements that go
# into the function (at its indentation) and the module-level code they call (appended to the
# copy). The statement holding the time is marked ``# planted``.
_MM = "(torch.ones(500, 500) @ torch.ones(500, 500)).sum()"
_SMALL_MM = "(torch.ones(250, 250) @ torch.ones(250, 250)).sum()"
PLANTED_SHAPES: dict[str, tuple[list[str], str]] = {
    "list comprehension": ([f"planted = [{_SMALL_MM} for _ in range(8)]  # planted"], ""),
    "generator expression": ([f"planted = sum({_SMALL_MM} for _ in range(8))  # planted"], ""),
    "dict comprehension": ([f"planted = {{i: {_SMALL_MM} for i in range(8)}}  # planted"], ""),
    "set comprehension": (
        [f"planted = {{float({_SMALL_MM}) + i for i in range(8)}}  # planted"],
        "",
    ),
    "lambda": (
        ["planted = _PLANTED_MM()  # planted"],
        f"_PLANTED_MM = lambda: {_MM}  # noqa: E731\n",
    ),
    "nested function": (
        [
            "def _planted_inner():",
            f"    return {_MM}  # planted",
            "planted = _planted_inner()",
        ],
        "",
    ),
    "functools.partial": (
        ["planted = _PLANTED_PARTIAL()"],
        "import functools\n\n\ndef _planted_work(n):\n"
        "    return (torch.ones(n, n) @ torch.ones(n, n)).sum()  # planted\n\n\n"
        "_PLANTED_PARTIAL = functools.partial(_planted_work, 500)\n",
    ),
    "decorator with functools.wraps": (
        ["planted = _planted_work(500) + _planted_light(1)"],
        "import functools\n\n\ndef _planted_logged(function):\n"
        "    @functools.wraps(function)\n    def wrapper(*args, **kwargs):\n"
        "        return function(*args, **kwargs)\n\n    return wrapper\n\n\n"
        "@_planted_logged\ndef _planted_work(n):\n"
        "    return (torch.ones(n, n) @ torch.ones(n, n)).sum()  # planted\n\n\n"
        "@_planted_logged\ndef _planted_light(n):\n    return n + 1\n",
    ),
    "generator consumed by the caller": (
        ["planted = sum(float(p) for p in _planted_products(8))"],
        "def _planted_products(count):\n    for _ in range(count):\n"
        f"        yield {_SMALL_MM}  # planted\n",
    ),
    "recursion": (
        ["planted = _planted_walk(4)"],
        "def _planted_walk(depth):\n    if depth == 0:\n"
        f"        return {_MM}  # planted\n    return _planted_walk(depth - 1)\n",
    ),
    "dispatch dict": (
        ['planted_interface = _PLANTED_FUNCTIONS["eager"]', "planted = planted_interface(500)"],
        "def _planted_eager(n):\n"
        "    return (torch.ones(n, n) @ torch.ones(n, n)).sum()  # planted\n\n\n"
        "def _planted_cheap(n):\n    return n\n\n\n"
        '_PLANTED_FUNCTIONS = {"eager": _planted_eager, "cheap": _planted_cheap}\n',
    ),
}

# A call marker placed at two sites of one function, one of which never runs.
TWO_SITES = """import torch

torch.set_num_threads(1)
W = torch.randn(500, 500)


def forward(x, cross=None):
    if cross is not None:
        k = torch.mm(cross, W)
    else:
        k = torch.mm(x, W)  # HOT
    return k.sum()


x = torch.randn(500, 500)
for _ in range(20):
    forward(x)
"""
TWO_SITES_SPEC = """version: 1
targets:
  - file: prog.py
    calls:
      - in: forward
        call: torch.mm
        name: proj
"""

# A compiled model whose time is in Inductor's extern GEMMs (mm, addmm), not its own kernels.
COMPILED_MODEL = """import torch
from torch import nn


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(512, 2048)
        self.b = nn.Linear(2048, 512)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.a(x))
        return self.b(h)
"""
COMPILED_RUN = """import torch
from model import Net

torch.set_num_threads(1)
compiled = torch.compile(Net().eval(), fullgraph=True)
x = torch.randn(256, 512)
with torch.no_grad():
    for _ in range(15):
        y = compiled(x)  # HOT
print("ok", float(y.sum()))
"""
