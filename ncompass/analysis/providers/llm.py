"""An LLM writes the narrative and may propose markers; another provider keeps the numbers.

Any OpenAI-compatible chat endpoint works (a hosted API, vLLM, Ollama, llama.cpp), configured by
``NCOMPASS_LLM_URL``, ``NCOMPASS_LLM_MODEL`` and optionally ``NCOMPASS_LLM_API_KEY`` and
``NCOMPASS_LLM_TIMEOUT_S``. What the model writes is checked before it is used: the narrative
against the summary's names and numbers, proposed markers against the spec schema and the
source they target. Any failure (endpoint down or slow, no JSON, a check fails) leaves the
wrapped provider's answer in place, with a warning that says why.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ncompass.analysis.providers._chat import (
    LLM_API_KEY_ENV,
    LLM_MODEL_ENV,
    LLM_TIMEOUT_ENV,
    LLM_URL_ENV,
    ChatClient,
    InvalidAnswer,
    LLMSettings,
)
from ncompass.analysis.providers._http import HttpFailure
from ncompass.analysis.providers._narrative import InvalidNarrative, check_narrative
from ncompass.analysis.providers._prompts import (
    MARKERS_SYSTEM,
    NARRATIVE_SYSTEM,
    markers_prompt,
    narrative_prompt,
    summary_digest,
)
from ncompass.analysis.providers._proposals import InvalidProposal, check_proposal
from ncompass.analysis.providers.base import AnalysisProvider, MarkerRequest
from ncompass.analysis.providers.builtin import BuiltinProvider
from ncompass.analysis.providers.fallback import warn_fallback
from ncompass.analysis.summary_types import Summary

_FAILURES = (HttpFailure, InvalidAnswer, InvalidNarrative, InvalidProposal)


class LLMProvider:
    """The wrapped provider's summary plus a checked narrative; checked marker proposals.

    Args:
        settings: The chat endpoint and model (see :meth:`LLMSettings.from_env`).
        wrapped: Computes the numbers and answers whenever the model cannot (default: the
            built-in engine).

    Attributes:
        last_failure: Why the last narrative or proposal was not used, or None.
    """

    def __init__(self, settings: LLMSettings, wrapped: AnalysisProvider | None = None) -> None:
        self.settings = settings
        self.wrapped: AnalysisProvider = wrapped if wrapped is not None else BuiltinProvider()
        self.name = f"llm {settings.model} + {self.wrapped.name}"
        self.last_failure: str | None = None
        self._chat = ChatClient(settings)

    def summarize(
        self, trace_path: Path, *, top: int = 20, feedback_context: dict[str, Any] | None = None
    ) -> Summary:
        """The wrapped summary with a ``## Narrative`` section added to its markdown and
        ``structured["narrative"]`` (``model``, ``text``); the numbers are untouched."""
        summary = self.wrapped.summarize(trace_path, top=top, feedback_context=feedback_context)
        structured = summary["structured"]
        digest = summary_digest(structured)
        try:
            answer = self._chat.ask_json(
                NARRATIVE_SYSTEM, narrative_prompt(digest, feedback_context)
            )
            narrative = check_narrative(answer.get("narrative"), structured, digest)
        except _FAILURES as failure:
            self._fall_back(f"narrate {Path(trace_path).name}", failure)
            return summary
        self.last_failure = None
        section = (
            f"## Narrative (written by the LLM `{self.settings.model}`; its names and numbers "
            "were checked against the tables above)\n\n" + narrative + "\n"
        )
        return {
            "markdown": summary["markdown"].rstrip("\n") + "\n\n" + section,
            "structured": {
                **structured,
                "narrative": {"model": self.settings.model, "text": narrative},
            },
        }

    def filter(
        self,
        trace_path: Path,
        output_path: Path,
        *,
        include_cuda_kernels: bool = True,
        include_direct_children: bool = False,
        min_duration_us: float = 0.0,
    ) -> Path:
        """Filtering has nothing to narrate: the wrapped provider does it."""
        return self.wrapped.filter(
            trace_path,
            output_path,
            include_cuda_kernels=include_cuda_kernels,
            include_direct_children=include_direct_children,
            min_duration_us=min_duration_us,
        )

    def propose_markers(self, request: MarkerRequest) -> list[dict[str, Any]] | None:
        """The model's markers once checked (schema, modules shown, lines, no code swaps);
        the wrapped provider's proposal when it has none or they fail a check."""
        try:
            answer = self._chat.ask_json(MARKERS_SYSTEM, markers_prompt(request))
            targets = check_proposal(answer.get("targets"), request)
        except _FAILURES as failure:
            self._fall_back("propose markers", failure)
            return self.wrapped.propose_markers(request)
        self.last_failure = None
        return targets or self.wrapped.propose_markers(request)

    def _fall_back(self, what: str, failure: Exception) -> None:
        reason = failure.reason if isinstance(failure, HttpFailure) else str(failure)
        if isinstance(failure, HttpFailure) and failure.unreachable:
            reason += f" (check {LLM_URL_ENV})"
        self.last_failure = reason
        where = f"LLM {self.settings.model} at {self.settings.base_url}"
        warn_fallback(where, what, reason, self.wrapped.name)


__all__ = [
    "LLM_API_KEY_ENV",
    "LLM_MODEL_ENV",
    "LLM_TIMEOUT_ENV",
    "LLM_URL_ENV",
    "LLMProvider",
    "LLMSettings",
]
