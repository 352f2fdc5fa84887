"""Spec files load into validated models; every mistake is reported at its file and line."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from ncompass.errors import SpecError
from ncompass.spec.models import RewriteConfig

GOOD = """
version: 1
name: attention-drilldown
context: torch
targets:
  - module: mypkg.attention
    requires: "torch>=2.1"
    sha256: 1e52b0b4c1f5c6a8d9e0f1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6
    functions:
      - qualname: Attention.forward
        name: "attn.forward[{self.layer_idx}]"
        context: nvtx
    calls:
      - in: Attention.forward
        call: self.qkv_proj
        name: qkv
    ranges:
      - in: Attention.forward
        lines: [150, 162]
        first: "q = self.q_proj(x)"
        last: "out = attn @ v"
        name: attn.core
    replace:
      - name: Attention
        with: "mypkg.fast_attention:FastAttention"
  - file: scripts/train.py
    functions:
      - qualname: main
"""


def _write(tmp_path: Path, text: str, name: str = "spec.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def test_version_1_loads_with_lines_and_resolved_files(tmp_path: Path) -> None:
    config = RewriteConfig.from_yaml(_write(tmp_path, GOOD))
    assert config.name == "attention-drilldown"
    first, second = config.targets
    assert first.sha256 is not None and first.sha256.startswith("1e52")  # not read as a float
    assert first.functions[0].line == 9 and first.ranges[0].line == 17
    assert first.ranges[0].lines == (150, 162)
    assert first.replace[0].with_ == "mypkg.fast_attention:FastAttention"
    assert second.file == str((tmp_path / "scripts" / "train.py").resolve())
    assert config.path == (tmp_path / "spec.yaml").resolve()


def test_to_yaml_round_trips(tmp_path: Path) -> None:
    config = RewriteConfig.from_yaml(_write(tmp_path, GOOD))
    again = RewriteConfig.from_yaml(_write(tmp_path, config.to_yaml(), "again.yaml"))
    assert again.to_dict() == config.to_dict()
    assert "lines: [150, 162]" in config.to_yaml()
    assert config.digest() == again.digest()


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("version: 1\ntargets:\n  - module: m\n    functons: []\n", 4, "did you mean 'functions'"),
        (
            "version: 1\ntargets:\n  - module: m\n    ranges:\n      - in: f\n        lines: [9, 3]\n",
            6,
            "1 <= start <= end",
        ),
        ("version: 1\ntargets:\n  - module: m\n    functions: [{qualname: a}\n", 5, "invalid YAML"),
        ("version: 1\ntargets:\n  - functions: []\n", 3, "exactly one of 'module'"),
        (
            "version: 1\ntargets:\n  - module: m\n    ranges:\n      - lines: [1, 2]\n",
            5,
            "missing required key 'in'",
        ),
        ("targets: []\n", 1, "missing 'version'"),
        ("version: 2\ntargets: []\n", 1, "version"),
        ("version: 1\nversion: 1\n", 2, "duplicate key"),
        ("version: 1\ntargets:\n  - module: m\n    sha256: abc\n", 4, "64 hex digits"),
        (
            "version: 1\ntargets:\n  - module: m\n    requires: 'torch>>2'\n",
            4,
            "requires 'torch>>2' is not a requirement like 'torch>=2.1'",
        ),
        (
            "version: 1\ntargets:\n  - module: m\n    ranges:\n      - in: f\n        lines: [5]\n",
            6,
            "lines must be [start, end]: two 1-based line numbers",
        ),
        (
            "version: 1\ntargets:\n  - module: m\n    replace:\n      - name: A\n        with: pkg.B\n",
            6,
            "module:attribute",
        ),
    ],
)
def test_errors_name_the_file_and_line(tmp_path: Path, text: str, line: int, message: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(SpecError) as caught:
        RewriteConfig.from_yaml(path)
    assert caught.value.path == str(path)
    assert caught.value.line == line
    assert message in str(caught.value)
    assert str(caught.value).startswith(f"{path}:{line}: ")


def test_missing_and_empty_files(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="spec file not found"):
        RewriteConfig.from_yaml(tmp_path / "absent.yaml")
    with pytest.raises(SpecError, match="empty"):
        RewriteConfig.from_yaml(_write(tmp_path, ""))


def test_json_specs_load_too(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        '{"version": 1, "targets": [{"module": "m", "functions": [{"qualname": "f"}]}]}',
        "s.json",
    )
    assert RewriteConfig.from_yaml(path).targets[0].functions[0].qualname == "f"


def test_dict_errors_name_the_location() -> None:
    with pytest.raises(SpecError, match=r"targets\.0\.functions\.0\.qualname"):
        RewriteConfig.from_dict(
            {"version": 1, "targets": [{"module": "m", "functions": [{"qualname": ""}]}]}
        )
