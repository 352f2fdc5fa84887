"""Runs to the root cause: the session on real models, beside the one-level-per-run planner.

    python benchmarks/bench_session.py [--quick] [--naive-runs N] [--json FILE]
    python benchmarks/bench_session.py --overhead [--repeats N]
    python benchmarks/bench_session.py --shapes [--only TEXT] [--json FILE]

Each case is a real model with small random weights (no downloads) and a hot spot at a known
depth: natural ones (GPT-2's eager attention on a long sequence, a wide MLP) and planted ones (a
copy of a real transformers modeling file, written to a temporary folder with one slow statement
added deep inside, imported from there). Every case runs ``ncompass session run --json`` as a
user would, from no spec at all and from a spec marking only the top-level model, and the same
with ``--one-level`` (the planner before discovery runs, one level finer per run). Per session:
runs used, whether the answer names the right statement, and wall time.

``--shapes`` runs the frame shapes of issue 22 (a comprehension, a lambda, a nested function,
``functools.partial``, a decorator, a generator, recursion, a dispatch dict), each as a small
program and planted in a copy of GPT-2's modeling file (in ``eager_attention_forward``, reached
through ``attention_interface``), plus a call marker with two sites (one never runs), a
compiled model whose time is in Inductor's extern GEMMs, and three programs whose slow statement
runs only in a worker process (a ``spawn``ed child, DataLoader workers, torchrun ranks;
``--only worker``).
Goal: the right file and line in at most 2 runs in every case, and never "confidence high" on a
wrong answer.

``--overhead`` measures what a discovery method costs on the GPT-2 case (tiny config, 768
tokens, eager attention): the model loop's own time (measured inside the script) and the trace
size under ``ncompass run`` with the profiler only, with the stack sampler (the discovery run),
and with the profiler's Python tracer (``--with-stack``), runs interleaved, medians.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
GOAL_RUNS = 2
PLANTED = "planted = (torch.ones(500, 500) @ torch.ones(500, 500)).sum()  # planted"

HEADER = """\
import sys
import torch

sys.path.insert(0, {folder!r})
torch.manual_seed(0)
torch.set_num_threads(1)
"""

LOOP = """
with torch.no_grad():
    for _ in range(3):
        model({inputs})
