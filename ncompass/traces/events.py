"""What the events of a Chrome/Kineto trace mean: phases, categories and GPU event classes.

Events stay the plain dicts the JSON decoder produced (building an object per event would cost
more than parsing it); this module holds the vocabulary used to interpret them, exactly as
docs/architecture.md "Trace analysis contracts" defines it.
"""

from __future__ import annotations

import enum
import re
from typing import Any

Event = dict[str, Any]
"""One trace event as decoded from JSON."""

MARKER_CATEGORY = "user_annotation"
"""Category of the CPU ranges that markers (``record_function``, ncompass rewrites) produce."""

GPU_CATEGORIES = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
"""Lower-cased categories of the complete (``X``) events that run on a GPU."""

FLOW_PHASES = frozenset({"s", "t", "f"})
"""Phases of flow events (arrows between slices)."""

LAUNCH_FLOW_CATEGORIES = frozenset({"ac2g", "async_cpu_to_gpu"})
"""Lower-cased categories of the flows that Kineto draws from a CPU launch to its GPU event."""

OVERLAP_OF_KEY = "overlap_of_tid"
"""Key of a ``thread_name`` metadata event's ``args`` naming the thread an overlap track belongs
to: ncompass' converters move slices that overlap without nesting to extra tracks (viewers
cannot draw them on one), and analysis puts them back on the thread (same pid)."""

_COMMUNICATION_NAME = re.compile(r"^nccl.*|^hip|^hccl|.*ncclKernel.*")
_MEMORY_NAME = re.compile(r"^(hip)?Memcpy|^(hip)?Memset|^dma")


class KernelClass(str, enum.Enum):
    """The class a GPU event belongs to, decided by its name."""

    COMPUTATION = "computation"
    COMMUNICATION = "communication"
    MEMORY = "memory"


def classify_gpu_event(name: str) -> KernelClass:
    """Return the class of a GPU event from its name (communication, memory or computation).

    Args:
        name: The event's ``name``.

    Returns:
        Communication for NCCL/RCCL/HCCL kernels, memory for copies, sets and DMA, else computation.
    """
    if _COMMUNICATION_NAME.match(name):
        return KernelClass.COMMUNICATION
    if _MEMORY_NAME.match(name):
        return KernelClass.MEMORY
    return KernelClass.COMPUTATION


def category_of(event: Event) -> str:
    """Return the event's category in lower case ('' when it has none); traces differ in case."""
    category = event.get("cat")
    return category.lower() if isinstance(category, str) else ""


def is_gpu_event(event: Event) -> bool:
    """Whether the event is a complete event that ran on a GPU (kernel, memcpy or memset)."""
    return event.get("ph") == "X" and category_of(event) in GPU_CATEGORIES


def is_marker(event: Event) -> bool:
    """Whether the event is a marker: a complete ``user_annotation`` range on a CPU thread."""
    return event.get("ph") == "X" and category_of(event) == MARKER_CATEGORY


def microseconds(value: Any) -> float:
    """Read a timestamp or duration, in microseconds, whatever JSON type the trace used.

    Args:
        value: An int, a float or a numeric string (some exporters quote numbers).

    Returns:
        The value as a float; 0.0 for a missing or unreadable value.
    """
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return 0.0
    return 0.0


def correlation_of(event: Event) -> int | None:
    """Return the event's ``args.correlation`` (what links a GPU event to its launch), if any."""
    args = event.get("args")
    if not isinstance(args, dict):
        return None
    correlation = args.get("correlation")
    if isinstance(correlation, int) and not isinstance(correlation, bool):
        return correlation
    if isinstance(correlation, str) and correlation.lstrip("-").isdigit():
        return int(correlation)
    return None


__all__ = [
    "FLOW_PHASES",
    "GPU_CATEGORIES",
    "LAUNCH_FLOW_CATEGORIES",
    "MARKER_CATEGORY",
    "Event",
    "KernelClass",
    "category_of",
    "classify_gpu_event",
    "correlation_of",
    "is_gpu_event",
    "is_marker",
    "microseconds",
]
