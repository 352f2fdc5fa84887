"""Compile the marked model of ``compiled_mlp.py`` and run it, compiled and eager.

    ncompass run --config examples/compile/spec.yaml examples/compile/run.py [--mode ...]

The markers around the compiled call (``step[...]``, ``compiled``/``eager``) are the script's
own, through the same runtime; the spec's markers sit inside the compiled model.
"""

from __future__ import annotations

import argparse

import torch
from compiled_mlp import CompiledMLP  # beside this script: Python puts its folder on sys.path

from ncompass.runtime import TorchRecordContext


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--fullgraph", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--dynamic", action="store_true")
    args = parser.parse_args()

    torch.manual_seed(0)
    model = CompiledMLP().eval()
    compiled = torch.compile(model, fullgraph=args.fullgraph, dynamic=args.dynamic or None)
    x = torch.randn(8, 32)
    with torch.no_grad():
        for step in range(args.steps):
            with TorchRecordContext(f"step[{step}]"):
                with TorchRecordContext("compiled"):
                    out = compiled(x)
                with TorchRecordContext("eager"):
                    expected = model(x)
            torch.testing.assert_close(out, expected)
    print(f"compiled and eager agree over {args.steps} steps")


if __name__ == "__main__":
    main()
