"""The protocol every analysis provider implements."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ncompass.analysis.summary_types import Summary
from ncompass.importer.registry import MarkerRecord


@dataclass
class MarkerRequest:
    """What a provider is told when asked to propose the next markers.

    Attributes:
        spec: The current spec (version 1 dict).
        summary: The structured summary of the last trace (a :class:`StructuredSummary` from
            this process; from a client of the service, only a JSON object), or empty.
        markers: The manifest of the markers in that trace (name → module, function, lines).
        feedback: The user's question: ``feedback_text``, ``target_module``, ``start_line``,
            ``end_line`` (None when the session drills on its own).
        sources: Source of the modules concerned: module name → ``{"path", "sha256", "text"}``.
    """

    spec: dict[str, Any]
    summary: Mapping[str, Any]
    markers: list[MarkerRecord]
    feedback: dict[str, Any] | None = None
    sources: dict[str, dict[str, str]] = field(default_factory=dict)


class AnalysisProvider(Protocol):
    """Summarizes traces (the seed's ``markdown`` + ``structured`` shape) and filters them.

    Attributes:
        name: Shown in summaries and session history ("builtin", "remote http://...", ...).
    """

    name: str

    def summarize(
        self, trace_path: Path, *, top: int = 20, feedback_context: dict[str, Any] | None = None
    ) -> Summary:
        """The trace's summary, ``{"markdown", "structured"}`` (see :class:`Summary`)."""

    def filter(
        self,
        trace_path: Path,
        output_path: Path,
        *,
        include_cuda_kernels: bool = True,
        include_direct_children: bool = False,
        min_duration_us: float = 0.0,
    ) -> Path:
        """Write the markers (and what they launched) of ``trace_path`` to ``output_path``."""

    def propose_markers(self, request: MarkerRequest) -> list[dict[str, Any]] | None:
        """Version 1 target dicts with the next markers, or None to leave it to the built-in
        planner. Proposals are validated against the code before use."""


__all__ = ["AnalysisProvider", "MarkerRequest"]
