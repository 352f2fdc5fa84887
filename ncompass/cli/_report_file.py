"""Write a report a command produced (HTML, YAML) beside, never over, what it read."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from ncompass._files import write_atomic
from ncompass.errors import NcompassError
from ncompass.overwrite_guard import refuse_overwriting_inputs, refuse_replacing, unwritable_reason


def write_report(
    path: Path, text: str, inputs: Iterable[str | os.PathLike[str]], *, replace: bool = True
) -> None:
    """Write ``text`` to ``path`` whole or not at all, never over one of ``inputs``.

    Args:
        path: The report file; a symlink there is replaced, never written through.
        text: Its content.
        inputs: The files the command read.
        replace: Replace a file already at ``path`` (``--force-overwrite``).

    Raises:
        OutputIsInputError: ``path`` is one of ``inputs``; it was left unchanged.
        OutputExistsError: ``path`` exists and ``replace`` is false; it was left unchanged.
        NcompassError: the file cannot be written (naming it and why).
    """
    refuse_overwriting_inputs(path, inputs)
    refuse_replacing(path, replace=replace)
    try:
        write_atomic(path, text)
    except OSError as error:
        raise NcompassError(f"{path}: cannot write ({unwritable_reason(path, error)})") from None
