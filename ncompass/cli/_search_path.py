"""Where commands that read targets without running them look for modules."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

SEARCH_PATH_HELP = "Folder to search for target modules (like PYTHONPATH); repeatable."


def extend_search_path(paths: Sequence[str]) -> None:
    """Search ``paths`` and the current folder first, as ``python -m`` would."""
    for folder in [*reversed(paths), os.getcwd()]:
        resolved = os.path.abspath(folder)
        if resolved not in sys.path:
            sys.path.insert(0, resolved)
