"""On the cluster: how one rank's process treats signals.

A rank is ``python -m ncompass._rank_main run ...`` (see :mod:`ncompass._rank_main`): the same as
``python -m ncompass run ...`` except that SIGTERM (how ``ray job stop`` ends a job) raises
KeyboardInterrupt, which ``ncompass run`` answers by stopping the profiler and writing the trace,
instead of dying with the trace lost.

A stop comes more than once: ``ray job stop`` signals the launcher and every rank together, and
the launcher then interrupts its ranks with SIGINT. Only the first signal interrupts; the rank
ignores the rest while it writes its trace. What ends a rank that never finishes is SIGKILL:
the launcher's after its stop timeout, Ray's after the job's stop wait
(:data:`ncompass.remote.job_plan.JOB_STOP_WAIT_S`).

Standard library only.
"""

from __future__ import annotations

import signal
from types import FrameType


def _interrupt(signum: int, frame: FrameType | None) -> None:
    # the trace is being written from here on: further stop signals must not cut it short
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise KeyboardInterrupt


def interrupt_on_sigterm() -> None:
    """Turn SIGTERM (and SIGINT, however the job was started) into KeyboardInterrupt."""
    # Ray's job supervisor starts the job with SIGINT blocked (and the mask is inherited):
    # unblock it and restore Python's handler, so the launcher's SIGINT reaches the script.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)


__all__ = ["interrupt_on_sigterm"]
