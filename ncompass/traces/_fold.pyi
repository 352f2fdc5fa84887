"""Types of the C extension ``_fold.c`` (the per-event fold of trace linking)."""

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
    def fold(self, events: list[Any]) -> None:
        """Fold a batch of events (``LinkEvent`` structs or dicts) into the collector."""
