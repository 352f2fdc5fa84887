"""``ncompass convert``: an Nsight Systems report → a Chrome/Perfetto trace ncompass can analyse."""

from __future__ import annotations

import sqlite3
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ncompass.errors import TraceError
from ncompass.overwrite_guard import refuse_overwriting_inputs
from ncompass.traces.nsys.converter import ConversionStats, ReportConverter
from ncompass.traces.nsys.export import export_sqlite
from ncompass.traces.nsys.queries import ReportQueries
from ncompass.traces.nsys.schema import MAX_VALUE_BYTES, ReportSchema, open_report
from ncompass.traces.writer import TraceWriter

REPORT_SUFFIX = ".nsys-rep"
_ROWS_FOR_BAR = 1_000_000  # about ten seconds of converting: below that a bar would flicker


@dataclass(frozen=True)
class ConversionResult:
    """What :func:`convert_report` wrote.

    Attributes:
        report: The report read (``.nsys-rep`` or ``.sqlite``).
        output: The Chrome trace written.
        stats: What it holds.
    """

    report: Path
    output: Path
    stats: ConversionStats

    def describe(self) -> str:
        """One line for the user: what was converted and how much was linked."""
        s = self.stats
        parts = [
            f"{_count(s.kernels, 'kernel')}, {_count(s.memcpys, 'memcpy')}, "
            f"{_count(s.memsets, 'memset')}",
            _count(s.runtime_calls, "CUDA API call"),
            f"{_count(s.nvtx_ranges + s.cross_thread_ranges, 'NVTX range')}, "
            f"{_count(s.nvtx_marks, 'mark')}",
        ]
        if s.os_calls:
            parts.append(_count(s.os_calls, "OS runtime call"))
        linked = f"{s.gpu_ops_in_ranges} of {s.gpu_ops} GPU operations launched inside NVTX ranges"
        return f"{'; '.join(parts)}; {linked}"


def convert_report(
    report: str | Path,
    output: str | Path,
    *,
    nsys: str | None = None,
    progress: bool | None = None,
) -> ConversionResult:
    """Convert an Nsight Systems report into a Chrome trace (Perfetto, ``ncompass summarize``).

    The trace holds kernels, copies and sets per GPU and stream; CUDA API calls, NVTX ranges
    (with their domains), marks and OS runtime calls per thread, with thread and process names.
    Each GPU operation is linked to its launch (``args.correlation``, an arrow) and to the NVTX
    ranges around that launch *on the launching thread* (``args.nvtx_range``); each range
    carries the GPU work it launched (``args.gpu_ops``, ``gpu_time_us``) and is projected onto
    every stream that work ran on. Slices that overlap without nesting go to extra tracks so
    every one is shown. Memory stays flat however large the report: rows are streamed from
    SQLite and events straight to the file.

    Args:
        report: An ``.nsys-rep`` report (exported with ``nsys export --type sqlite``, which
            must be installed) or an exported ``.sqlite`` file.
        output: The trace to write, ``.json`` or ``.json.gz``.
        nsys: The ``nsys`` executable, for ``.nsys-rep`` reports (default: on PATH).
        progress: A progress bar on stderr: True/False, or None for "on a terminal, for
            reports of a million rows or more".

    Returns:
        The paths and counts.

    Raises:
        TraceError: The report is missing, is not an Nsight Systems report or export, or
            ``nsys`` is needed and not installed.
        OutputIsInputError: ``output`` is the report itself.
    """
    source = Path(report)
    target = Path(output)
    if not source.exists():
        raise TraceError(f"{source}: no such report; check the path")
    refuse_overwriting_inputs(target, [source])
    if source.suffix == REPORT_SUFFIX:
        with tempfile.TemporaryDirectory(prefix="ncompass-nsys-", dir=_scratch(target)) as tmp:
            exported = export_sqlite(source, Path(tmp) / f"{source.stem}.sqlite", nsys=nsys)
            stats = _convert_sqlite(exported, target, source, progress)
    else:
        stats = _convert_sqlite(source, target, source, progress)
    return ConversionResult(source, target, stats)


def _convert_sqlite(
    database: Path, output: Path, report: Path, progress: bool | None
) -> ConversionStats:
    connection = open_report(database)
    try:
        schema = ReportSchema.read(connection, report)  # messages name the user's file
        queries = ReportQueries(connection, schema)
        metadata = _metadata(queries, report)
        rows = queries.row_count()
        label = f"converting {report.name}"
        with (
            row_progress(label, rows, progress) as advance,
            TraceWriter(output, metadata=metadata) as writer,
        ):
            stats = ReportConverter(queries, writer.write_many, advance).run()
    except sqlite3.DataError:  # "string or blob too big"
        raise TraceError(
            f"{report}: a value in the report is larger than {MAX_VALUE_BYTES >> 20} MiB, the "
            "most ncompass reads (no profiler writes names or NVTX messages that long)"
        ) from None
    finally:
        connection.close()
    return stats


@contextmanager
def row_progress(label: str, rows: int, enabled: bool | None) -> Iterator[Callable[[int], None]]:
    """Yield a callback advancing a transient progress bar on stderr by a number of rows."""
    show = enabled if enabled is not None else sys.stderr.isatty() and rows >= _ROWS_FOR_BAR
    if not show:
        yield _ignore
        return
    # Imported only when a bar is shown: rich costs tens of milliseconds to import.
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
    console = Console(stderr=True)
    with Progress(*columns, TimeRemainingColumn(), console=console, transient=True) as bar:
        task = bar.add_task(label, total=rows)
        yield lambda count: bar.advance(task, count)


def _ignore(count: int) -> None:
    del count


def _metadata(queries: ReportQueries, report: Path) -> dict[str, Any]:
    metadata: dict[str, Any] = {"schemaVersion": 1, "displayTimeUnit": "ms"}
    devices = queries.device_properties()
    if devices:
        metadata["deviceProperties"] = devices
    start = queries.session_start_ns()
    if start is not None:
        # Report times count from the session start: like Kineto's base time, this lets
        # `ncompass merge` align ranks and puts wall-clock samples on the trace's axis.
        metadata["baseTimeNanoseconds"] = start
    exporter = queries.export_metadata()
    metadata["otherData"] = {
        "source": "Nsight Systems report, converted by ncompass",
        "report": report.name,
        **(
            {"nsys_version": exporter["EXPORT_PRODUCT_VERSION"]}
            if exporter.get("EXPORT_PRODUCT_VERSION")
            else {}
        ),
    }
    return metadata


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def _scratch(output: Path) -> Path | None:
    """Where the temporary export goes: beside the output (reports can be large)."""
    folder = output.parent if str(output.parent) else Path(".")
    return folder if folder.is_dir() else None


__all__ = ["REPORT_SUFFIX", "ConversionResult", "convert_report"]
