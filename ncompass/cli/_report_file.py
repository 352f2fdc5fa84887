"""Write a report a command produced (HTML, YAML) beside, never over, what it read."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from ncompass._files import write_atomic
from ncompass.errors import NcompassError
from ncompass.overwrite_guard import refuse_overwriting_inputs


def write_report(path: Path, text: str, inputs: Iterable[str | os.PathLike[str]]) -> None:
    """Write ``text`` to ``path`` whole or not at all, never over one of ``inputs``.

    Raises:
        OutputIsInputError: ``path`` is one of ``inputs``; it was left unchanged.
        NcompassError: the file cannot be written (naming it and why).
    """
    refuse_overwriting_inputs(path, inputs)
    try:
        write_atomic(path, text)
    except OSError as error:
        raise NcompassError(f"{path}: cannot write ({error.strerror})") from None
