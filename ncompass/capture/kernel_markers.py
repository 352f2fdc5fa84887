"""Attribute compiled kernels to markers: the markers whose source spans hold their lines.

A kernel belongs to every marker whose span (file and original lines, from the rewrite
manifest) holds a line of any stack its FX nodes were traced from: the innermost marker and the
ones enclosing it, innermost first. Trace events then carry the names in
``args.ncompass_markers``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ncompass.capture.compiled_kernels import CompiledKernel
from ncompass.runtime.names import template_pieces
from ncompass.traces.annotate import KERNEL_MARKERS_ARG, annotate_trace
from ncompass.traces.events import Event

if TYPE_CHECKING:
    from ncompass.capture.sidecar import CompiledKernelRecord

_GRAPH_PREFIX = re.compile(r"^graph_\d+_")  # C++ kernels record as graph_{id}_{kernel name}
_INDUCTOR_KERNEL = re.compile(r"^(?:graph_\d+_)?(?:cpp_fused_|triton_(?:poi|red|per|tem|for)_)")
_KERNEL_PREFIXES = ("graph_", "cpp_fused_", "triton_")


@dataclass(frozen=True)
class MarkerSpan:
    """Where one marker is in the source: a file and its original lines."""

    name: str
    file: str
    start_line: int
    end_line: int

    @property
    def size(self) -> int:
        """How many lines the span covers (smaller spans are inner ones)."""
        return self.end_line - self.start_line


def marker_spans(manifest: Iterable[Mapping[str, Any]]) -> list[MarkerSpan]:
    """The spans of the marker sites of a rewrite manifest (sites without a file are skipped)."""
    spans: list[MarkerSpan] = []
    for site in manifest:
        file, start, end = site.get("file"), site.get("start_line"), site.get("end_line")
        if isinstance(file, str) and isinstance(start, int) and isinstance(end, int):
            name = str(site.get("name"))
            spans.append(
                MarkerSpan(_pattern(name) if site.get("dynamic") else name, _real(file), start, end)
            )
    return spans


def _pattern(template: str) -> str:
    """A templated marker name with each ``{expr}`` field shown as ``*``.

    A compiled kernel comes from the marker's lines, not from one call of it, so which value a
    field had (``block[{self.index}]``: which block) is not known: the kernel belongs to
    ``block[*]``, all of them.
    """
    return "".join("*" if is_field else text for text, is_field in template_pieces(template))


def kernel_markers(kernel: CompiledKernel, spans: Sequence[MarkerSpan]) -> list[str]:
    """The markers holding any line ``kernel`` came from, innermost first.

    Deeper frames (code called from a marked line) are inner; among spans holding the same
    frame, the shorter one is inner.
    """
    by_file: dict[str, list[MarkerSpan]] = {}
    for span in spans:
        by_file.setdefault(span.file, []).append(span)
    depth_of: dict[str, tuple[int, int]] = {}
    for stack in kernel.stacks:
        for depth, frame in enumerate(stack):
            for span in by_file.get(_real(frame.file), ()):
                if span.start_line <= frame.line <= span.end_line:
                    rank = (depth, -span.size)
                    if rank > depth_of.get(span.name, (-1, 0)):
                        depth_of[span.name] = rank
    return sorted(depth_of, key=lambda name: depth_of[name], reverse=True)


@dataclass
class KernelAttribution:
    """Markers of every compiled kernel, by the names its events carry in a trace.

    Attributes:
        by_event_name: ``graph_{id}_{kernel}`` (C++ kernels of a known graph) and the bare
            kernel name -> markers. A bare name used by several graphs gets all their markers.
        recorded: Event names of every kernel recorded, with markers or not.
        unrecorded: Filled while annotating: names of Inductor kernel events that are not in
            ``recorded`` (compiled before recording started).
    """

    by_event_name: dict[str, list[str]]
    recorded: frozenset[str] = frozenset()
    unrecorded: set[str] = field(default_factory=set)

    def markers_of(self, event_name: str) -> list[str] | None:
        """The markers of the kernel an event of this name ran, or None when it is none."""
        found = self.by_event_name.get(event_name)
        if found is None and event_name.startswith("graph_"):
            found = self.by_event_name.get(_GRAPH_PREFIX.sub("", event_name, count=1))
        return found

    def args_for(self, event: Event) -> dict[str, Any] | None:
        """``{"ncompass_markers": [...]}`` for a compiled kernel's complete event."""
        if event.get("ph") != "X":
            return None
        name = event.get("name")
        if not isinstance(name, str):
            return None
        markers = self.markers_of(name)
        if markers:
            return {KERNEL_MARKERS_ARG: markers}
        if name.startswith(_KERNEL_PREFIXES) and self._unrecorded_kernel(name):
            self.unrecorded.add(name)
        return None

    def _unrecorded_kernel(self, name: str) -> bool:
        """Whether an event name is an Inductor kernel's that no recording knows."""
        if not _INDUCTOR_KERNEL.match(name) or name in self.recorded:
            return False
        return _GRAPH_PREFIX.sub("", name, count=1) not in self.recorded


def attribute_kernels(
    kernels: Iterable[CompiledKernel], manifest: Iterable[Mapping[str, Any]]
) -> KernelAttribution:
    """Map the kernels of a run to the markers of its manifest."""
    spans = marker_spans(manifest)
    by_name: dict[str, list[str]] = {}
    recorded: set[str] = set()
    for kernel in kernels:
        names = [kernel.name]
        if kernel.graph is not None:
            names.insert(0, f"graph_{kernel.graph}_{kernel.name}")
        recorded.update(names)
        markers = kernel_markers(kernel, spans)
        for name in names if markers else ():
            known = by_name.setdefault(name, [])
            known.extend(marker for marker in markers if marker not in known)
    return KernelAttribution(by_name, frozenset(recorded))


def kernel_records(
    kernels: Iterable[CompiledKernel], manifest: Iterable[Mapping[str, Any]]
) -> list[CompiledKernelRecord]:
    """The run's kernel → source-lines map with each kernel's markers, as the sidecar holds it."""
    spans = marker_spans(manifest)
    return [{**kernel.to_dict(), "markers": kernel_markers(kernel, spans)} for kernel in kernels]


def annotate_kernel_events(trace: str | Path, attribution: KernelAttribution) -> int:
    """Add ``args.ncompass_markers`` to the compiled kernels' events of a written trace (and
    note, in ``attribution.unrecorded``, the kernels that ran without a record).

    Returns:
        How many events were annotated.
    """
    return annotate_trace(trace, attribution.args_for)


@lru_cache(maxsize=4096)
def _real(file: str) -> str:
    return os.path.realpath(file)


__all__ = [
    "KernelAttribution",
    "MarkerSpan",
    "annotate_kernel_events",
    "attribute_kernels",
    "kernel_markers",
    "kernel_records",
    "marker_spans",
]
