"""Several specs merge into one without changing what any marker does."""

from __future__ import annotations

from pathlib import Path

from ncompass.spec.merge import merge_specs
from ncompass.spec.models import RewriteConfig


def test_merge_keeps_each_specs_context_and_source(tmp_path: Path) -> None:
    a = tmp_path / "a.yaml"
    a.write_text(
        "version: 1\ncontext: nvtx\ntargets:\n  - module: m\n    functions:\n      - qualname: f\n"
    )
    b = tmp_path / "b.yaml"
    b.write_text(
        "version: 1\nname: b\ntargets:\n  - module: n\n    functions:\n      - qualname: g\n"
    )
    merged = merge_specs([RewriteConfig.from_yaml(a), RewriteConfig.from_yaml(b)], "torch")
    assert merged.context == "torch"
    first, second = merged.targets
    assert first.functions[0].context == "nvtx"  # a's own default, written onto its marker
    assert second.functions[0].context is None  # b chose none: the profiler's default applies
    assert first.spec_path == a.resolve() and second.spec_path == b.resolve()
    assert first.functions[0].line == 6
    assert first.functions[0].context_line == 2  # a bad context is reported at a's `context:`
    assert second.functions[0].context_line is None
    assert merged.name == "b"