"""


@dataclass
class Case:
    """A model, where its time goes, and the spec that marks only its top level."""

    name: str
    depth: str
    body: str
    top_module: str
    top_qualname: str
    right: Callable[[dict[str, Any]], bool]
    expected: str
    planted_from: str | None = None  # the transformers module copied with the slow statement
    planted_after: str | None = None  # the line after which the slow statement goes


def _function_is(*names: str) -> Callable[[dict[str, Any]], bool]:
    return lambda answer: str(answer.get("function", "")).split(":")[-1] in names


def _is_planted(answer: dict[str, Any]) -> bool:
    return "# planted" in str(answer.get("statement", "")) or str(
        answer.get("statement", "")
    ).startswith("planted =")


def _gpt2(config: str, length: int, module: str = "transformers") -> str:
    return (
        f"from {module} import GPT2LMHeadModel\nfrom transformers import GPT2Config\n"
        f"config = GPT2Config({config})\nconfig._attn_implementation = 'eager'\n"
        f"model = GPT2LMHeadModel(config).eval()\nids = torch.randint(0, 256, (1, {length}))\n"
    )


TORCH_NN = """
from torch import nn


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(128, 4096)
        self.down = nn.Linear(4096, 128)

    def forward(self, x):
        hidden = self.up(x)
        hidden = torch.relu(hidden)
        return self.down(hidden)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(128)
        self.mlp = MLP()

    def forward(self, x):
        return x + self.mlp(self.norm(x))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block() for _ in range(2)])

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x
"""


def cases() -> list[Case]:
    """The benchmark's cases."""
    small = "n_layer=2, n_head=4, vocab_size=256, n_positions=1024"
    return [
        Case(
            "gpt2-attention (natural)",
            "6 frames: model -> GPT2Model -> GPT2Block -> GPT2Attention -> attention_interface",
            _gpt2(f"{small}, n_embd=32, n_inner=64", 1024),
            "transformers.models.gpt2.modeling_gpt2",
            "GPT2LMHeadModel.forward",
            _function_is("eager_attention_forward"),
            "a statement of eager_attention_forward (score matmul, mask, softmax)",
        ),
        Case(
            "gpt2-wide-mlp (natural)",
            "5-6 frames: ... GPT2Block -> GPT2MLP (-> NewGELUActivation)",
            _gpt2(f"{small}, n_embd=64, n_inner=2048", 256),
            "transformers.models.gpt2.modeling_gpt2",
            "GPT2LMHeadModel.forward",
            _function_is("GPT2MLP.forward", "NewGELUActivation.forward"),
            "a statement of GPT2MLP.forward or its activation",
        ),
        Case(
            "gpt2 planted in eager_attention_forward",
            "6 frames, through attention_interface",
            _gpt2(f"{small}, n_embd=64", 128, module="planted_gpt2"),
            "planted_gpt2",
            "GPT2LMHeadModel.forward",
            _is_planted,
            "the planted statement",
            "transformers.models.gpt2.modeling_gpt2",
            "attn_weights = torch.matmul(query, key.transpose(-1, -2))",
        ),
        Case(
            "bert planted in BertIntermediate.forward",
            "6 frames: BertModel -> BertEncoder -> BertLayer -> feed_forward_chunk -> "
            "BertIntermediate",
            "from planted_bert import BertModel\nfrom transformers import BertConfig\n"
            "config = BertConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, "
            "intermediate_size=128, vocab_size=256)\nconfig._attn_implementation = 'eager'\n"
            "model = BertModel(config).eval()\nids = torch.randint(0, 256, (1, 128))\n",
            "planted_bert",
            "BertModel.forward",
            _is_planted,
            "the planted statement",
            "transformers.models.bert.modeling_bert",
            "hidden_states = self.intermediate_act_fn(hidden_states)",
        ),
        Case(
            "llama planted in LlamaMLP.forward",
            "5 frames: LlamaForCausalLM -> LlamaModel -> LlamaDecoderLayer -> LlamaMLP",
            "from planted_llama import LlamaForCausalLM\nfrom transformers import LlamaConfig\n"
            "config = LlamaConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, "
            "num_key_value_heads=4, intermediate_size=128, vocab_size=256)\n"
            "config._attn_implementation = 'eager'\n"
            "model = LlamaForCausalLM(config).eval()\nids = torch.randint(0, 256, (1, 128))\n",
            "planted_llama",
            "LlamaForCausalLM.forward",
            _is_planted,
            "the planted statement",
            "transformers.models.llama.modeling_llama",
            "def forward(self, x):",
        ),
        Case(
            "torch.nn wide MLP (natural)",
            "4 frames: Net -> Block -> MLP",
            "from netmodel import Net\nmodel = Net().eval()\nids = torch.randn(512, 128)\n",
            "netmodel",
            "Net.forward",
            _function_is("MLP.forward"),
            "a statement of MLP.forward (the 128->4096->128 linears)",
        ),
    ]


def absolute_imports(source: str, package: str) -> str:
    """A modeling file's relative imports made absolute, so a copy imports from anywhere."""

    def replace(match: re.Match[str]) -> str:
        dots, rest = len(match["dots"]), match["rest"]
        parts = package.split(".")
        base = ".".join(parts[: len(parts) - dots + 1])
        return f"{match['lead']}from {base}{'.' + rest if rest else ''} import"

    return re.sub(
        r"(?P<lead>^\s*)from (?P<dots>\.+)(?P<rest>[\w.]*) import", replace, source, flags=re.M
    )


def plant(folder: Path, case: Case) -> None:
    """Write the case's module copy (with the slow statement) or model file into ``folder``."""
    if case.top_module == "netmodel":
        (folder / "netmodel.py").write_text("import torch\n" + TORCH_NN)
        return
    if case.planted_from is None:
        return
    import importlib.util

    spec = importlib.util.find_spec(case.planted_from)
    assert spec is not None and spec.origin is not None
    source = Path(spec.origin).read_text()
    source = absolute_imports(source, case.planted_from.rsplit(".", 1)[0])
    assert case.planted_after is not None
    lines = source.splitlines()
    anchor = next(
        i
        for i, line in enumerate(lines)
        if line.strip() == case.planted_after
        and (case.planted_after != "def forward(self, x):" or "down_proj" in lines[i + 1])
    )
    indent = re.match(
        r"\s*", lines[anchor + 1] if lines[anchor].strip().startswith("def") else lines[anchor]
    )
    assert indent is not None
    lines.insert(anchor + 1, indent.group(0) + PLANTED)
    (folder / f"{case.top_module}.py").write_text("\n".join(lines) + "\n")


