"""Check a spec against the code it targets, without running or importing that code."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path

from ncompass.importer.lookup import file_source, module_source
from ncompass.importer.targets import unmet_requirement
from ncompass.rewrite.plan import MarkerSite, plan_rewrite
from ncompass.rewrite.source import read_source
from ncompass.spec.models import CallMarker, FunctionMarker, RangeMarker, RewriteConfig, TargetSpec


@dataclass
class TargetCheck:
    """The outcome for one target: its markers as placed, or why it was skipped."""

    target: TargetSpec
    source: Path | None
    sites: list[MarkerSite] = field(default_factory=list)
    replacements: int = 0
    skipped: str | None = None
    notes: list[str] = field(default_factory=list)


def validate_spec(config: RewriteConfig) -> list[TargetCheck]:
    """Resolve every marker of ``config`` against its target's current source.

    Returns:
        One check per target (skipped ones say why: an unmet ``requires:``).

    Raises:
        SpecError: a target cannot be found, a marker matches nothing or breaks a rule
            (naming the spec file and line).
        ContextError: a marker's context cannot be used.
    """
    from ncompass.runtime.sites import resolve_context

    for context in _contexts(config):
        resolve_context(context)
    checks: list[TargetCheck] = []
    for target in config.targets:
        reason = unmet_requirement(target.requires)
        if reason is not None:
            checks.append(TargetCheck(target, None, skipped=reason))
            continue
        path = module_source(target.module) if target.module else file_source(target.file or "")
        source = read_source(path, target.module or path.name)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            plan = plan_rewrite(source, [target], config)
        check = TargetCheck(target, path, list(plan.sites))
        check.replacements = len(plan.definition_swaps) + len(plan.reference_swaps)
        check.notes = [str(w.message) for w in caught]
        checks.append(check)
    return checks


def _contexts(config: RewriteConfig) -> set[str]:
    contexts = {config.context}
    for target in config.targets:
        markers: list[FunctionMarker | CallMarker | RangeMarker] = [
            *target.functions,
            *target.calls,
            *target.ranges,
        ]
        contexts.update(marker.context for marker in markers if marker.context)
    return contexts


__all__ = ["TargetCheck", "validate_spec"]
