"""Per-name totals of GPU events and CPU operators, and the ``operations`` list of a summary."""

from __future__ import annotations

from array import array
from collections.abc import ItemsView, Iterator, Mapping, Sequence, ValuesView
from dataclasses import dataclass
from itertools import islice

from ncompass.analysis import _native
from ncompass.analysis.markers import MarkerStats
from ncompass.analysis.setup_time import SetupTime
from ncompass.analysis.summary_types import Operation
from ncompass.traces.link import KERNEL_CLASSES, LinkedTrace


@dataclass(slots=True)  # one per distinct name: a trace may have hundreds of thousands
class KernelStats:
    """Calls and GPU time of one GPU event name (kernel, memcpy or memset)."""

    name: str
    kernel_class: str
    calls: int = 0
    total_us: float = 0.0
    max_us: float = 0.0
    bytes: int = 0

    @property
    def mean_us(self) -> float:
        """Mean duration of one call."""
        return self.total_us / self.calls if self.calls else 0.0


class KernelTable(Mapping[str, KernelStats]):
    """GPU event name -> :class:`KernelStats`, the most expensive first, held as columns by name
    index (about 33 bytes a name, where a dict of entries cost ~200 in traces whose kernel names
    are all distinct); each entry is made when it is read.
    """

    def __init__(
        self,
        names: Sequence[str],
        order: array[int],
        columns: tuple[array[int], array[float], array[float], array[int]],
        bytes_of: dict[int, int],
    ) -> None:
        self._names = names
        self._order = order  # name indices, the most expensive first
        self._calls, self._totals, self._maxima, self._classes = columns
        self._bytes_of = bytes_of

    def __len__(self) -> int:
        return len(self._order)

    def __iter__(self) -> Iterator[str]:
        names = self._names
        return (names[name_id] for name_id in self._order)

    def __getitem__(self, name: str) -> KernelStats:
        names = self._names
        for name_id in self._order:  # by name: a scan, as only a few names are ever asked for
            if names[name_id] == name:
                return self._entry(name_id)
        raise KeyError(name)

    def values(self) -> ValuesView[KernelStats]:
        """The entries, in one pass (Mapping's view would look each name up)."""
        return _KernelValues(self)

    def items(self) -> ItemsView[str, KernelStats]:
        """Name and entry pairs, in one pass."""
        return _KernelItems(self)

    def entries(self) -> Iterator[KernelStats]:
        """The entries, the most expensive first."""
        return map(self._entry, self._order)

    def _entry(self, name_id: int) -> KernelStats:
        return KernelStats(
            self._names[name_id],
            KERNEL_CLASSES[self._classes[name_id]].value,
            self._calls[name_id],
            self._totals[name_id],
            self._maxima[name_id],
            self._bytes_of.get(name_id, 0),
        )


class _KernelValues(ValuesView[KernelStats]):
    def __init__(self, table: KernelTable) -> None:
        super().__init__(table)
        self._table = table

    def __iter__(self) -> Iterator[KernelStats]:
        return self._table.entries()


class _KernelItems(ItemsView[str, KernelStats]):
    def __init__(self, table: KernelTable) -> None:
        super().__init__(table)
        self._table = table

    def __iter__(self) -> Iterator[tuple[str, KernelStats]]:
        return ((entry.name, entry) for entry in self._table.entries())


