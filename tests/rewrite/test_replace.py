"""``replace:`` swaps classes, functions, methods and the names a module uses, as written or
through its imports."""

from __future__ import annotations

from tests.support.modules import ModuleLab

FAST = """
class FastLinear:
    kind = "fast"
    def __init__(self, *args, **kwargs):
        self.args = args

def fast_relu(x):
    return ("fast_relu", x)

def fast_forward(self, x):
    return ("fast_forward", x)

def fast_len(x):
    return -1
"""

USER = """
import math as m
from math import sqrt
from collections import OrderedDict

class Slow:
    kind = "slow"
    def __init__(self, *args, **kwargs):
        self.args = args

class Model:
    def forward(self, x):
        return ("slow_forward", x)

def build():
    return Slow(1, 2)

def use_math(x):
    return m.floor(x), sqrt(x), len([1, 2, 3])

def ordered():
    return OrderedDict(a=1)
"""


def _load(lab: ModuleLab, replace: list[dict[str, str]]) -> object:
    lab.write("fast_kernels_r", FAST)
    lab.write("user_r", USER)
    return lab.load("user_r", {"targets": [{"module": "user_r", "replace": replace}]})


def test_defined_class_and_method_are_rebound(lab: ModuleLab) -> None:
    module = _load(
        lab,
        [
            {"name": "Slow", "with": "fast_kernels_r:FastLinear"},
            {"name": "Model.forward", "with": "fast_kernels_r:fast_forward"},
        ],
    )
    assert module.build().kind == "fast"  # type: ignore[attr-defined]
    assert module.Model().forward(3) == ("fast_forward", 3)  # type: ignore[attr-defined]


def test_used_names_match_as_written_and_through_imports(lab: ModuleLab) -> None:
    module = _load(
        lab,
        [
            {"name": "math.floor", "with": "fast_kernels_r:fast_relu"},  # written `m.floor`
            {"name": "math.sqrt", "with": "fast_kernels_r:fast_relu"},  # written `sqrt`
            {"name": "len", "with": "fast_kernels_r:fast_len"},  # a builtin
            {"name": "collections.OrderedDict", "with": "fast_kernels_r:FastLinear"},
        ],
    )
    floor, root, length = module.use_math(4.0)  # type: ignore[attr-defined]
    assert floor == ("fast_relu", 4.0) and root == ("fast_relu", 4.0) and length == -1
    assert module.ordered().kind == "fast"  # type: ignore[attr-defined]
