"""The transformers specs of ``rewrites/`` on whole models compiled with ``fullgraph=True``.

Each case is a real ``ncompass run --profiler torch`` of a script that runs a tiny random model
(no download) eagerly, then compiled whole with Inductor: the compiled logits match the eager
ones, Dynamo made one graph with no break, and the trace holds every marker (from the eager
call) and the compiled region.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ncompass.importer.targets import unmet_requirement
from ncompass.spec.models import RewriteConfig

REPO = Path(__file__).resolve().parents[2]
REWRITES = REPO / "rewrites"

SCRIPT = """
import json

import torch
import transformers
from torch._dynamo.utils import counters

torch.manual_seed(0)
config = transformers.{config}
model = transformers.{model}(config).eval()
ids = torch.randint(0, 128, (2, 12))
with torch.no_grad():
    eager = model(ids, use_cache=False).logits
    compiled = torch.compile(model, fullgraph=True)
    for _ in range(2):
        logits = compiled(ids, use_cache=False).logits
torch.testing.assert_close(logits, eager, rtol=1e-4, atol=1e-4)
graphs = counters["stats"]["unique_graphs"]
breaks = sum(counters["graph_break"].values())
print("RESULT", json.dumps({{"graphs": graphs, "breaks": breaks}}))
"""

MODELS = {
    "gpt2": (
        "transformers/gpt2.yaml",
        "GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=128, n_positions=64)",
        "GPT2LMHeadModel",
        ["gpt2.block[0]", "gpt2.block[1]", "gpt2.attention[0]", "gpt2.attention[1]"],
    ),
    "llama": (
        "transformers/llama.yaml",
        "LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128, "
        "num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, "
        "max_position_embeddings=64)",
        "LlamaForCausalLM",
        ["llama.layer[0]", "llama.layer[1]", "llama.attention[0]", "llama.attention[1]"],
    ),
}


def _static_names(config: RewriteConfig) -> set[str]:
    # the section for the installed version; in it, a call marker on the KV cache's `update`
    # runs only with a cache, and `use_cache=False` here (the 4.x sections wrap the whole `if`
    # instead, which runs either way)
    (section,) = [t for t in config.targets if unmet_requirement(t.requires) is None]
    calls = [m for m in section.calls if m.call != "update"]
    names = {m.name or "" for m in [*section.functions, *calls, *section.ranges]}
    return {name for name in names if "{" not in name}


@pytest.mark.slow
@pytest.mark.parametrize("model", sorted(MODELS))
def test_spec_on_a_model_compiled_whole(model: str, tmp_path: Path) -> None:
    spec, config_source, model_class, per_layer = MODELS[model]
    config = RewriteConfig.from_yaml(REWRITES / spec)
    reason = unmet_requirement(config.targets[0].requires)
    if reason:
        pytest.skip(reason)
    script = tmp_path / f"compiled_{model}.py"
    script.write_text(SCRIPT.format(config=config_source, model=model_class))
    command = [sys.executable, "-m", "ncompass", "run", "--config", str(REWRITES / spec)]
    command += ["--profiler", "torch", "--output-dir", str(tmp_path), "--trace-name", model]
    done = subprocess.run(
        [*command, str(script)], capture_output=True, text=True, cwd=REPO, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.split("RESULT", 1)[1])
    assert result == {"graphs": 1, "breaks": 0}

    events: list[dict[str, Any]] = json.loads((tmp_path / f"{model}.json").read_text())[
        "traceEvents"
    ]
    markers = {e["name"] for e in events if e.get("cat") == "user_annotation"}
    expected = _static_names(config) | set(per_layer)
    assert expected <= markers, sorted(expected - markers)
    assert any(e["name"].startswith("Torch-Compiled Region") for e in events)
