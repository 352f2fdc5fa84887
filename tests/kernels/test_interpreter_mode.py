"""When ``TRITON_INTERPRET=1`` is set decides which kernels can run in a process."""

from __future__ import annotations

import json

import pytest

from tests.kernels.conftest import HAS_TRITON, run_python

pytestmark = pytest.mark.skipif(not HAS_TRITON, reason="triton is not installed")

RUN_OPS = """
import torch
import torch.nn.functional as F
from ncompass.kernels import ops, stats
with torch.no_grad():
    x, w = torch.randn(6, 16), torch.randn(5, 16)
    close = [
        torch.allclose(ops.linear(x, w, activation="silu"), F.silu(F.linear(x, w)), atol=1e-4),
        torch.allclose(ops.layer_norm(x, (16,)), F.layer_norm(x, (16,)), atol=1e-4),
    ]
print(json.dumps({"close": close, "stats": {op: [s.kernel_calls, s.fallbacks] for op, s in stats().items()}}))
"""


def _report(prelude: str) -> dict[str, object]:
    done = run_python("import json, os\n" + prelude + RUN_OPS, {"NCOMPASS_AUTOTUNE": "0"})
    return json.loads(done.stdout.splitlines()[-1])  # type: ignore[no-any-return]


def test_kernels_run_in_the_interpreter_even_if_triton_was_imported_before() -> None:
    # the torch profiler imports triton: a profiled session may set TRITON_INTERPRET later
    report = _report("import triton\nos.environ['TRITON_INTERPRET'] = '1'\n")
    assert report["close"] == [True, True]
    assert report["stats"] == {"layer_norm": [1, {}], "linear": [1, {}]}


def test_kernels_loaded_before_the_switch_fall_back_and_say_why() -> None:
    report = _report(
        "import ncompass.kernels.jit.gemm, ncompass.kernels.jit.norm\n"
        "os.environ['TRITON_INTERPRET'] = '1'\n"
    )
    assert report["close"] == [True, True]
    reason = "the kernels were loaded before TRITON_INTERPRET=1 was set; set it before the first kernel call"  # fmt: skip
    assert report["stats"] == {"layer_norm": [0, {reason: 1}], "linear": [0, {reason: 1}]}