def write_case(folder: Path, case: Case) -> tuple[Path, Path]:
    """The case's script and its top-level spec."""
    plant(folder, case)
    script = folder / "run.py"
    script.write_text(HEADER.format(folder=str(folder)) + case.body + LOOP.format(inputs="ids"))
    spec = folder / "top.yaml"
    spec.write_text(
        f"version: 1\ntargets:\n  - module: {case.top_module}\n    functions:\n"
        f"      - qualname: {case.top_qualname}\n"
    )
    return script, spec


def session(
    folder: Path, script: Path, spec: Path | None, naive: bool, runs: int, name: str
) -> tuple[dict[str, Any], float]:
    """One ``ncompass session run --json``; its document and wall time."""
    command = [sys.executable, "-m", "ncompass", "session", "run", "--json", "-n", str(runs)]
    command += ["--name", name, "-o", str(folder / "traces")]
    if naive:
        command.append("--one-level")
    if spec is not None:
        command += ["--config", str(spec)]
    command.append(str(script))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=folder, check=False)
    elapsed = time.perf_counter() - started
    try:
        document = json.loads(done.stdout)
    except json.JSONDecodeError:
        document = {"iterations": [], "answer": None, "error": done.stderr[-2000:]}
    return document, elapsed


def score(case: Case, document: dict[str, Any]) -> dict[str, Any]:
    """Runs used, the first run whose answer was right, whether the final answer is right."""
    iterations = document.get("iterations", [])
    first_right = next(
        (
            position + 1
            for position, entry in enumerate(iterations)
            if entry.get("answer") and case.right(entry["answer"])
        ),
        None,
    )
    answer = document.get("answer") or {}
    return {
        "runs": len(iterations),
        "right": bool(answer) and case.right(answer),
        "first_right_run": first_right,
        "answer": f"{answer.get('function', '?')}: {str(answer.get('statement', ''))[:60]}",
        "confidence": answer.get("confidence"),
        "share": answer.get("share"),
    }


OVERHEAD_SCRIPT = """\
import time
import torch
from transformers import GPT2Config, GPT2LMHeadModel

torch.manual_seed(0)
config = GPT2Config(n_layer=2, n_head=4, n_embd=64, vocab_size=256, n_positions=1024)
config._attn_implementation = "eager"
model = GPT2LMHeadModel(config).eval()
ids = torch.randint(0, 256, (1, 768))
with torch.no_grad():
    started = time.perf_counter()
    for _ in range(3):
        model(ids)
print("LOOP", time.perf_counter() - started)
"""

METHODS = {
    "profiler only": ["-m", "ncompass", "run"],
    "profiler + sampler (discovery)": ["-m", "ncompass.session.discovery"],
    "profiler --with-stack": ["-m", "ncompass", "run", "--with-stack"],
}


def overhead(repeats: int) -> None:
    """Loop time and trace size per discovery method, medians over interleaved runs."""
    import statistics

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with tempfile.TemporaryDirectory(prefix="bench-session-") as temporary:
        folder = Path(temporary)
        script = folder / "gpt2run.py"
        script.write_text(OVERHEAD_SCRIPT)
        loops: dict[str, list[float]] = {name: [] for name in METHODS}
        walls: dict[str, list[float]] = {name: [] for name in METHODS}
        sizes: dict[str, list[float]] = {name: [] for name in METHODS}
        for _ in range(repeats):
            for name, command in METHODS.items():
                trace = folder / "t.json"
                started = time.perf_counter()
                done = subprocess.run(
                    [sys.executable, *command, "-o", str(folder), "--trace-name", "t", str(script)],
                    capture_output=True, text=True, env=env, cwd=folder, check=True,
                )  # fmt: skip
                walls[name].append(time.perf_counter() - started)
                loop = next(line for line in done.stdout.splitlines() if line.startswith("LOOP"))
                loops[name].append(float(loop.split()[1]))
                sizes[name].append(trace.stat().st_size / 1e6)
                trace.unlink()
        base = statistics.median(loops["profiler only"])
        print(f"{'method':32} {'loop s':>7} {'ratio':>6} {'run s':>6} {'trace MB':>9}")
        for name in METHODS:
            loop = statistics.median(loops[name])
            print(
                f"{name:32} {loop:7.3f} {loop / base:6.2f} {statistics.median(walls[name]):6.1f} "
                f"{statistics.median(sizes[name]):9.1f}"
            )


