"""Without a GPU and without the interpreter, or without triton at all: every op falls back to
PyTorch (same results, a stated reason), and nothing imports triton."""

from __future__ import annotations

import json
from pathlib import Path

from ncompass.kernels.catalog import OPS
from tests.kernels.conftest import run_python

# Sets sys.modules["triton"] = None: `import triton` fails and find_spec says None, as when the
# `kernels` extra is not installed.
HIDE_TRITON = "import sys; sys.modules['triton'] = None\n"

ALL_OPS = """
import json, sys, torch
import torch.nn.functional as F
from ncompass.kernels import ops, stats
torch.manual_seed(0)
x, w, b = torch.randn(2, 3, 8, 8), torch.randn(4, 3, 3, 3), torch.randn(4)
rows, weight = torch.randn(5, 16), torch.randn(6, 16)
same = [
    torch.equal(ops.conv2d(x, w, b, 1, 1), F.conv2d(x, w, b, 1, 1)),
    torch.equal(ops.linear(rows, weight), F.linear(rows, weight)),
    torch.equal(ops.matmul(rows, weight.t()), rows @ weight.t()),
    torch.equal(ops.layer_norm(rows, (16,)), F.layer_norm(rows, (16,))),
    torch.equal(ops.rms_norm(rows, (16,)), F.rms_norm(rows, (16,))),
    torch.equal(
        ops.scaled_dot_product_attention(x, x, x, is_causal=True),
        F.scaled_dot_product_attention(x, x, x, is_causal=True),
    ),
]
print(json.dumps({
    "same": same,
    "reasons": {op: s.fallbacks for op, s in stats().items()},
    "kernel_calls": sum(s.kernel_calls for s in stats().values()),
    "triton_imported": sys.modules.get("triton") is not None,
}))
"""


def _report(code: str, env: dict[str, str] | None = None) -> dict[str, object]:
    done = run_python(code, env or {})
    return json.loads(done.stdout.splitlines()[-1])  # type: ignore[no-any-return]


def test_without_gpu_or_interpreter_every_op_falls_back_to_identical_results() -> None:
    report = _report(ALL_OPS)
    assert report["same"] == [True] * 6
    assert report["kernel_calls"] == 0
    reason = (
        "no CUDA device: tensors on cpu "
        "(set TRITON_INTERPRET=1 to run the kernels in Triton's interpreter)"
    )
    assert report["reasons"] == {op: {reason: 1} for op in OPS}  # every op was called
    assert report["triton_imported"] is False


def test_without_triton_installed_every_op_falls_back() -> None:
    report = _report(HIDE_TRITON + ALL_OPS, {"TRITON_INTERPRET": "1"})
    assert report["same"] == [True] * 6
    reason = "triton is not installed (pip install 'ncompass[kernels]')"
    assert report["reasons"]["linear"] == {reason: 1}  # type: ignore[index]


def test_importing_ncompass_kernels_imports_neither_torch_nor_triton() -> None:
    code = (
        "import sys, ncompass, ncompass.kernels, ncompass.kernels.catalog\n"
        "from ncompass.kernels import stats, KernelError\n"
        "print([m for m in ('torch', 'triton', 'numpy') if m in sys.modules])"
    )
    assert run_python(code, {}).stdout.strip() == "[]"


def test_cli_runs_a_swap_spec_without_triton(tmp_path: Path) -> None:
    code = HIDE_TRITON + (
        "from ncompass.cli import main\n"
        f"main(['run', '--config', 'configs/mlp.yaml', '--config', 'configs/swap_linear.yaml',"
        f" '--output-dir', {str(tmp_path)!r}, '--trace-name', 'no-triton',"
        " 'examples/tiny_transformer.py', '--new-tokens', '1', '--layers', '1'])\n"
    )
    done = run_python(code, {"TRITON_INTERPRET": "1"}, check=False)
    assert done.returncode == 0, done.stderr
    trace = json.loads((tmp_path / "no-triton.json").read_text())
    names = {
        event["name"] for event in trace["traceEvents"] if event.get("cat") == "user_annotation"
    }
    assert {"mlp.fc1", "mlp.fc2", "ncompass.kernels.linear[pytorch]"} <= names
    assert "ncompass.kernels.linear[triton]" not in names


def test_cli_kernels_list_works_without_triton() -> None:
    code = HIDE_TRITON + (
        "import sys\nfrom ncompass.cli import main\n"
        "try:\n    main(['kernels', 'list', '--json'])\nexcept SystemExit as done:\n"
        "    assert not done.code, done.code\n"
        "assert sys.modules.get('triton') is None\n"
    )
    done = run_python(code, {})
    listing = json.loads(done.stdout)
    assert [op["name"] for op in listing["ops"]] == list(OPS)
