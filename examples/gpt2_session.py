"""A small random GPT-2 (no download) on a long sequence, where eager attention dominates.

    ncompass session run examples/gpt2_session.py

finds, in two runs, the statements of ``eager_attention_forward`` that hold the time (see
docs/session.md).
"""

import torch
from transformers import GPT2Config, GPT2LMHeadModel

torch.manual_seed(0)
torch.set_num_threads(1)  # steadier on a shared machine
config = GPT2Config(n_layer=2, n_head=4, n_embd=32, n_inner=64, vocab_size=256, n_positions=1024)
config._attn_implementation = "eager"
model = GPT2LMHeadModel(config).eval()
ids = torch.randint(0, 256, (1, 1024))
with torch.no_grad():
    for _ in range(3):
        model(ids)
