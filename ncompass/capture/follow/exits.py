"""Why a followed process left no trace, from its exit code, in the words the run's warnings use."""

from __future__ import annotations

import signal


def why_no_trace(code: int | None) -> str:
    """``it was killed by SIGKILL``, ``it was still running when the run ended``, ..."""
    if code is None:
        return "it was still running when the run ended"
    if code < 0:
        try:
            return f"it was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"it was killed by signal {-code}"
    return f"it exited with code {code} before writing it (os._exit?)"


__all__ = ["why_no_trace"]
