"""The curated specs of ``rewrites/``: each validates against the installed library (skipped,
with the reason, when the library is absent or outside the spec's range), follows the
conventions, and ``rewrites/torch/nn.yaml`` works as is under ``ncompass run``."""

from __future__ import annotations

import json
import os
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
        "transformers/mistral.yaml",
        "transformers/qwen2.yaml",
        "transformers/qwen3.yaml",
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
    for target in config.targets:
        assert target.module is not None, "library specs target modules, not files"
        assert target.requires, f"{target.module}: every target states the versions it fits"
        for marker in target.ranges:
            assert marker.first and marker.last, f"{target.module}: {marker.name} lacks anchors"
        markers = [*target.functions, *target.calls, *target.ranges]
        assert all(marker.name for marker in markers), "every marker is named"
        names = [marker.name or "" for marker in markers]
        assert len(names) == len(set(names)), "marker names are unique: runs compare by name"


# transformers 4.49 beside the newest release (`make setup` installs it there)
OLD_TRANSFORMERS = Path(
    os.environ.get("NCOMPASS_TEST_TRANSFORMERS_OLD", Path(sys.prefix) / "transformers-4.49")
)
needs_old_transformers = pytest.mark.skipif(
    not (OLD_TRANSFORMERS / "transformers").is_dir(),
    reason=f"transformers 4.49 is not installed in {OLD_TRANSFORMERS} (`make setup` puts it there)",
)
TRANSFORMERS_SPECS = [path for path in SPECS if path.parent.name == "transformers"]


# releases of the libraries the specs cover, and around them
_RELEASES = ["4.47.0", "4.49.0", "4.50.3", "4.57.6", "5.0.0", "5.24.0", "6.0"]


@pytest.mark.parametrize("path", TRANSFORMERS_SPECS, ids=_spec_id)
def test_sections_for_one_module_fit_disjoint_versions_under_the_same_names(path: Path) -> None:
    from packaging.requirements import Requirement

    config = RewriteConfig.from_yaml(path)
    sections: dict[str, list[tuple[Requirement, set[str]]]] = {}
    for target in config.targets:
        names = {m.name or "" for m in [*target.functions, *target.calls, *target.ranges]}
        sections.setdefault(target.module or "", []).append((Requirement(target.requires), names))
    for module, versions in sections.items():
        for release in _RELEASES:
            fitting = [r for r, _ in versions if r.specifier.contains(release, prereleases=True)]
            assert len(fitting) <= 1, f"{module}: {release} fits {[str(r) for r in fitting]}"
        # an upgrade keeps the markers' names: traces before and after compare by name
        assert all(names == versions[0][1] for _, names in versions), module


def _old_environment() -> dict[str, str]:
    path = os.environ.get("PYTHONPATH")
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            [str(OLD_TRANSFORMERS), str(REPO), *([path] if path else [])]
        ),
    }


@needs_old_transformers
@pytest.mark.parametrize("path", TRANSFORMERS_SPECS, ids=_spec_id)
def test_spec_validates_against_transformers_4_49(path: Path) -> None:
    command = [sys.executable, "-m", "ncompass", "spec", "validate", str(path)]
    done = subprocess.run(
        command, capture_output=True, text=True, cwd=REPO, env=_old_environment(), timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "transformers 4.49.0 is installed" in done.stdout  # the 5.x section stood aside
    if path.stem == "qwen3":  # came with 4.51: no 4.x section
        assert "not checked" in done.stdout
        return
    assert done.stdout.startswith("✓"), done.stdout
    assert "note:" not in done.stdout, done.stdout  # written against 4.49: nothing moved


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


def _run(
    tmp_path: Path,
    name: str,
    *script: str,
    spec: str = "torch/nn.yaml",
    env: dict[str, str] | None = None,
) -> set[str]:
    command = [sys.executable, "-m", "ncompass", "run", "--config", str(REWRITES / spec)]
    command += ["--output-dir", str(tmp_path), "--trace-name", name, *script]
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO, timeout=240, env=env)
    assert done.returncode == 0, done.stderr
    assert "skipping target" not in done.stderr, done.stderr  # the other version's section
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


# a random-config model of each family, a few generated tokens
TINY_MODEL = """
import torch
import transformers

torch.manual_seed(0)
family = "{family}"
if family == "GPT2":
    config = transformers.GPT2Config(
        vocab_size=64, n_embd=32, n_layer=2, n_head=4, n_positions=64,
        bos_token_id=0, eos_token_id=0,
    )
else:
    config = getattr(transformers, family + "Config")(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        bos_token_id=0, eos_token_id=0, pad_token_id=0,
    )
model = getattr(transformers, family + "LMHeadModel" if family == "GPT2" else family + "ForCausalLM")
model = model(config).eval()
with torch.no_grad():
    out = model.generate(torch.tensor([[1, 2, 3]]), max_new_tokens=3, do_sample=False)
print(out.tolist())
"""
_FAMILIES = {
    "gpt2": "GPT2",
    "llama": "Llama",
    "mistral": "Mistral",
    "qwen2": "Qwen2",
    "qwen3": "Qwen3",
}


def _marks_every_marker(tmp_path: Path, path: Path, env: dict[str, str] | None) -> None:
    config = RewriteConfig.from_yaml(path)
    script = tmp_path / f"tiny_{path.stem}.py"
    script.write_text(TINY_MODEL.replace("{family}", _FAMILIES[path.stem]))
    markers = _run(tmp_path, path.stem, str(script), spec=f"transformers/{path.name}", env=env)
    static = {
        m.name or ""
        for m in [*config.targets[0].functions, *config.targets[0].calls, *config.targets[0].ranges]
        if "{" not in (m.name or "")
    }
    assert static <= markers, sorted(static - markers)
    # names templated on the layer index are evaluated per layer
    prefix = path.stem
    layers = {"gpt2": "block"}.get(prefix, "layer")
    every_layer = {f"{prefix}.{kind}[{n}]" for kind in (layers, "attention") for n in (0, 1)}
    assert every_layer <= markers, sorted(every_layer - markers)


@pytest.mark.slow
@pytest.mark.parametrize("path", TRANSFORMERS_SPECS, ids=_spec_id)
def test_transformers_spec_marks_a_real_model_on_the_newest_release(
    tmp_path: Path, path: Path
) -> None:
    reasons = [unmet_requirement(t.requires) for t in RewriteConfig.from_yaml(path).targets]
    if all(reasons):
        pytest.skip("; ".join(reason or "" for reason in reasons))
    _marks_every_marker(tmp_path, path, None)


@pytest.mark.slow
@needs_old_transformers
@pytest.mark.parametrize("path", [p for p in TRANSFORMERS_SPECS if p.stem != "qwen3"], ids=_spec_id)
def test_transformers_spec_marks_a_real_model_on_4_49(tmp_path: Path, path: Path) -> None:
    _marks_every_marker(tmp_path, path, _old_environment())
