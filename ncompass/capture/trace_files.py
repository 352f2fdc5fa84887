"""Where traces go and what they are called.

Trace files are never overwritten by accident: a default name that exists gets a numeric
suffix (``attn.json``, ``attn-1.json``, ...), and a name the user chose is refused when it
exists unless replacing it was asked for (``--force-overwrite``). Names are claimed atomically
(an exclusive create), so concurrent processes writing into one folder never collide.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

from ncompass import environment_variables
from ncompass.errors import CaptureError

TRACE_DIR_ENV = environment_variables.NCOMPASS_TRACE_DIR
DEFAULT_TRACE_DIR = "traces"
TRACE_SUFFIX = ".json"
SIDECAR_SUFFIX = ".ncompass.json"

_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]+")


class TraceExistsError(CaptureError):
    """A trace of the name asked for exists, and replacing it was not asked for."""


def trace_dir(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The trace folder: ``explicit``, else ``$NCOMPASS_TRACE_DIR``, else ``traces``."""
    chosen = explicit or os.environ.get(TRACE_DIR_ENV) or DEFAULT_TRACE_DIR
    return Path(chosen)


def safe_name(name: str) -> str:
    """A trace name usable as a file name on every OS."""
    cleaned = _UNSAFE.sub("_", name).strip("._")
    return cleaned or "trace"


def timestamped_name(stem: str) -> str:
    """``stem-YYYYmmdd-HHMMSS``: the default trace name of a run."""
    return f"{safe_name(stem)}-{time.strftime('%Y%m%d-%H%M%S')}"


def claim_trace_path(
    folder: Path,
    name: str,
    suffix: str = TRACE_SUFFIX,
    *,
    exact: bool = False,
    replace: bool = False,
) -> Path:
    """Reserve ``folder/name.json`` (or ``name-N.json`` if taken) by creating it empty.

    The caller writes the trace to a temporary file and renames it over the claimed path, and
    removes the empty file if the run ends without a trace (:func:`release_claim`).

    Args:
        folder: The trace folder (created if missing).
        name: The trace name, without the suffix.
        suffix: The file's suffix.
        exact: The name is the user's choice: claim exactly it, never ``name-N``.
        replace: With ``exact``, an existing file of that name may be replaced: nothing is
            claimed, and the old file stays until the new one is renamed over it.

    Raises:
        TraceExistsError: ``exact`` without ``replace`` and the file exists (left unchanged).
    """
    folder.mkdir(parents=True, exist_ok=True)
    base = safe_name(name)
    if exact and replace:
        return folder / f"{base}{suffix}"
    for attempt in range(1 if exact else 100_000):
        candidate = folder / (f"{base}{suffix}" if attempt == 0 else f"{base}-{attempt}{suffix}")
        try:
            descriptor = os.open(candidate, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            continue
        os.close(descriptor)
        return candidate
    if exact:
        raise TraceExistsError(
            f"{folder / (base + suffix)} already exists and was left unchanged; choose another "
            "--trace-name, or pass --force-overwrite to replace it"
        )
    raise FileExistsError(f"{folder}: too many traces named {base}")


def release_claim(path: Path) -> None:
    """Remove a path claimed by :func:`claim_trace_path` if no trace was written to it."""
    try:
        if path.stat().st_size == 0:
            path.unlink()
    except OSError:
        pass


def sidecar_path(trace_path: Path) -> Path:
    """The file next to a trace that records how it was made (spec, markers, command)."""
    name = trace_path.name
    for suffix in (".json.gz", ".json"):
        if name.endswith(suffix):
            return trace_path.with_name(name[: -len(suffix)] + SIDECAR_SUFFIX)
    return trace_path.with_name(name + SIDECAR_SUFFIX)


__all__ = [
    "DEFAULT_TRACE_DIR",
    "TRACE_DIR_ENV",
    "TraceExistsError",
    "claim_trace_path",
    "release_claim",
    "safe_name",
    "sidecar_path",
    "timestamped_name",
    "trace_dir",
]
