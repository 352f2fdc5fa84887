"""On the cluster: how one rank's process treats signals.

A rank is ``python -m ncompass._rank_main run ...`` (see :mod:`ncompass._rank_main`): the same as
``python -m ncompass run ...``, with the signal handling of ``ncompass run``
(:mod:`ncompass.capture.termination`) installed before anything else is imported. SIGTERM (how
``ray job stop`` ends a job) and SIGINT (how the launcher stops the other ranks when one fails)
stop the script as Ctrl-C does, and the rank writes its trace instead of dying with it lost.
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
