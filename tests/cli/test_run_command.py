"""The command line end to end, in a fresh process, as a user types it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ncompass.capture.nvtx_recorder import (
    build_recorder,
    environment,
    find_compiler,
    read_recordings,
)
from tests.conftest import REPO

ATTN_MARKERS = {"attn.qkv_proj", "attn.out_proj", "attn.split_heads", "attn.core", "decode"}
MLP_MARKERS = {"mlp.forward", "mlp.gelu", "mlp.fc1", "mlp.fc2"}


def _ncompass(
    *args: str, cwd: Path = REPO, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ncompass", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


def test_demo_trace_contains_every_configured_marker(tmp_path: Path) -> None:
    done = _ncompass(
        "run",
        "--config",
        "configs/attn.yaml",
        "--config",
        "configs/mlp.yaml",
        "--output-dir",
        str(tmp_path),
        "--trace-name",
        "demo",
        "examples/tiny_transformer.py",
        "--layers",
        "2",
        "--new-tokens",
        "2",
    )
    assert done.returncode == 0, done.stderr
    assert "generated 2 tokens" in done.stdout
    assert f"trace written to {tmp_path / 'demo.json'}" in done.stderr
    events = json.loads((tmp_path / "demo.json").read_text())["traceEvents"]
    names = {e["name"] for e in events if e.get("cat") == "user_annotation"}
    assert names >= ATTN_MARKERS | MLP_MARKERS
    assert {"attn.forward[0]", "attn.forward[1]", "block[0]", "block[1]"} <= names


def test_under_an_nvtx_tool_profiler_nvtx_records_every_marker(tmp_path: Path) -> None:
    """`nsys profile ncompass run --profiler nvtx ...`: nsys attaches its NVTX injection library
    through NVTX_INJECTION64_PATH; ncompass' own recorder stands in for it here."""
    if find_compiler() is None:
        pytest.skip("no C compiler (cc, gcc or clang) on PATH: cannot build the NVTX recorder")
    recordings = tmp_path / "nvtx"
    env = {**os.environ, **environment(recordings, library=build_recorder(tmp_path / "cache"))}
    done = _ncompass(
        "run",
        "--profiler",
        "nvtx",
        "--config",
        "configs/attn.yaml",
        "--config",
        "configs/mlp.yaml",
        "examples/tiny_transformer.py",
        "--layers",
        "2",
        "--new-tokens",
        "2",
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert "no NVTX tool is attached" not in done.stderr
    (recording,) = [r for r in read_recordings(recordings) if "ncompass" in r.cmdline]
    assert recording.unmatched_pops == recording.unmatched_ends == recording.dropped_events == 0
    ranges = [r for r in recording.ranges if r.domain == "ncompass"]
    assert all(r.end_ns is not None for r in ranges), "every range was closed"
    names = {r.name for r in ranges}
    assert names >= ATTN_MARKERS | MLP_MARKERS | {"attn.forward[0]", "attn.forward[1]"}
    assert {r.kind for r in ranges} == {"push_pop"}  # no async code in the demo
    decode = next(r for r in ranges if r.name == "decode")
    assert decode.depth == 0 and len({r.tid for r in ranges}) == 1
    for core in (r for r in ranges if r.name == "attn.core"):
        outer = [
            r
            for r in ranges
            if r.name.startswith("attn.forward[")
            and r.start_ns <= core.start_ns
            and core.end_ns <= (r.end_ns or 0)
        ]
        assert len(outer) == 1 and core.depth > outer[0].depth > decode.depth


def test_user_errors_exit_2_with_one_clear_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "version: 1\ntargets:\n  - module: tinyformer.model\n    functions:\n      - qualname: Attention.forwad\n"
    )
    done = _ncompass(
        "run", "--config", str(bad), "--profiler", "none", "examples/tiny_transformer.py"
    )
    assert done.returncode == 2
    assert f"error: {bad}:5: no function 'Attention.forwad'" in done.stderr
    assert "Attention.forward" in done.stderr
    assert "Traceback" not in done.stderr
    missing = _ncompass("run", "--profiler", "none", str(tmp_path / "nope.py"))
    assert missing.returncode == 2 and "no such script" in missing.stderr


