"""The built-in engine: offline, deterministic, the numbers every other provider is checked by."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ncompass.analysis.providers.base import MarkerRequest
from ncompass.analysis.summary_types import Summary


class BuiltinProvider:
    """Summaries by :func:`ncompass.analysis.summarize_trace`; markers by the session planner."""

    name = "builtin"

    def summarize(
        self, trace_path: Path, *, top: int = 20, feedback_context: dict[str, Any] | None = None
    ) -> Summary:
        """See :meth:`AnalysisProvider.summarize`."""
        from ncompass.analysis.summary import summarize_trace

        return summarize_trace(trace_path, top=top, feedback_context=feedback_context)

    def filter(
        self,
        trace_path: Path,
        output_path: Path,
        *,
        include_cuda_kernels: bool = True,
        include_direct_children: bool = False,
        min_duration_us: float = 0.0,
    ) -> Path:
        """See :meth:`AnalysisProvider.filter`."""
        from ncompass.traces import filter_trace

        return Path(
            filter_trace(
                trace_path,
                output_path,
                include_cuda_kernels=include_cuda_kernels,
                include_direct_children=include_direct_children,
                min_duration_us=min_duration_us,
            )
        )

    def propose_markers(self, request: MarkerRequest) -> list[dict[str, Any]] | None:
        """The built-in planner (in the session) proposes; nothing to add here."""
        return None


__all__ = ["BuiltinProvider"]
