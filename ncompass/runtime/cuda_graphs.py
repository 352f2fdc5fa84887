"""Markers in code captured into a CUDA graph: they record nothing during the capture.

A CUDA graph (``torch.cuda.graph``, ``torch.compile(mode="reduce-overhead")``, vLLM's decode
graphs) runs its Python once, while it is captured, and then only replays its kernels. A range
recorded during the capture would time the capture, not the work, and a replay runs no Python
to record one. So a marker that would record first asks
``torch.cuda.is_current_stream_capturing()`` (:func:`skipped_in_capture`) and, while a capture
is under way, records nothing, warns once and notes its name:

- in :func:`graph_captured_markers` (this process; ``ncompass run`` copies the list into the
  run's sidecar as ``cuda_graph_markers``);
- in the trace being recorded, when a torch profiler runs: the top-level key
  ``ncompass_cuda_graph_markers`` lists the markers whose code replays as a graph.

Only recording paths ask (idle markers never do), and only once CUDA is initialised.
"""

from __future__ import annotations

import sys
import threading
import warnings

from ncompass.runtime.base import RangeContextWarning

TRACE_METADATA_KEY = "ncompass_cuda_graph_markers"
"""The top-level trace key listing the markers that ran during a CUDA graph capture."""

_modules = sys.modules
_captured: dict[str, None] = {}  # names in the order first seen
_lock = threading.Lock()


def skipped_in_capture(name: str) -> bool:
    """Whether marker ``name`` must not record now because a CUDA graph is being captured.

    The first time a marker is skipped, says so (a warning) and records the fact. Never
    initialises CUDA and never imports torch: a capture needs CUDA initialised, which
    ``torch.cuda`` records in its ``_initialized`` flag, so until then this costs one lookup.
    """
    cuda = _modules.get("torch.cuda")
    if cuda is None or not getattr(cuda, "_initialized", False):
        return False
    if not cuda.is_current_stream_capturing():
        return False
    if name not in _captured:
        _note(name)
    return True


def graph_captured_markers() -> list[str]:
    """The markers that ran during a CUDA graph capture in this process, in order."""
    return list(_captured)


def _note(name: str) -> None:
    with _lock:
        if name in _captured:
            return
        _captured[name] = None
        names = list(_captured)
    from ncompass.warning_location import stacklevel_outside

    warnings.warn(
        f"marker {name!r} ran while a CUDA graph was being captured: it records nothing, and "
        "the region replays as a CUDA graph (no ranges at replay; the graph's kernels are "
        "still traced)",
        RangeContextWarning,
        stacklevel=stacklevel_outside("ncompass"),
    )
    _add_to_trace(names)


def _add_to_trace(names: list[str]) -> None:
    """Lists ``names`` in the metadata of the torch profiler trace being recorded, if any."""
    profiler = sys.modules.get("torch.autograd.profiler")
    if profiler is None or not getattr(profiler, "_is_profiler_enabled", False):
        return
    import json

    # Each call replaces the key's value: the trace ends up with the whole list.
    sys.modules["torch"].autograd._add_metadata_json(TRACE_METADATA_KEY, json.dumps(names))


def forget_captured_markers() -> None:
    """Clears the record (a new run in the same process)."""
    with _lock:
        _captured.clear()


__all__ = [
    "TRACE_METADATA_KEY",
    "forget_captured_markers",
    "graph_captured_markers",
    "skipped_in_capture",
]
