"""Nsight Systems' command line: finding ``nsys`` and exporting a report to SQLite."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from ncompass import environment_variables
from ncompass.errors import CaptureError, TraceError

NSYS_ENV = environment_variables.NCOMPASS_NSYS
"""Path of the ``nsys`` executable to use instead of the one on PATH."""

INSTALL_HINT = (
    "install Nsight Systems (https://developer.nvidia.com/nsight-systems; on Debian/Ubuntu "
    "with the CUDA repository: `apt-get install nsight-systems-cli`) so that `nsys` is on PATH, "
    f"or set {NSYS_ENV} to its path"
)


def find_nsys() -> str | None:
    """The ``nsys`` executable: ``$NCOMPASS_NSYS``, else ``nsys`` on PATH; None if neither."""
    explicit = os.environ.get(NSYS_ENV)
    if explicit:
        return shutil.which(explicit) or (explicit if os.access(explicit, os.X_OK) else None)
    return shutil.which("nsys")


def export_sqlite(report: Path, output: Path, *, nsys: str | None = None) -> Path:
    """Export an ``.nsys-rep`` report to SQLite with ``nsys export --type sqlite``.

    Args:
        report: The ``.nsys-rep`` file.
        output: The SQLite file to write (replaced if it exists).
        nsys: The ``nsys`` executable (default: :func:`find_nsys`).

    Returns:
        ``output``.

    Raises:
        TraceError: ``nsys`` is not installed (the message says how to get it, or how to
            convert the report on a machine that has it), or the export failed.
    """
    executable = nsys or find_nsys()
    if executable is None:
        raise TraceError(
            f"{report}: reading an .nsys-rep report needs Nsight Systems' `nsys`: "
            f"{INSTALL_HINT}. Or export it where nsys is installed (`nsys export --type sqlite "
            f"-o {report.with_suffix('.sqlite').name} {report.name}`) and convert the .sqlite"
        )
    command = [
        executable,
        "export",
        "--type=sqlite",
        "--force-overwrite=true",
        f"--output={output}",
        str(report),
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False)
    except OSError as error:
        raise CaptureError(f"cannot run {executable}: {error}") from None
    if done.returncode != 0 or not output.is_file():
        detail = (done.stderr or done.stdout).strip() or f"exit code {done.returncode}"
        raise TraceError(f"{report}: `nsys export` failed: {detail}")
    return output


__all__ = ["INSTALL_HINT", "NSYS_ENV", "export_sqlite", "find_nsys"]
