"""Where the remote steps (submit, follow, fetch) tell what happens: the ``Reporter`` protocol."""

from __future__ import annotations

from typing import Protocol

from ncompass.remote.fetch import ChunkProgress


class Reporter(Protocol):
    """Where a submission tells what happens."""

    def status(self, message: str) -> None:
        """One line of ncompass's own (the CLI prints it on stderr)."""

    def output(self, text: str) -> None:
        """The job's output, as it comes (the CLI prints it on stdout)."""

    def progress(self, event: ChunkProgress) -> None:
        """One chunk of a fetch done."""


__all__ = ["Reporter"]
