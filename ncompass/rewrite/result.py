"""Rewrite one module end to end: plan, transform, generate source, compile."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import CodeType
from typing import Any

from ncompass.rewrite.collector import collector_paused
from ncompass.rewrite.linemap import (
    LineMap,
    build_line_map,
    compile_with_original_lines,
    strip_tags,
)
from ncompass.rewrite.plan import MarkerSite, RewritePlan, plan_rewrite
from ncompass.rewrite.source import SourceModule, read_source
from ncompass.rewrite.transform import prologue_code, transform
from ncompass.spec.models import RewriteConfig, TargetSpec


@dataclass(eq=False)
class RewriteResult:
    """A rewritten module.

    Attributes:
        source: The original source.
        plan: What was placed where.
        code: The rewritten source, with ``#@ncompass:N`` line tags.
    """

    source: SourceModule
    plan: RewritePlan
    code: str
    _line_map: LineMap | None = field(default=None, repr=False)

    @property
    def changed(self) -> bool:
        """Whether anything was rewritten."""
        return not self.plan.empty

    @property
    def sites(self) -> list[MarkerSite]:
        """The marker sites placed in the module."""
        return self.plan.sites

    @property
    def readable_code(self) -> str:
        """The rewritten source without line tags, as ``ncompass rewrite`` shows it."""
        return strip_tags(self.code)

    @property
    def line_map(self) -> LineMap:
        """Rewritten line → original line."""
        if self._line_map is None:
            self._line_map = build_line_map(self.code, self.source)
        return self._line_map

    @collector_paused
    def compile(self) -> CodeType:
        """Compile with the original file name and line numbers."""
        if not self.changed:
            return compile(self.source.text, self.source.filename, "exec", dont_inherit=True)
        return compile_with_original_lines(self.code, self.source, self.line_map)

    def prologue(self) -> list[str]:
        """The statements that bind the module's marker helpers (for in-place updates)."""
        return prologue_code(self.plan)

    def manifest(self) -> list[dict[str, Any]]:
        """One JSON-ready entry per marker site (marker name → source location)."""
        return [site.to_dict() for site in self.plan.sites]

    def diff(self, context: int = 3) -> str:
        """A unified diff from the original to the readable rewritten source."""
        name = self.source.filename
        return "".join(
            difflib.unified_diff(
                self.source.text.splitlines(keepends=True),
                self.readable_code.splitlines(keepends=True),
                fromfile=name,
                tofile=f"{name} (ncompass)",
                n=context,
            )
        )


@collector_paused
def rewrite_module(
    source: SourceModule, targets: Sequence[TargetSpec], config: RewriteConfig
) -> RewriteResult:
    """Rewrite ``source`` for the markers of ``targets``.

    Raises:
        SpecError: a marker does not match the code (file and line of the spec).
        RewriteError: the source cannot be parsed or rewritten.
    """
    plan = plan_rewrite(source, targets, config)
    if plan.empty:
        return RewriteResult(source, plan, source.text)
    return RewriteResult(source, plan, transform(plan).code)


def rewrite_path(
    path: str | Path, targets: Sequence[TargetSpec], config: RewriteConfig, label: str | None = None
) -> RewriteResult:
    """Read, parse and rewrite a file (see :func:`rewrite_module`)."""
    return rewrite_module(read_source(path, label), targets, config)


__all__ = ["RewriteResult", "rewrite_module", "rewrite_path"]
