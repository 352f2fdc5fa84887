"""The breakdown's per-GPU-event sweeps in C (``_sweep.c``) where the extension is built.

:data:`sweep` is the extension module, or None without it (no C compiler at install time):
then the Python loop beside each caller runs, with the same results to the last bit.
Callers read ``_native.sweep`` when they run, so a test can set it to None.
"""

from __future__ import annotations

from array import array
from types import ModuleType

sweep: ModuleType | None
try:
    from ncompass.analysis import _sweep as sweep
except ImportError:  # pragma: no cover - built without a C compiler
    sweep = None


def doubles(data: bytes) -> array[float]:
    """An ``array('d')`` of the doubles in ``data`` (what the sweeps return)."""
    column = array("d")
    column.frombytes(data)
    return column


def sweep_order(indices: object, events: int) -> tuple[bool, array[int] | None]:
    """How the sweeps take an order of ``events`` GPU events: ``(True, indices)`` for an
    ``array('l')``, ``(True, None)`` for ``range(events)`` (every event in index order, with no
    index column), ``(False, None)`` when they cannot (the Python loop then runs)."""
    if isinstance(indices, range) and indices == range(events):
        return True, None
    column = index_column(indices)
    return column is not None, column


def index_column(indices: object) -> array[int] | None:
    """``indices`` if it is an ``array('l')`` the sweeps can read, else None."""
    return indices if isinstance(indices, array) and indices.typecode == "l" else None