def kernel_stats(trace: LinkedTrace) -> KernelTable:
    """Totals per GPU event name, the most expensive first.

    Args:
        trace: The linked trace.

    Returns:
        Name -> totals.
    """
    gpu = trace.gpu
    names = len(trace.names)
    calls = array("I", [0]) * names  # by name index (4 bytes; OverflowError past 2**32 calls)
    totals = array("d", [0.0]) * names
    maxima = array("d", [0.0]) * names
    classes = array("b", [0]) * names
    bytes_of: dict[int, int] = {}  # only memcpys and memsets have any
    durations, sizes, kernel_class = gpu.duration, gpu.bytes, gpu.kernel_class
    for index, name_id in enumerate(gpu.name):
        duration = durations[index]
        if not calls[name_id]:
            classes[name_id] = kernel_class[index]
        calls[name_id] += 1
        totals[name_id] += duration
        if duration > maxima[name_id]:
            maxima[name_id] = duration
        if sizes[index]:
            bytes_of[name_id] = bytes_of.get(name_id, 0) + sizes[index]
    order = array("l", (name_id for name_id in range(names) if calls[name_id]))
    order = _most_expensive_first(order, totals)
    return KernelTable(trace.names, order, (calls, totals, maxima, classes), bytes_of)


def _most_expensive_first(order: array[int], totals: array[float]) -> array[int]:
    """``order`` sorted by total, largest first; ties keep their order (``sorted`` is stable)."""
    sweep = _native.sweep
    if sweep is not None:
        _negate(totals)  # in place and back (exact), not a copy: 8 bytes a name
        try:
            ordered = sweep.order_by_start(totals, order)  # in place, 24 bytes a name
        finally:
            _negate(totals)
        if ordered is not None:
            return order
    return array("l", sorted(order, key=lambda name_id: -totals[name_id]))


def _negate(column: array[float]) -> None:
    for index, value in enumerate(column):
        column[index] = -value


def build_operations(
    trace: LinkedTrace,
    markers: dict[str, MarkerStats],
    kernels: Mapping[str, KernelStats],
    top: int,
    setup: SetupTime | None = None,
) -> list[Operation]:
    """The summary's ``operations``: the top markers, GPU events and CPU operators.

    With ``setup``, CPU operators count only their calls outside torch.compile's compilation
    (the phases themselves drop out); ``max_us`` is still over every call.

    Shares: markers and CPU operators relative to the trace's CPU wall time (nested ranges
    overlap, so CPU shares may add up to more than 1); GPU time relative to the summed duration
    of all GPU events.

    Args:
        trace: The linked trace.
        markers: Marker statistics (see :func:`~ncompass.analysis.markers.marker_stats`).
        kernels: GPU event totals (see :func:`kernel_stats`).
        top: How many of each kind to keep.

    Returns:
        One dict per operation, each with ``kind``, ``name`` and its times.
    """
    wall = trace.cpu_end - trace.cpu_start if trace.cpu_end > trace.cpu_start else 0.0
    gpu_busy = sum(entry.total_us for entry in kernels.values())
    operations: list[Operation] = []
    for stats in list(markers.values())[:top]:
        operations.append(
            {
                "kind": "marker",
                **stats.to_dict(),
                "share_of_cpu_time": _share(stats.cpu_total_us, wall),
                "share_of_gpu_time": _share(stats.gpu_total_us, gpu_busy),
            }
        )
    for entry in islice(kernels.values(), top):
        operations.append(
            {
                "kind": "kernel",
                "name": entry.name,
                "class": entry.kernel_class,
                "calls": entry.calls,
                "total_us": entry.total_us,
                "mean_us": entry.mean_us,
                "max_us": entry.max_us,
                "bytes": entry.bytes,
                "share_of_gpu_time": _share(entry.total_us, gpu_busy),
            }
        )
    steady = {
        name: setup.operator_steady(name, totals.total_us, totals.calls)
        if setup is not None
        else (totals.total_us, totals.calls)
        for name, totals in trace.cpu_operators.items()
    }
    ranked = sorted((name for name in steady if steady[name][1] > 0), key=lambda n: -steady[n][0])
    for name in ranked[:top]:
        total, calls = steady[name]
        operations.append(
            {
                "kind": "cpu_op",
                "name": name,
                "calls": calls,
                "total_us": total,
                "mean_us": total / calls,
                "max_us": trace.cpu_operators[name].max_us,
                "share_of_cpu_time": _share(total, wall),
            }
        )
    return operations


def _share(part: float, whole: float) -> float:
    return part / whole if whole > 0 else 0.0