@dataclass
class ShapeCase:
    """One frame-shape case: files to write, the script, and how to tell the right answer."""

    name: str
    files: dict[str, str]
    spec: str | None
    right: Callable[[dict[str, Any]], bool]


def _at_line(file: str, line: int) -> Callable[[dict[str, Any]], bool]:
    return lambda answer: (
        Path(str(answer.get("file", ""))).name == file
        and list(answer.get("lines") or [])[:1] == [line]
    )


def _planted_in(file: str) -> Callable[[dict[str, Any]], bool]:
    return lambda answer: (
        Path(str(answer.get("file", ""))).name == file
        and "# planted" in str(answer.get("statement", ""))
    )


def _compiled_call(answer: dict[str, Any]) -> bool:
    from tests.session.shapes import COMPILED_RUN, hot_line

    extern = {kernel["name"] for kernel in answer.get("extern_kernels") or []}
    return _at_line("run.py", hot_line(COMPILED_RUN))(answer) and bool(
        extern & {"aten::mm", "aten::addmm"}
    )


def plant_shape(statements: list[str], module_code: str) -> str:
    """GPT-2's modeling file with a shape planted in ``eager_attention_forward``."""
    import importlib.util

    spec = importlib.util.find_spec("transformers.models.gpt2.modeling_gpt2")
    assert spec is not None and spec.origin is not None
    source = absolute_imports(Path(spec.origin).read_text(), "transformers.models.gpt2")
    lines = source.splitlines()
    anchor = lines.index("    attn_weights = torch.matmul(query, key.transpose(-1, -2))")
    lines[anchor + 1 : anchor + 1] = ["    " + statement for statement in statements]
    return "\n".join(lines) + "\n\n\n" + module_code


def shape_cases() -> list[ShapeCase]:
    """The frame shapes as small programs and planted in GPT-2, a two-site call marker, and a
    compiled model whose time is in extern GEMMs."""
    from tests.session import shapes, workers

    found = []
    for name in shapes.SHAPES:
        source = shapes.program(name)
        found.append(
            ShapeCase(f"{name} (program)", {"run.py": source}, None,
                      _at_line("run.py", shapes.hot_line(source)))
        )  # fmt: skip
    gpt2 = (
        HEADER.format(folder="") + _gpt2("n_layer=2, n_head=4, vocab_size=256, n_positions=1024, "
        "n_embd=64", 128, module="planted_gpt2") + LOOP.format(inputs="ids")
    )  # fmt: skip
    for name, (statements, module_code) in shapes.PLANTED_SHAPES.items():
        found.append(
            ShapeCase(f"{name} (GPT-2 copy)",
                      {"planted_gpt2.py": plant_shape(statements, module_code), "run.py": gpt2},
                      None, _planted_in("planted_gpt2.py"))
        )  # fmt: skip
    found.append(
        ShapeCase("call marker with two sites", {"prog.py": shapes.TWO_SITES, "run.py": ""},
                  shapes.TWO_SITES_SPEC, _at_line("prog.py", shapes.hot_line(shapes.TWO_SITES)))
    )  # fmt: skip
    found.append(
        ShapeCase("compiled, time in extern GEMMs",
                  {"model.py": shapes.COMPILED_MODEL, "run.py": shapes.COMPILED_RUN}, None,
                  _compiled_call)
    )  # fmt: skip
    found += [
        ShapeCase("worker: spawned multiprocessing child",
                  {"workload.py": workers.WORK, "run.py": workers.SPAWNING}, None,
                  _planted_in("workload.py")),
        ShapeCase("worker: DataLoader(num_workers=2)",
                  {"slow_items.py": workers.DATASET, "run.py": workers.LOADING}, None,
                  _planted_in("slow_items.py")),
        ShapeCase("worker: torch.distributed.run, 2 gloo ranks",
                  {"workload.py": workers.WORK, "train.py": workers.TRAIN,
                   "run.py": workers.TORCHRUN}, None, _planted_in("workload.py")),
    ]  # fmt: skip
    return found


