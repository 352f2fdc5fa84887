"""``rewrites/vllm/*.yaml`` validate against vLLM 0.33.0's own model files, taken from its wheel.

vLLM cannot be installed here (it needs CUDA), and need not be: a spec is validated on source.
The wheel is downloaded once with pip (about 340 MB; PyPI's sdist holds the same files, with
the same hashes, but ``pip download`` of the sdist builds its metadata, which needs vLLM's build
dependencies), and only what validation reads is kept, in a cache folder reused across runs:
the model files, the ``__init__.py`` of their packages (so the folders are the packages the wheel
installs) and the ``METADATA`` that tells ``requires: vllm>=0.33,<0.34`` which version it is.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import os
import shutil
import string
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest

from ncompass.importer.validate import validate_spec
from ncompass.rewrite.result import rewrite_path
from ncompass.spec.models import RewriteConfig

REPO = Path(__file__).resolve().parents[2]
VLLM = "0.33.0"
MODELS = {
    "llama": "vllm/model_executor/models/llama.py",
    "qwen2": "vllm/model_executor/models/qwen2.py",
}
MEMBERS = (
    *MODELS.values(),
    "vllm/__init__.py",
    "vllm/model_executor/__init__.py",
    "vllm/model_executor/models/__init__.py",
    f"vllm-{VLLM}.dist-info/METADATA",
)
# the wheel is abi3 for x86-64 Linux: asking for that platform makes the download work anywhere
PIP_DOWNLOAD = [
    "download", "--no-deps", "--no-cache-dir", "--only-binary", ":all:",
    "--platform", "manylinux_2_28_x86_64", "--python-version", "3.11", "--implementation", "cp",
    f"vllm=={VLLM}",
]  # fmt: skip


def _cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "ncompass-tests" / f"vllm-{VLLM}"


def _extract_vllm_sources(root: Path) -> None:
    """Download the wheel into a temporary folder and keep only :data:`MEMBERS` in ``root``."""
    root.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=root.parent) as scratch:
        command = [sys.executable, "-m", "pip", *PIP_DOWNLOAD, "--dest", scratch]
        done = subprocess.run(command, capture_output=True, text=True, timeout=900)
        wheels = list(Path(scratch).glob("vllm-*.whl"))
        if done.returncode != 0 or not wheels:
            pytest.fail(
                f"could not download vllm=={VLLM} from PyPI (pip exited {done.returncode}); "
                "this test validates rewrites/vllm/*.yaml against vLLM's own source and needs "
                f"the network once (the files are then kept in {root}):\n{done.stderr[-2000:]}",
                pytrace=False,
            )
        staged = Path(scratch) / "root"
        with zipfile.ZipFile(wheels[0]) as wheel:
            for member in MEMBERS:
                wheel.extract(member, staged)
        # whole or not at all: an interrupted run leaves no half folder; a test process that
        # got there first (pytest -n) keeps its folder, which holds the same files
        with contextlib.suppress(OSError):
            staged.rename(root)
        if not _complete(root):  # a stale folder, from an older version of this test
            shutil.rmtree(root)
            staged.rename(root)


@pytest.fixture(scope="module")
def vllm_root() -> Path:
    """A folder holding vLLM 0.33.0's model files as its wheel installs them."""
    root = _cache_root()
    if not _complete(root):
        _extract_vllm_sources(root)
    return root


def _complete(root: Path) -> bool:
    return all((root / member).is_file() for member in MEMBERS)


def _spec(model: str) -> RewriteConfig:
    return RewriteConfig.from_yaml(REPO / "rewrites" / "vllm" / f"{model}.yaml")


@pytest.mark.parametrize("model", sorted(MODELS))
def test_spec_was_written_against_the_released_file(vllm_root: Path, model: str) -> None:
    (target,) = _spec(model).targets
    assert target.module == MODELS[model].removesuffix(".py").replace("/", ".")
    digest = hashlib.sha256((vllm_root / MODELS[model]).read_bytes()).hexdigest()
    assert target.sha256 == digest


@pytest.mark.parametrize("model", sorted(MODELS))
def test_every_marker_is_placed_in_the_released_file(
    vllm_root: Path, model: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(vllm_root))  # the sources and vLLM's version, as --path does
    config = _spec(model)
    (check,) = validate_spec(config)
    assert check.skipped is None
    assert check.source == vllm_root / MODELS[model]
    target = config.targets[0]
    markers = [*target.functions, *target.calls, *target.ranges]
    assert len(check.sites) == len(markers)
    assert not check.notes, check.notes  # nothing moved, nothing ambiguous
    decorated = (vllm_root / MODELS[model]).read_text()
    # the layer markers sit in the model vLLM compiles whole with fullgraph=True
    assert "@support_torch_compile" in decorated


@pytest.mark.parametrize("model", sorted(MODELS))
def test_rewritten_file_compiles_to_the_code_the_import_hook_runs(
    vllm_root: Path, model: str
) -> None:
    config = _spec(model)
    module = config.targets[0].module
    result = rewrite_path(vllm_root / MODELS[model], config.targets, config, module)
    code = result.compile()
    assert code.co_filename.endswith(MODELS[model])
    placed = {site["name"] for site in result.manifest()}
    target = config.targets[0]
    assert placed == {m.name for m in [*target.functions, *target.calls, *target.ranges]}


@pytest.mark.parametrize("model", sorted(MODELS))
def test_templated_names_use_only_names_the_module_defines(vllm_root: Path, model: str) -> None:
    tree = ast.parse((vllm_root / MODELS[model]).read_text())
    defined = {"self"}
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            defined |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            defined.add(node.name)
    target = _spec(model).targets[0]
    for marker in [*target.functions, *target.calls, *target.ranges]:
        used = _names_in_template(marker.name or "")
        assert used <= defined, f"{marker.name}: {sorted(used - defined)}"


def _names_in_template(name: str) -> set[str]:
    """The variable names the ``{expr}`` parts of a marker name read."""
    fields = [field for _, field, _, _ in string.Formatter().parse(name) if field]
    trees = [ast.parse(field, mode="eval") for field in fields]
    return {node.id for tree in trees for node in ast.walk(tree) if isinstance(node, ast.Name)}


def test_spec_validate_command_accepts_both_specs(vllm_root: Path) -> None:
    specs = [str(REPO / "rewrites" / "vllm" / f"{model}.yaml") for model in sorted(MODELS)]
    command = [sys.executable, "-m", "ncompass", "spec", "validate", "--path", str(vllm_root)]
    done = subprocess.run([*command, *specs], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "vllm.model_executor.models.llama" in done.stdout
    assert "skipped" not in done.stdout
