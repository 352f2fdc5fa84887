"""Put the efficiency figures into a summary: ``device``, ``model_flops``, ``mfu`` and an
``efficiency`` object on every marker and operation row (None when the trace has no shapes)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from ncompass.analysis.efficiency_text import NO_SHAPES
from ncompass.analysis.roofline import efficiency_report
from ncompass.analysis.summary_types import EfficiencyRow, StructuredSummary


def add_efficiency(
    structured: StructuredSummary,
    path: str | Path,
    *,
    peak_flops: float | None = None,
    peak_bandwidth: float | None = None,
    calibrate: bool | None = None,
) -> None:
    """Add the efficiency figures of the trace at ``path`` to its summary, in place.

    Raises:
        PeakValueError: A user-given peak is not a positive number.
    """
    report = efficiency_report(
        path, peak_flops=peak_flops, peak_bandwidth=peak_bandwidth, calibrate=calibrate
    )
    rows: list[Any] = [*structured["markers"], *structured["operations"]]
    if report is None:
        for row in rows:
            row["efficiency"] = None
        structured["device"] = None
        structured["model_flops"] = None
        structured["mfu"] = None
        structured["efficiency_note"] = NO_SHAPES
        return
    tables = {"marker": report.markers, "cpu_op": report.operators, "kernel": report.kernels}
    for row in structured["markers"]:
        work = report.markers.get(row["name"])
        row["efficiency"] = cast(EfficiencyRow, report.efficiency(work)) if work else None
    for op in structured["operations"]:
        work = tables[op["kind"]].get(op["name"])
        op["efficiency"] = cast(EfficiencyRow, report.efficiency(work)) if work else None
    structured["device"] = report.device.to_dict() if report.device is not None else None
    structured["model_flops"] = report.model_flops
    structured["mfu"] = report.mfu()


__all__ = ["add_efficiency"]
