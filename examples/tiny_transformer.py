"""The ncompass demo: greedy decoding with a tiny transformer on CPU.

Run it plain (``python examples/tiny_transformer.py``) or instrumented, without editing it:

    ncompass run --config configs/attn.yaml examples/tiny_transformer.py
"""

from __future__ import annotations

import argparse
import time

import torch
from tinyformer.model import TinyTransformer, TransformerConfig, generate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--prompt", type=int, default=32, help="prompt length in tokens")
    parser.add_argument("--new-tokens", type=int, default=8)
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="intra-op threads (pinned, so that runs compared with `ncompass compare` agree)",
    )
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    config = TransformerConfig(layers=args.layers, dim=args.dim)
    model = TinyTransformer(config).eval()
    prompt = torch.randint(0, config.vocab, (args.batch, args.prompt))
    start = time.perf_counter()
    with torch.no_grad():
        tokens = generate(model, prompt, args.new_tokens)
    elapsed = time.perf_counter() - start
    print(f"generated {tokens.shape[1] - args.prompt} tokens x {args.batch} in {elapsed:.3f} s")


if __name__ == "__main__":
    main()
