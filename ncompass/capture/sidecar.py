"""The run's sidecar: how a trace was made, written beside it as ``NAME.ncompass.json``.

``Sidecar`` and its parts are ``TypedDict``\\ s: the file stays plain JSON, and mypy checks the
keys its writer (``runner``, ``child_run``) and its readers (the session) use. It is written
and updated only here, atomically (a temporary file renamed over it): a reader never sees half
of one, and a symlink planted at its name is replaced, never written through. Its name is
:func:`ncompass.run_files.sidecar_path`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

import orjson

# typing_extensions' TypedDict: pydantic validates only it on Python < 3.12 (tests use that)
from typing_extensions import NotRequired, TypedDict

from ncompass._files import write_atomic
from ncompass.capture.cpu_wait import CpuWaitRecord
from ncompass.capture.setup_spans import SetupSpanRecord
from ncompass.capture.spans import WindowRecord
from ncompass.importer.registry import MarkerRecord
from ncompass.run_files import read_sidecar_document, sidecar_path


class CompiledKernelSource(TypedDict):
    """One Inductor kernel and the source it came from (``CompiledKernel.to_dict``)."""

    name: str
    graph: int | None
    stacks: list[list[list[str | int]]]  # per FX node, its frames as [file, line], outermost first


class CompiledKernelRecord(CompiledKernelSource):
    """One Inductor kernel compiled during the run, with the markers whose spans hold it."""

    markers: list[str]


class CompiledKernelsRecord(TypedDict):
    """The sidecar's ``compiled_kernels``."""

    kernels: list[CompiledKernelRecord]
    note: str | None  # why provenance is missing, when it is


class GpuRecord(TypedDict):
    """The sidecar's ``gpu`` (with ``--gpu-monitor``)."""

    summaries: list[dict[str, Any]]
    low_utilisation: list[str]
    counter_events: int


class NsysRecord(TypedDict):
    """The sidecar's ``nsys`` (with ``--nsys``): the report's file name and how nsys ran."""

    report: str
    args: list[str]


class SidecarExtras(TypedDict, total=False):
    """The keys a run in a child process (``--nsys``, ``nvtx-trace``) adds to the sidecar."""

    nsys: NsysRecord


class Sidecar(TypedDict):
    """Everything the sidecar holds; the ``NotRequired`` keys only when they apply."""

    trace: str
    command: list[str]
    python: str
    profiler: str
    exit_code: int | None  # None in a window's sidecar written while the run goes on
    started_unix_s: float
    duration_s: float
    spec: dict[str, Any]
    markers: list[MarkerRecord]
    compiled_kernels: NotRequired[CompiledKernelsRecord]
    gpu: NotRequired[GpuRecord]
    nsys: NotRequired[NsysRecord]
    cuda_graph_markers: NotRequired[list[str]]
    window: NotRequired[WindowRecord]
    processes: NotRequired[list[dict[str, Any]]]  # every process of a followed run, its own first
    setup_spans: NotRequired[list[SetupSpanRecord]]  # the run's imports and model constructions
    cpu_wait: NotRequired[CpuWaitRecord]  # how the main thread shared the CPU (Linux only)


def read_sidecar(trace_path: Path) -> Sidecar | None:
    """The sidecar of ``trace_path``, or None when there is none (or it is unreadable)."""
    document = read_sidecar_document(trace_path)
    # a file the run wrote: trusted to hold what Sidecar says
    return cast(Sidecar, document) if document is not None else None


def write_sidecar(trace_path: Path, document: Sidecar | Mapping[str, Any]) -> Path:
    """Write the sidecar of ``trace_path`` atomically; returns its path.

    Raises:
        OSError: it cannot be written (the old one, if any, is unchanged).
    """
    path = sidecar_path(trace_path)
    write_atomic(path, orjson.dumps(document, option=orjson.OPT_INDENT_2))
    return path


def update_sidecar(trace_path: Path, changes: Mapping[str, Any]) -> Sidecar | None:
    """Add ``changes`` to the sidecar of ``trace_path`` (atomically); the updated sidecar.

    None, and nothing written, when there is no readable sidecar to update.
    """
    document = read_sidecar_document(trace_path)
    if document is None:
        return None
    updated = {**document, **changes}
    write_sidecar(trace_path, updated)
    return cast(Sidecar, updated)


__all__ = [
    "CompiledKernelRecord",
    "CompiledKernelSource",
    "CompiledKernelsRecord",
    "GpuRecord",
    "NsysRecord",
    "Sidecar",
    "SidecarExtras",
    "read_sidecar",
    "sidecar_path",
    "update_sidecar",
    "write_sidecar",
]
