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
