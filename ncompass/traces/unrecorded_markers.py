"""Markers that fired but that the run's profiler could not record: ``context: nvtx`` under
``--profiler torch``.

An NVTX range reaches Nsight Systems or the ncompass NVTX recorder, never the PyTorch
profiler, so such a trace shows none of those markers. ``ncompass run`` warns at its end, and
``ncompass summarize`` reads the run's sidecar (``NAME.ncompass.json`` beside the trace) to say
why the trace holds fewer marker ranges than the spec asked for, and how to record them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from typing_extensions import TypedDict

from ncompass.run_files import read_sidecar_document

NVTX_ONLY_CONTEXTS = frozenset({"nvtx", "ncompass.trace.profile.nvtx.NvtxContext"})
"""Context names that mean an NVTX range alone (the seed API's class path included)."""

PROFILERS_WITHOUT_NVTX = frozenset({"torch"})
"""``ncompass run --profiler`` values whose trace holds no NVTX ranges (without ``--nsys``)."""


class UnrecordedMarkers(TypedDict):
    """Markers placed with a context the run's profiler does not record."""

    profiler: str
    context: str
    markers: list[str]


def unrecorded_markers(
    profiler: str, markers: Iterable[Mapping[str, Any]], *, nsys: bool = False
) -> UnrecordedMarkers | None:
    """The NVTX-only markers among ``markers`` when ``profiler`` does not record NVTX.

    Args:
        profiler: The run's ``--profiler``.
        markers: The markers placed (the sidecar's ``markers``: ``name``, ``context``).
        nsys: The run was under Nsight Systems, which records NVTX.
    """
    if nsys or profiler not in PROFILERS_WITHOUT_NVTX:
        return None
    names = [str(m.get("name")) for m in markers if m.get("context") in NVTX_ONLY_CONTEXTS]
    if not names:
        return None
    return {"profiler": profiler, "context": "nvtx", "markers": list(dict.fromkeys(names))}


def sidecar_unrecorded_markers(trace_path: str | Path) -> UnrecordedMarkers | None:
    """:func:`unrecorded_markers` of the run that wrote ``trace_path``, from its sidecar (None
    without a readable sidecar)."""
    sidecar = read_sidecar_document(Path(trace_path))
    if sidecar is None or not isinstance(sidecar.get("markers"), list):
        return None
    markers = [marker for marker in sidecar["markers"] if isinstance(marker, dict)]
    return unrecorded_markers(str(sidecar.get("profiler")), markers, nsys="nsys" in sidecar)


def unrecorded_markers_advice(found: UnrecordedMarkers) -> str:
    """One sentence: which markers went where, and how to record them."""
    names = found["markers"]
    shown = ", ".join(f"`{name}`" for name in names[:3]) + (", ..." if len(names) > 3 else "")
    one = len(names) == 1
    return (
        f"{len(names)} marker{'' if one else 's'} ({shown}) "
        f"{'uses' if one else 'use'} `context: {found['context']}`: "
        f"{'its' if one else 'their'} ranges went to NVTX, which "
        f"`--profiler {found['profiler']}` does not record. To see them, run with "
        f"`--profiler nvtx-trace` or `--nsys`, or give {'it' if one else 'them'} "
        "`context: torch+nvtx`."
    )


__all__ = [
    "NVTX_ONLY_CONTEXTS",
    "PROFILERS_WITHOUT_NVTX",
    "UnrecordedMarkers",
    "sidecar_unrecorded_markers",
    "unrecorded_markers",
    "unrecorded_markers_advice",
]
