"""The names of the files a run writes beside its trace, spelled once, and the sidecar's reader.

A run named ``NAME`` writes ``NAME.json`` (or ``NAME.json.gz``), its sidecar
``NAME.ncompass.json`` (how the trace was made: command, spec, markers), and, with recording
windows, ``NAME-wN.json`` per window, each with its own sidecar. Every package that reads these
files (analysis, traces, session, remote) takes the names from here, so the spelling cannot
drift between the writer and its readers.

The bottom layer, standard library only at import (orjson is imported by the reader when
called), so a stdlib-only bootstrap can load it by path for the names.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

TRACE_SUFFIX = ".json"
GZIP_TRACE_SUFFIX = ".json.gz"
SIDECAR_SUFFIX = ".ncompass.json"
PROCESSES_SUFFIX = ".processes"  # the folder of a followed run's per-process traces
_TRACE_SUFFIXES = (GZIP_TRACE_SUFFIX, TRACE_SUFFIX)


def trace_stem(trace_path: Path) -> str:
    """The run's name: the trace's file name without ``.json`` or ``.json.gz``."""
    name = trace_path.name
    for suffix in _TRACE_SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def sidecar_path(trace_path: Path) -> Path:
    """The file next to a trace that records how it was made (spec, markers, command)."""
    return trace_path.with_name(trace_stem(trace_path) + SIDECAR_SUFFIX)


def processes_folder(trace_path: Path) -> Path:
    """``NAME.processes``: the folder beside a run's trace that keeps each process's trace."""
    return trace_path.with_name(trace_stem(trace_path) + PROCESSES_SUFFIX)


def is_sidecar(path: Path) -> bool:
    """Whether ``path`` is named as a sidecar (``*.ncompass.json``)."""
    return path.name.endswith(SIDECAR_SUFFIX)


def window_stem(stem: str, number: int) -> str:
    """The name of window ``number`` (from 1) of the run named ``stem``: ``stem-wN``."""
    return f"{stem}-w{number}"


def window_trace(trace_path: Path, number: int) -> Path:
    """The trace of window ``number`` of the run whose trace is ``trace_path``."""
    return trace_path.with_name(window_stem(trace_stem(trace_path), number) + TRACE_SUFFIX)


def window_number(stem: str, path: Path) -> int | None:
    """N when ``path`` is ``stem-wN.json`` (a window trace of the run ``stem``), else None."""
    name = path.name
    prefix = window_stem(stem, 0)[:-1]
    if is_sidecar(path) or not name.startswith(prefix) or not name.endswith(TRACE_SUFFIX):
        return None
    number = name[len(prefix) : -len(TRACE_SUFFIX)]
    return int(number) if number.isdigit() else None


def read_sidecar_document(trace_path: Path) -> dict[str, Any] | None:
    """The sidecar of ``trace_path`` as a JSON object; None when missing or unreadable.

    Tolerant on purpose: a trace copied without its sidecar, or a sidecar of an older
    version, is analysed without what the sidecar would have added.
    """
    import orjson  # here: the names above must load without it

    try:
        document = orjson.loads(sidecar_path(trace_path).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    return document if isinstance(document, dict) else None


__all__ = [
    "GZIP_TRACE_SUFFIX",
    "PROCESSES_SUFFIX",
    "SIDECAR_SUFFIX",
    "TRACE_SUFFIX",
    "is_sidecar",
    "processes_folder",
    "read_sidecar_document",
    "sidecar_path",
    "trace_stem",
    "window_number",
    "window_stem",
    "window_trace",
]
