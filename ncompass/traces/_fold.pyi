"""Types of the C extension ``_fold.c`` (the per-event fold of trace linking)."""

from array import array
from collections.abc import Callable
from typing import Any

class Folder:
    """The per-event fold of one ``_Collector``, in C."""

    def __init__(
        self,
        collector: Any,
        trace: Any,
        event_type: type,
        args_type: type,
        fold_in_python: Callable[[list[Any]], None],
        new_operator: Callable[[str], Any],
        kernel_class: Callable[[int, str], int],
    ) -> None: ...
    def name_id(self, name: object) -> int:
        """The index of ``name`` in ``trace.names``, appended when new."""
    def fold(self, events: list[Any]) -> None:
        """Fold a batch of events (``LinkEvent`` structs or dicts) into the collector."""

def link_correlations(
    gpu_correlation: array[int],
    launch_correlation: array[int],
    gpu_launch: array[int],
    no_link: int,
) -> bool:
    """Set ``gpu_launch[g]`` to the last launch whose correlation is ``gpu_correlation[g]``;
    False, nothing set, past 2**31 - 2 GPU events (the Python loop links those)."""

def launches_on_thread(thread_column: array[int], thread: int) -> int:
    """How many launches are on ``thread``: the length of ``launches_in_time_order``'s ``out``."""

def launches_in_time_order(
    thread_column: array[int], start_column: array[float], thread: int, out: array[int]
) -> bool:
    """Write the launches on ``thread`` into ``out`` (of exactly their count) in order of start
    (ties in file order); False, ``out`` untouched, when a start is NaN."""

class EventText:
    """A batch of trace events read from JSON text; ``len()`` counts its events."""

    def __len__(self) -> int: ...

def parse_events(text: bytes, decode: Callable[[bytes], list[Any] | None]) -> EventText | None:
    """Read the JSON array of events in ``text`` for :meth:`Folder.fold`: an ``EventText``, or
    None when the text must be decoded the general way (``decode`` decodes the events the C
    fold leaves to Python)."""

def assign_launches(
    launch_start: array[float],
    launch_marker: array[int],
    launch_indices: array[int],
    next_launch: int,
    until: float,
    stack: list[int],
    marker_start: array[float],
    marker_end: array[float],
) -> int:
    """``link._assign_launches`` where ranges nest; returns the next launch's position."""

def object_members(
    text: bytes | bytearray | memoryview, start: int, end: int
) -> list[tuple[int, int, int, int]] | None:
    """The (key_start, key_end, value_start, value_end) of each member of the JSON object
    ``text[start:end]``; None when it is not one strictly valid object."""
