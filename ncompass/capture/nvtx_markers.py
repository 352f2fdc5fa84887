"""Markers under a profiler that records NVTX: ``torch`` markers also emit NVTX ranges.

A spec written for the PyTorch profiler says ``context: torch``. Run under Nsight Systems or the
NVTX recorder (``--profiler nvtx``, ``--profiler nvtx-trace``, ``--nsys``), such markers would
record nothing: no torch profiler runs. They become ``torch+nvtx`` instead, so they show up as
NVTX ranges and still reach a torch profiler that the script starts itself (``capture_trace``).
Custom and ``noop`` contexts are left alone.
"""

from __future__ import annotations

from ncompass.spec.models import CallMarker, FunctionMarker, RangeMarker, RewriteConfig

TORCH_ONLY_CONTEXTS = frozenset({"torch", "ncompass.trace.profile.torch.TorchRecordContext"})
"""Context names that mean the torch backend alone (the seed API's class path included)."""

TORCH_AND_NVTX = "torch+nvtx"


def record_torch_markers_with_nvtx(config: RewriteConfig) -> int:
    """Turn every marker whose context is torch alone into ``torch+nvtx``, in place.

    Args:
        config: A merged spec (as ``ncompass run`` builds it); it is changed in place, so the
            private attributes that remember spec files and lines survive.

    Returns:
        How many markers changed (the spec's default context counts as one when it changed).
    """
    changed = 0
    if config.context in TORCH_ONLY_CONTEXTS:
        config.context = TORCH_AND_NVTX
        changed += 1
    for target in config.targets:
        markers: list[FunctionMarker | CallMarker | RangeMarker] = [
            *target.functions,
            *target.calls,
            *target.ranges,
        ]
        for marker in markers:
            if marker.context in TORCH_ONLY_CONTEXTS:
                marker.context = TORCH_AND_NVTX
                changed += 1
    return changed


__all__ = ["TORCH_AND_NVTX", "TORCH_ONLY_CONTEXTS", "record_torch_markers_with_nvtx"]
