"""On the cluster: how one rank's process treats signals.

A rank is ``python -m ncompass._rank_main run ...`` (see :mod:`ncompass._rank_main`): the same as
``python -m ncompass run ...`` except that SIGTERM (how ``ray job stop`` ends a job) raises
KeyboardInterrupt, which ``ncompass run`` answers by stopping the profiler and writing the trace,
instead of dying with the trace lost.

Standard library only.
"""

from __future__ import annotations

import signal
from types import FrameType


def _interrupt(signum: int, frame: FrameType | None) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends the rank for good
    raise KeyboardInterrupt


def interrupt_on_sigterm() -> None:
    """Turn SIGTERM (and SIGINT, however the job was started) into KeyboardInterrupt."""
    # Ray's job supervisor starts the job with SIGINT blocked (and the mask is inherited):
    # unblock it and restore Python's handler, so the launcher's SIGINT reaches the script.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _interrupt)


__all__ = ["interrupt_on_sigterm"]
