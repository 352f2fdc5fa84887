"""On the cluster: how one rank's process treats signals.

A rank is ``python -m ncompass._rank_main run ...`` (see :mod:`ncompass._rank_main`): the same as
``python -m ncompass run ...``, with the signal handling of ``ncompass run``
(:mod:`ncompass.capture.termination`) installed before anything else is imported. SIGTERM (how
``ray job stop`` ends a job) raises KeyboardInterrupt, which ``ncompass run`` answers by
stopping the profiler and writing the trace, instead of dying with the trace lost.

A stop comes more than once: ``ray job stop`` signals the launcher and every rank together, and
the launcher then interrupts its ranks with SIGINT. Only the first signal interrupts; the rank
ignores the rest while it writes its trace. What ends a rank that never finishes is SIGKILL:
the launcher's after its stop timeout, Ray's after the job's stop wait
(:data:`ncompass.remote.job_plan.JOB_STOP_WAIT_S`).
"""

from __future__ import annotations

from ncompass.capture.termination import stop_on_signals


def interrupt_on_sigterm() -> None:
    """Make SIGTERM and SIGINT stop the script as Ctrl-C does, however the job was started.

    Ray's job supervisor starts the job with SIGINT blocked (and the mask is inherited):
    :func:`~ncompass.capture.termination.stop_on_signals` unblocks both.
    """
    stop_on_signals()


__all__ = ["interrupt_on_sigterm"]
