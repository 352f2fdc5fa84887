"""On the cluster: one rank, ``python -m ncompass.remote.rank run ...``.

The same as ``python -m ncompass run ...`` except that SIGTERM (how ``ray job stop`` ends a job)
raises KeyboardInterrupt, which ``ncompass run`` answers by stopping the profiler and writing
the trace, instead of dying with the trace lost.
"""

from __future__ import annotations

import signal
import sys
from types import FrameType


def _interrupt(signum: int, frame: FrameType | None) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends the rank for good
    raise KeyboardInterrupt


def main() -> None:
    """Run the ncompass command line with SIGTERM turned into KeyboardInterrupt."""
    # Ray's job supervisor starts the job with SIGINT blocked (and the mask is inherited):
    # unblock it and restore Python's handler, so the launcher's SIGINT reaches the script.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _interrupt)
    from ncompass.cli import main as cli_main

    cli_main(sys.argv[1:])


if __name__ == "__main__":
    main()