def run_shapes(only: str | None, json_path: Path | None) -> None:
    """The frame-shape cases: runs, right at which run, confidence, wall time."""
    sys.path.insert(0, str(REPO))
    results = []
    print(f"{'case':44} {'runs':>4} {'right':>5} {'1st right':>9} {'confidence':>10} {'wall s':>7}")
    for case in shape_cases():
        if only and only not in case.name:
            continue
        with tempfile.TemporaryDirectory(prefix="bench-shapes-") as temporary:
            folder = Path(temporary)
            for file, text in case.files.items():
                (folder / file).write_text(text.replace("sys.path.insert(0, '')", ""))
            script = folder / ("prog.py" if "prog.py" in case.files else "run.py")
            spec = None
            if case.spec is not None:
                spec = folder / "spec.yaml"
                spec.write_text(case.spec)
            document, wall = session(folder, script, spec, False, GOAL_RUNS + 1, "shapes")
        iterations = document.get("iterations", [])
        answer = document.get("answer") or {}
        right = bool(answer) and case.right(answer)
        first = next(
            (
                n
                for n, it in enumerate(iterations, 1)
                if it.get("answer") and case.right(it["answer"])
            ),
            None,
        )
        wrong_high = [
            n for n, it in enumerate(iterations, 1)
            if it.get("answer") and not case.right(it["answer"])
            and it["answer"].get("confidence") == "high"
        ]  # fmt: skip
        row = {
            "case": case.name,
            "runs": len(iterations),
            "right": right,
            "first_right_run": first,
            "confidence": answer.get("confidence"),
            "high_on_wrong_runs": wrong_high,
            "wall_s": round(wall, 1),
            "answer": f"{Path(str(answer.get('file', '?'))).name}:"
            f"{(answer.get('lines') or ['?'])[0]} {str(answer.get('statement', ''))[:50]}",
        }
        results.append(row)
        print(
            f"{case.name[:44]:44} {row['runs']:>4} {'yes' if right else 'no':>5} "
            f"{first or '-'!s:>9} {row['confidence']!s:>10} {wall:7.1f}  {row['answer']}"
            + (f"  HIGH ON WRONG (runs {wrong_high})" if wrong_high else ""),
            flush=True,
        )
    met = sum(1 for r in results if r["right"] and r["runs"] <= GOAL_RUNS)
    never = sum(1 for r in results if not r["high_on_wrong_runs"])
    print(
        f"\ngoal (right file and line in <= {GOAL_RUNS} runs): {met}/{len(results)}; "
        f"never 'confidence high' on a wrong answer: {never}/{len(results)}"
    )
    if json_path is not None:
        json_path.write_text(json.dumps(results, indent=2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="Two cases only.")
    parser.add_argument("--naive-runs", type=int, default=5)
    parser.add_argument("--json", type=Path, default=None, help="Write the results here too.")
    parser.add_argument("--overhead", action="store_true", help="Discovery methods' overhead.")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--shapes", action="store_true", help="The frame-shape cases.")
    parser.add_argument("--only", default=None, help="With --shapes: cases whose name has TEXT.")
    options = parser.parse_args()
    if options.shapes:
        run_shapes(options.only, options.json)
        return
    if options.overhead:
        overhead(options.repeats)
        return
    chosen = cases()[2:4] if options.quick else cases()
    results = []
    print(
        f"{'case':42} {'start':6} {'planner':10} {'runs':>4} {'right':>5} {'1st right':>9} "
        f"{'wall s':>7}  answer"
    )
    for case in chosen:
        with tempfile.TemporaryDirectory(prefix="bench-session-") as temporary:
            folder = Path(temporary)
            script, spec = write_case(folder, case)
            for start, start_spec in (("none", None), ("top", spec)):
                for naive in (False, True):
                    runs = options.naive_runs if naive else GOAL_RUNS + 1
                    name = f"{'naive' if naive else 'new'}-{start}"
                    document, wall = session(folder, script, start_spec, naive, runs, name)
                    scored = score(case, document)
                    row = {
                        "case": case.name,
                        "depth": case.depth,
                        "expected": case.expected,
                        "start": start,
                        "planner": "one-level" if naive else "discovery",
                        "wall_s": round(wall, 1),
                        **scored,
                    }
                    results.append(row)
                    first = scored["first_right_run"] or "-"
                    print(
                        f"{case.name[:42]:42} {start:6} {row['planner']:10} {scored['runs']:>4} "
                        f"{'yes' if scored['right'] else 'no':>5} {first!s:>9} {wall:7.1f}  "
                        f"{scored['answer']}",
                        flush=True,
                    )
    ours = [r for r in results if r["planner"] == "discovery"]
    met = sum(1 for r in ours if r["right"] and r["runs"] <= GOAL_RUNS)
    print(f"\ngoal (right statement in <= {GOAL_RUNS} runs): {met}/{len(ours)} sessions")
    if options.json is not None:
        options.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
