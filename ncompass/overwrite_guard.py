"""No command writes over one of its inputs: the one check every writer calls first.

Two paths name the same file when they resolve to the same place (symlinks, ``./a`` and ``a``,
``..`` segments) or, when both exist, are the same inode (hard links, bind mounts).

Nor does a command replace a file that is already there unless asked to
(:func:`refuse_replacing`, ``--force-overwrite``, as ``ncompass run`` does for ``--trace-name``);
:func:`unwritable_reason` says why an output cannot be created in words the user can act on.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from ncompass.errors import NcompassError


class OutputIsInputError(NcompassError):
    """A command was asked to write its output over one of its own inputs."""


class OutputExistsError(NcompassError):
    """An output file exists, and replacing it was not asked for."""


def same_file(first: str | os.PathLike[str], second: str | os.PathLike[str]) -> bool:
    """Whether two paths name the same file (see the module docstring)."""
    if Path(first).resolve() == Path(second).resolve():
        return True
    try:
        return os.path.samefile(first, second)
    except OSError:  # one of them does not exist (yet): different files
        return False


def refuse_overwriting_inputs(
    output: str | os.PathLike[str],
    inputs: Iterable[str | os.PathLike[str]],
) -> None:
    """Raise before ``output`` is written if it is one of ``inputs``.

    Args:
        output: The file about to be written.
        inputs: The files the command reads.

    Raises:
        OutputIsInputError: naming the file; the input is left as it was.
    """
    for source in inputs:
        if same_file(output, source):
            shown = f"{output}" if str(output) == str(source) else f"{output} (it is {source})"
            raise OutputIsInputError(
                f"{shown} is an input of this command and would be overwritten; "
                "choose another output file (the input was left unchanged)"
            )


def refuse_replacing(output: str | os.PathLike[str], *, replace: bool) -> None:
    """Raise before anything is read if ``output`` exists and ``replace`` was not asked for.

    A symlink counts as existing (dangling or not): writers rename a new file over the link,
    never write through it, so what it points at is never touched either way.

    Raises:
        OutputExistsError: naming the file; it was left unchanged.
    """
    if not replace and os.path.lexists(output):
        raise OutputExistsError(
            f"{output} already exists and was left unchanged; choose another output file, "
            "or pass --force-overwrite to replace it"
        )


def unwritable_reason(output: str | os.PathLike[str], error: OSError) -> str:
    """Why ``output`` could not be created, from the ``error`` creating it raised.

    An existing file where a folder of the path should be gets named (``-o notes.txt/out.json``
    fails with "File exists" or "Not a directory", which names neither).
    """
    for parent in Path(output).parents:
        if os.path.lexists(parent):
            if not parent.is_dir():
                return f"{parent} is a file, not a folder"
            break
    return error.strerror or str(error)


__all__ = [
    "OutputExistsError",
    "OutputIsInputError",
    "refuse_overwriting_inputs",
    "refuse_replacing",
    "same_file",
    "unwritable_reason",
]
