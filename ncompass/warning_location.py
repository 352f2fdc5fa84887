"""Where a warning should point: the user's line, past ncompass's own frames."""

from __future__ import annotations

import sys
from types import FrameType


def stacklevel_outside(package: str) -> int:
    """The ``warnings.warn`` stacklevel, for a warning issued by the caller of this function,
    of the first frame whose module is not ``package`` or inside it."""
    level = 1  # stacklevel 1: the function that calls warnings.warn
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and _inside(str(frame.f_globals.get("__name__", "")), package):
        frame, level = frame.f_back, level + 1
    return level


def _inside(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


__all__ = ["stacklevel_outside"]