def test_spec_validate_migrate_and_rewrite(tmp_path: Path) -> None:
    ok = _ncompass("spec", "validate", "-p", "examples", "configs/attn.yaml", "configs/mlp.yaml")
    assert ok.returncode == 0, ok.stderr
    assert "configs/attn.yaml: 6 markers" in ok.stdout
    old = tmp_path / "old.json"
    old.write_text(
        json.dumps(
            {
                "targets": {
                    "tinyformer.model": {
                        "func_line_range_wrappings": [
                            {
                                "function": "forward",
                                "start_line": 63,
                                "end_line": 64,
                                "context_class": "ncompass.trace.profile.torch.TorchRecordContext",
                                "context_values": [
                                    {"name": "name", "value": "mlp.first_half", "type": "literal"}
                                ],
                            }
                        ]
                    }
                }
            }
        )
    )
    new = tmp_path / "new.yaml"
    migrated = _ncompass("spec", "migrate", str(old), "-o", str(new))
    assert migrated.returncode == 0, migrated.stderr
    assert "version: 1" in new.read_text() and "lines: [63, 64]" in new.read_text()
    again = _ncompass("spec", "migrate", str(old), "-o", str(new))
    assert again.returncode == 2 and "--force" in again.stderr
    ambiguous = _ncompass("spec", "validate", "-p", "examples", str(new))
    assert ambiguous.returncode == 2 and "ambiguous" in ambiguous.stderr
    shown = _ncompass(
        "rewrite", "-p", "examples", "-c", "configs/mlp.yaml", "tinyformer.model", "--diff"
    )
    assert shown.returncode == 0
    assert "+            _ncompass_h3 = _ncompass_enter_3()" in shown.stdout
    assert "#@ncompass" not in shown.stdout


def test_rewrite_finds_a_module_target_by_its_file() -> None:
    by_name = _ncompass("rewrite", "-p", "examples", "-c", "configs/mlp.yaml", "tinyformer.model")
    by_file = _ncompass(
        "rewrite", "-p", "examples", "-c", "configs/mlp.yaml", "examples/tinyformer/model.py"
    )
    assert by_name.returncode == by_file.returncode == 0, by_file.stderr
    assert by_file.stdout == by_name.stdout
    other = _ncompass("rewrite", "-c", "configs/mlp.yaml", "examples/tiny_transformer.py")
    assert other.returncode == 2
    assert "no target named 'examples/tiny_transformer.py'" in other.stderr


def test_version_0_call_markers_in_headers_validate_rewrite_and_run(tmp_path: Path) -> None:
    (tmp_path / "gated.py").write_text(
        "class Model:\n"
        "    def gate(self, x):\n"
        "        return x > 0\n"
        "\n"
        "    def forward(self, x):\n"
        "        if self.gate(x):\n"
        "            return x * 2\n"
        "        while self.gate(x) and x < 5:\n"
        "            x += 1\n"
        "        return x\n"
    )
    (tmp_path / "main.py").write_text("import gated\nprint(gated.Model().forward(1))\n")
    wrapping = {"call_pattern": "self.gate", "context_values": ["gate"]}
    seed = {"class_func_context_wrappings": {"Model": {"forward": {"wrap_calls": [wrapping]}}}}
    (tmp_path / "old.json").write_text(json.dumps({"targets": {"gated": seed}}, indent=2))
    checked = _ncompass("spec", "validate", "-p", str(tmp_path), "old.json", cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr
    assert "gated (" in checked.stdout and "2 markers" in checked.stdout
    shown = _ncompass("rewrite", "-p", str(tmp_path), "-c", "old.json", "gated", cwd=tmp_path)
    assert "if _ncompass_call_1_1(self.gate, x):" in shown.stdout
    assert "while _ncompass_call_2_1(self.gate, x) and x < 5:" in shown.stdout
    done = _ncompass(
        "run", "-c", "old.json", "-o", str(tmp_path), "--trace-name", "t", "main.py", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "2"
    events = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    assert [e["name"] for e in events if e.get("cat") == "user_annotation"] == ["gate"]
