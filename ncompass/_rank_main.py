"""``python -m ncompass._rank_main run ...``: the command line of one rank of a remote job.

:mod:`ncompass.remote.ranks` starts each rank with it. It is ``python -m ncompass`` (see
:mod:`ncompass.__main__`) with the rank's signal handling installed first, so that ``ray job
stop`` still leaves each rank's trace written. It sits beside ``__main__``, above ``cli`` and
``remote``, so that neither of those imports the other.
"""

from __future__ import annotations

import sys

from ncompass.cli import main as cli_main
from ncompass.remote.rank import interrupt_on_sigterm


def main() -> None:
    """Run the ncompass command line with SIGTERM turned into KeyboardInterrupt."""
    interrupt_on_sigterm()
    cli_main(sys.argv[1:])


if __name__ == "__main__":
    main()
