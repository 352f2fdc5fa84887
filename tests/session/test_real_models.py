"""A real transformers model (small random GPT-2, no download): the session reaches the eager
attention two frames below ``attention_interface``, from no spec and in two runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

GPT2 = """\
import torch
from transformers import GPT2Config, GPT2LMHeadModel

torch.manual_seed(0)
torch.set_num_threads(1)
config = GPT2Config(n_layer=2, n_head=4, n_embd=32, n_inner=64, vocab_size=256, n_positions=512)
config._attn_implementation = "eager"
model = GPT2LMHeadModel(config).eval()
ids = torch.randint(0, 256, (1, 512))
with torch.no_grad():
    for _ in range(3):
        model(ids)
"""


def test_gpt2_long_sequence_answer_is_in_eager_attention(tmp_path: Path) -> None:
    script = tmp_path / "gpt2run.py"
    script.write_text(GPT2)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "ncompass", "session", "run", "--json", "-n", "3", str(script)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    answer = document["answer"]
    assert answer["function"].endswith(":eager_attention_forward")
    assert answer["file"].endswith("transformers/models/gpt2/modeling_gpt2.py")
    assert answer["runs"] == 2 and answer["measured_by"] == "markers"
    assert answer["repeats"] == 3  # the three model(ids) calls
    assert answer["ops"] and answer["ops"][0]["name"].startswith("aten::")
    # the imports and the model's construction were set apart, never the answer
    assert answer["setup_ms"]["import"] > 0
    hottest = document["iterations"][0]["discovery"]["hottest"]
    # seen in one run, at least six frames deep: script, LM head, model, block, attention,
    # eager (transformers 4.49); 5.x's decorators and layer wrappers add frames (14 in 5.24)
    assert any(h["function"].endswith(":eager_attention_forward") for h in hottest)
    depths = {h["depth"] for h in hottest if h["function"].endswith("eager_attention_forward")}
    assert len(depths) == 1 and min(depths) >= 6, depths
