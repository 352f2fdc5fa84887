"""Providers for service tests: the built-in engine, held at a gate or made to fail.

They subclass the real built-in provider, so everything but the one behaviour under test is
the real engine.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from ncompass.analysis.providers import BuiltinProvider, MarkerRequest


class GatedProvider(BuiltinProvider):
    """Summaries wait until ``gate`` is set, so a test can see jobs queued and running."""

    name = "gated"

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.started = threading.Event()

    def summarize(
        self, trace_path: Path, *, top: int = 20, feedback_context: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        self.started.set()
        if not self.gate.wait(timeout=20):
            raise TimeoutError("the test never opened the gate")
        return super().summarize(trace_path, top=top, feedback_context=feedback_context)


class BrokenProvider(BuiltinProvider):
    """Every summary fails with a bug (not a user error)."""

    name = "broken"

    def summarize(
        self, trace_path: Path, *, top: int = 20, feedback_context: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        raise RuntimeError("engine bug")


class ProposingProvider(BuiltinProvider):
    """Proposes the given targets, whatever it is asked."""

    name = "proposing"

    def __init__(self, targets: list[dict[str, Any]] | None) -> None:
        self.targets = targets

    def propose_markers(self, request: MarkerRequest) -> list[dict[str, Any]] | None:
        return self.targets
