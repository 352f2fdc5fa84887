"""Merge several specs (``ncompass run --config a.yaml --config b.yaml``) into one."""

from __future__ import annotations

from collections.abc import Sequence

from ncompass.spec.models import CallMarker, FunctionMarker, RangeMarker, RewriteConfig, TargetSpec


def merge_specs(
    configs: Sequence[RewriteConfig], default_context: str | None = None
) -> RewriteConfig:
    """One spec holding every target of ``configs``.

    Each spec's own ``context:`` (when it sets one) is written onto its markers that do not
    choose a context, so merging never changes which context a marker uses. Markers of specs
    that set no context get ``default_context`` (the profiler's), else the usual default.

    Args:
        configs: The specs, in command-line order.
        default_context: The context for markers no spec chose one for.
    """
    targets: list[TargetSpec] = []
    names: list[str] = []
    analysis_targets: list[str] = []
    full_trace = False
    for config in configs:
        explicit = "context" in config.model_fields_set
        for target in config.targets:
            copy = target.model_copy(deep=True)
            copy._spec_path = target.spec_path or config.path
            _copy_lines(target, copy)
            if explicit:
                markers: list[FunctionMarker | CallMarker | RangeMarker] = [
                    *copy.functions,
                    *copy.calls,
                    *copy.ranges,
                ]
                for marker in markers:
                    if marker.context is None:
                        marker.context = config.context
                        marker._context_line = config.context_line
            targets.append(copy)
        if config.name:
            names.append(config.name)
        analysis_targets.extend(t for t in config.ai_analysis_targets if t not in analysis_targets)
        full_trace = full_trace or config.full_trace_mode
    fields: dict[str, object] = {
        "targets": [],
        "ai_analysis_targets": analysis_targets,
        "full_trace_mode": full_trace,
    }
    if names:
        fields["name"] = " + ".join(names)
    if default_context is not None:
        fields["context"] = default_context
    merged = RewriteConfig.model_validate(fields)
    merged.targets = targets
    if len(configs) == 1:
        merged._path = configs[0].path
    return merged


def _copy_lines(source: TargetSpec, copy: TargetSpec) -> None:
    """``model_copy`` drops private attributes of nested models: carry the spec lines over."""
    copy._line = source.line
    for kind in ("functions", "calls", "ranges", "replace"):
        for original, copied in zip(getattr(source, kind), getattr(copy, kind), strict=True):
            copied._line = original.line
            copied._context_line = getattr(original, "_context_line", None)


__all__ = ["merge_specs"]
