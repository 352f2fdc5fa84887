"""Which Python runs a job on the cluster, and what to say when it is the wrong one.

A job's entrypoint is ``<python> -m ncompass.remote.launch ...``, run by the Ray node's shell
(``<python>`` is the ``python`` setting, ``python`` by default). A cluster started outside the
user's virtualenv gives that shell another ``PATH``: ``python`` is missing (the shell exits 127)
or is another Python, without ncompass's dependencies. Both are explained here with the likely
cause and the fix.

Standard library only: the launcher imports this before it knows what the cluster's Python has.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

COMMAND_NOT_FOUND = 127
_LAUNCH = "ncompass.remote.launch"
_RAY_LIBRARY = re.compile(r"(/\S+)/lib/(python3\.\d+)/(?:site|dist)-packages/ray/_raylet\.so$")
_SETTINGS = "~/.config/ncompass/remote.yaml on the machine you submit from"
_SOME_VIRTUALENV = "/path/to/that/virtualenv/bin/python"
_CAUSE = (
    "the cluster was probably started (`ray start`) outside the virtualenv that has Ray and "
    "ncompass's dependencies, so the job's shell looks elsewhere"
)


def ray_python(pid: int | None = None, generations: int = 4) -> str | None:
    """The Python that runs Ray on this node, or None when it cannot be told (not Linux).

    Ray's job supervisor, an ancestor of the job, has Ray's ``_raylet.so`` mapped from the
    ``site-packages`` of its Python: ``PREFIX/lib/pythonX.Y/site-packages/ray/_raylet.so`` gives
    ``PREFIX/bin/pythonX.Y`` (a virtualenv's own Python, not the one it was made from).
    """
    import os

    process = os.getppid() if pid is None else pid
    for _ in range(generations):
        found = _python_of_ray_in(process)
        if found is not None:
            return found
        process = _parent_of(process)
        if process <= 1:
            return None
    return None


def wrong_python_hint(executable: str, ray_executable: str | None) -> str:
    """Why a Python that lacks ncompass's dependencies (and Ray) runs the job, and the fix."""
    where = f" (Ray runs on {ray_executable})" if ray_executable else ""
    return (
        f"{executable} cannot import Ray either, so it is not the Python the cluster runs "
        f"on{where}: {_CAUSE}. Set `python: {ray_executable or _SOME_VIRTUALENV}` in "
        f"{_SETTINGS}, or restart the cluster with that virtualenv activated"
    )


def entrypoint_python(entrypoint: str) -> str | None:
    """The Python command of an ncompass job's entrypoint (what precedes ``-m ...launch``)."""
    try:
        words = shlex.split(entrypoint)
    except ValueError:
        return None
    for index in range(len(words) - 1):
        if words[index] == "-m" and words[index + 1] == _LAUNCH and index > 0:
            return shlex.join(words[:index])
    return None


def python_not_found(exit_code: int | None, entrypoint: str, logs: str) -> str | None:
    """The explanation of a job whose shell did not find its Python, else None.

    Args:
        exit_code: The entrypoint's exit code (the shell says 127 for a missing command).
        entrypoint: The job's command.
        logs: The job's output, where the shell said what it did not find.
    """
    python = entrypoint_python(entrypoint)
    if exit_code != COMMAND_NOT_FOUND or python is None:
        return None
    command = shlex.split(python)[0]
    said = re.compile(rf"{re.escape(command)}: (?:\d+: )?(?:command )?not found|No such file")
    if not any(command in line and said.search(line) for line in logs.splitlines()):
        return None
    return (
        f"the cluster's shell has no `{command}` command to run the job with: {_CAUSE}. "
        f"Set `python: {_SOME_VIRTUALENV}` in {_SETTINGS}, or restart the cluster with that "
        "virtualenv activated"
    )


def _python_of_ray_in(pid: int) -> str | None:
    try:
        maps = Path(f"/proc/{pid}/maps").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in maps.splitlines():
        match = _RAY_LIBRARY.search(line)
        if match is None:
            continue
        prefix, version = Path(match.group(1)), match.group(2)
        for name in (version, "python3", "python"):
            if (prefix / "bin" / name).is_file():
                return str(prefix / "bin" / name)
    return None


def _parent_of(pid: int) -> int:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return 0
    # "PID (COMMAND) STATE PPID ...": the command may hold spaces and parentheses.
    fields = stat[stat.rfind(")") + 2 :].split()
    return int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else 0


__all__ = [
    "COMMAND_NOT_FOUND",
    "entrypoint_python",
    "python_not_found",
    "ray_python",
    "wrong_python_hint",
]
