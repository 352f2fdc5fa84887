"""The curated specs of ``rewrites/``: each validates against the installed library (skipped,
with the reason, when the library is absent or outside the spec's range), follows the
conventions, and ``rewrites/torch/nn.yaml`` works as is under ``ncompass run``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ncompass.importer.targets import unmet_requirement
from ncompass.importer.validate import validate_spec
from ncompass.spec.models import RewriteConfig

REPO = Path(__file__).resolve().parents[2]
REWRITES = REPO / "rewrites"
SPECS = sorted(REWRITES.rglob("*.yaml"))


def _spec_id(path: Path) -> str:
    return str(path.relative_to(REWRITES))


def test_the_library_has_the_curated_specs() -> None:
    assert [_spec_id(path) for path in SPECS] == [
        "torch/nn.yaml",
        "transformers/gpt2.yaml",
        "transformers/llama.yaml",
        "vllm/llama.yaml",
        "vllm/qwen2.yaml",
    ]


@pytest.mark.parametrize("path", SPECS, ids=_spec_id)
def test_spec_validates_against_the_installed_library(path: Path) -> None:
    config = RewriteConfig.from_yaml(path)
    unmet = {t.requires: unmet_requirement(t.requires) for t in config.targets}
    if all(unmet.values()):
        pytest.skip("; ".join(sorted({reason for reason in unmet.values() if reason})))
    checks = validate_spec(config)
    placed = [check for check in checks if check.skipped is None]
    assert placed, "no target applies to the installed version"
    for check in placed:
        expected = len(check.target.functions) + len(check.target.calls) + len(check.target.ranges)
        assert len(check.sites) >= expected, check.target.label
        # written against this version: nothing had to be found again by its anchors
        assert not [note for note in check.notes if "moved" in note], check.notes


@pytest.mark.parametrize("path", SPECS, ids=_spec_id)
def test_spec_follows_the_library_conventions(path: Path) -> None:
    config = RewriteConfig.from_yaml(path)
    assert config.name and config.version == 1
    names: list[str] = []
    for target in config.targets:
        assert target.module is not None, "library specs target modules, not files"
        assert target.requires, f"{target.module}: every target states the versions it fits"
        for marker in target.ranges:
            assert marker.first and marker.last, f"{target.module}: {marker.name} lacks anchors"
        markers = [*target.functions, *target.calls, *target.ranges]
        assert all(marker.name for marker in markers), "every marker is named"
        names += [marker.name or "" for marker in markers]
    assert len(names) == len(set(names)), "marker names are unique: runs compare by name"


NN_BLOCKS = """
import torch
from torch import nn

torch.manual_seed(0)
layer = nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, batch_first=True)
x = torch.randn(2, 5, 16)
layer(x)  # training: the composite path
layer.eval()
with torch.no_grad():
    layer(x)  # inference: the fused fast path
    attention = nn.MultiheadAttention(16, 2, batch_first=True).eval()
    attention(x, x, x)  # its own fast path
    nn.Conv2d(3, 4, 3)(torch.randn(1, 3, 6, 6))
    nn.RMSNorm(16)(x)
"""


def _markers(trace: Path) -> set[str]:
    events = json.loads(trace.read_text())["traceEvents"]
    return {event["name"] for event in events if event.get("cat") == "user_annotation"}


def _run(tmp_path: Path, name: str, *script: str, spec: str = "torch/nn.yaml") -> set[str]:
    command = [sys.executable, "-m", "ncompass", "run", "--config", str(REWRITES / spec)]
    command += ["--output-dir", str(tmp_path), "--trace-name", name, *script]
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO, timeout=240)
    assert done.returncode == 0, done.stderr
    return _markers(tmp_path / f"{name}.json")


@pytest.mark.slow
def test_torch_nn_spec_runs_as_is_on_the_demo(tmp_path: Path) -> None:
    demo = _run(
        tmp_path, "demo", "examples/tiny_transformer.py", "--new-tokens", "1", "--layers", "1"
    )
    assert {"torch.nn.Linear", "torch.nn.LayerNorm"} <= demo


@pytest.mark.slow
def test_torch_nn_spec_marks_every_building_block(tmp_path: Path) -> None:
    script = tmp_path / "blocks.py"
    script.write_text(NN_BLOCKS)
    markers = _run(tmp_path, "blocks", str(script))
    config = RewriteConfig.from_yaml(REWRITES / "torch" / "nn.yaml")
    every = {m.name for t in config.targets for m in [*t.functions, *t.calls, *t.ranges]}
    assert every <= markers, sorted(every - markers)


TINY_LLAMA = """
import torch
from transformers import LlamaConfig, LlamaForCausalLM

torch.manual_seed(0)
config = LlamaConfig(
    vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
    num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
)
model = LlamaForCausalLM(config).eval()
with torch.no_grad():
    out = model.generate(torch.tensor([[1, 2, 3]]), max_new_tokens=3, do_sample=False)
print(out.tolist())
"""


@pytest.mark.slow
def test_llama_spec_marks_a_real_llama_decoder(tmp_path: Path) -> None:
    config = RewriteConfig.from_yaml(REWRITES / "transformers" / "llama.yaml")
    reason = unmet_requirement(config.targets[0].requires)
    if reason:
        pytest.skip(reason)
    script = tmp_path / "tiny_llama.py"
    script.write_text(TINY_LLAMA)
    markers = _run(tmp_path, "llama", str(script), spec="transformers/llama.yaml")
    static = {
        m.name or ""
        for t in config.targets
        for m in [*t.functions, *t.calls, *t.ranges]
        if "{" not in (m.name or "")
    }
    assert static <= markers, sorted(static - markers)
    # names templated on the layer index are evaluated per layer
    assert {
        "llama.layer[0]",
        "llama.layer[1]",
        "llama.attention[0]",
        "llama.attention[1]",
    } <= markers
