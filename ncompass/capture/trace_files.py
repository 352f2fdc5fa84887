"""Where traces go and what they are called.

Trace files are never overwritten by accident: a name that exists gets a numeric suffix
(``attn.json``, ``attn-1.json``, ...), claimed atomically so concurrent processes writing into
one folder never collide.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

from ncompass import environment_variables

TRACE_DIR_ENV = environment_variables.NCOMPASS_TRACE_DIR
DEFAULT_TRACE_DIR = "traces"
TRACE_SUFFIX = ".json"
SIDECAR_SUFFIX = ".ncompass.json"

_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]+")


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


def claim_trace_path(folder: Path, name: str, suffix: str = TRACE_SUFFIX) -> Path:
    """Reserve ``folder/name.json`` (or ``name-N.json`` if taken) by creating it empty.

    The caller writes the trace to a temporary file and renames it over the claimed path.
    """
    folder.mkdir(parents=True, exist_ok=True)
    base = safe_name(name)
    for attempt in range(100_000):
        candidate = folder / (f"{base}{suffix}" if attempt == 0 else f"{base}-{attempt}{suffix}")
        try:
            descriptor = os.open(candidate, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            continue
        os.close(descriptor)
        return candidate
    raise FileExistsError(f"{folder}: too many traces named {base}")


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
    "claim_trace_path",
    "safe_name",
    "sidecar_path",
    "timestamped_name",
    "trace_dir",
]
