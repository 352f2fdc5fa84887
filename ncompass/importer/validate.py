"""Check a spec against the code it targets, without running or importing that code.

Targets are found and read as files; custom context classes are checked from their module's
source (:mod:`ncompass.importer.context_source`).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path

from ncompass.errors import SpecError
from ncompass.importer.contexts import check_contexts
from ncompass.importer.lookup import file_source, module_source
from ncompass.importer.targets import unmet_requirement
from ncompass.rewrite.plan import MarkerSite, plan_rewrite
from ncompass.rewrite.source import read_source
from ncompass.spec.models import RewriteConfig, TargetSpec


@dataclass
class TargetCheck:
    """The outcome for one target: its markers as placed, or why it was skipped."""

    target: TargetSpec
    source: Path | None
    sites: list[MarkerSite] = field(default_factory=list)
    replacements: int = 0
    skipped: str | None = None
    notes: list[str] = field(default_factory=list)


def validate_spec(
    config: RewriteConfig, context_notes: list[str] | None = None
) -> list[TargetCheck]:
    """Resolve every marker of ``config`` against its target's current source.

    Nothing is imported or run: neither the targets nor the modules of custom contexts.

    Args:
        config: The spec.
        context_notes: When given, receives a note for each custom context that cannot be
            checked without importing its module (and why).

    Returns:
        One check per target (skipped ones say why: an unmet ``requires:``).

    Raises:
        SpecError: a target cannot be found, a marker matches nothing or breaks a rule
            (naming the spec file and line).
    """
    notes = check_contexts(config, read_classes=True)
    if context_notes is not None:
        context_notes.extend(notes)
    checks: list[TargetCheck] = []
    for target in config.targets:
        reason = unmet_requirement(target.requires)
        if reason is not None:
            checks.append(TargetCheck(target, None, skipped=reason))
            continue
        path = _source_of(target, config)
        source = read_source(path, target.module or path.name)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            plan = plan_rewrite(source, [target], config)
        check = TargetCheck(target, path, list(plan.sites))
        check.replacements = len(plan.definition_swaps) + len(plan.reference_swaps)
        check.notes = [str(w.message) for w in caught]
        checks.append(check)
    return checks


def _source_of(target: TargetSpec, config: RewriteConfig) -> Path:
    """The target's source file; a missing one is reported at the target's spec line."""
    try:
        return module_source(target.module) if target.module else file_source(target.file or "")
    except SpecError as error:
        raise SpecError(error.detail, target.spec_path or config.path, target.line) from None


__all__ = ["TargetCheck", "validate_spec"]
