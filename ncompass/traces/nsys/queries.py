"""The SQL the converter runs on an export, and the records it reads back, one cursor at a time.

Every event query is ordered by the database (SQLite sorts in temporary files when the data is
large), and rows are turned into records as they are fetched: nothing here holds a table in
memory. The small lookup tables (string names of domains, threads, processes and GPUs) are read
into dictionaries; they grow with the number of threads and domains, not with the events.

Two temporary tables carry what one pass learns to the next:

- ``ncompass_gpu_launch``: every GPU operation's correlation id and place, indexed, so each
  runtime call finds what it launched;
- ``ncompass_op_link``: per GPU operation, whether its launch was found and the NVTX ranges
  around that launch, written while the CPU threads are swept and read with the GPU operations.
"""

from __future__ import annotations

import heapq
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from itertools import groupby
from typing import Any

from ncompass.traces.nsys.gpu_activity import detail_columns, name_joins
from ncompass.traces.nsys.records import (
    GpuOp,
    GpuOpKind,
    GpuOpLaunch,
    NvtxAttributes,
    NvtxMark,
    NvtxRange,
    OsCall,
    RuntimeCall,
)
from ncompass.traces.nsys.schema import (
    EXPORT_METADATA_TABLE,
    GPU_INFO_TABLE,
    GPU_OP_KINDS,
    GPU_OP_TABLES,
    NVTX_TABLE,
    OSRT_TABLE,
    PROCESSES_TABLE,
    RUNTIME_TABLE,
    SESSION_START_TABLE,
    STRINGS_TABLE,
    THREAD_NAMES_TABLE,
    ReportSchema,
    process_key,
)

_FETCH = 512  # rows per fetch: amortises the cursor's per-call cost, keeps memory flat
_KIND_NAMES: dict[int, GpuOpKind] = {0: "kernel", 1: "memcpy", 2: "memset"}
_KIND_CODES = {name: code for code, name in _KIND_NAMES.items()}

_PAYLOAD_COLUMNS = (
    "uint64Value",
    "int64Value",
    "doubleValue",
    "uint32Value",
    "int32Value",
    "floatValue",
    "jsonText",
)


@dataclass
class NvtxNames:
    """Names NVTX gave at run time: domains and categories, per process.

    Attributes:
        domains: ``(process key, domainId)`` -> domain name.
        categories: ``(process key, domainId, category)`` -> category name.
    """

    domains: dict[tuple[int, int], str] = field(default_factory=dict)
    categories: dict[tuple[int, int, int], str] = field(default_factory=dict)

    def attributes(self, global_tid: int, row: Sequence[Any], first: int) -> NvtxAttributes:
        """The attributes in ``row[first:]``: domainId, category, color, then payload columns."""
        domain_id, category, color = row[first], row[first + 1], row[first + 2]
        process = process_key(global_tid)
        domain = self.domains.get((process, domain_id), "") if domain_id else ""
        category_name = None
        if category is not None:
            category_name = self.categories.get((process, domain_id or 0, category))
        payload = next((value for value in row[first + 3 :] if value is not None), None)
        return NvtxAttributes(domain, category, category_name, color, payload)


class ReportQueries:
    """Reads one export.

    Args:
        connection: From :func:`~ncompass.traces.nsys.schema.open_report`.
        schema: What the export holds.
    """

    def __init__(self, connection: sqlite3.Connection, schema: ReportSchema) -> None:
        self.db = connection
        self.schema = schema
        self.types = schema.event_types
        self.gpu_tables = [table for table in GPU_OP_TABLES if schema.has_table(table)]
        self._strings = schema.has_table(STRINGS_TABLE)
        for table in self.gpu_tables:
            schema.require(table, "start", "end", "deviceId", "contextId", "streamId")
        if schema.has_table(RUNTIME_TABLE):
            schema.require(RUNTIME_TABLE, "start", "end", "globalTid", "correlationId")
        if schema.has_table(NVTX_TABLE):
            schema.require(NVTX_TABLE, "start", "end", "eventType", "globalTid")

    # ------------------------------------------------------------------ small lookup tables

    def end_of_report(self) -> int:
        """The latest timestamp of any event: where ranges that never ended are drawn to."""
        latest = 0
        for table in (*self.gpu_tables, RUNTIME_TABLE, NVTX_TABLE, OSRT_TABLE):
            if self.schema.has_table(table):
                row = self.db.execute(f'SELECT MAX(start), MAX("end") FROM {table}').fetchone()
                latest = max([latest, *(value for value in row if isinstance(value, int))])
        return latest

    def row_count(self) -> int:
        """Rows of the event tables the converter reads (what a progress bar counts)."""
        total = 0
        for table in (*self.gpu_tables, RUNTIME_TABLE, NVTX_TABLE, OSRT_TABLE):
            if self.schema.has_table(table):
                total += int(self.db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
        return total

    def nvtx_names(self) -> NvtxNames:
        """Domain and category names registered through NVTX."""
        names = NvtxNames()
        if not self.schema.has_table(NVTX_TABLE):
            return names
        domain_id = self.schema.column(NVTX_TABLE, "domainId", "e")
        category = self.schema.column(NVTX_TABLE, "category", "e")
        rows = self.db.execute(
            f"SELECT e.eventType, e.globalTid, {domain_id}, {category}, {self._text('e')} "
            f"FROM {NVTX_TABLE} AS e {self._text_join('e')} "
            f"WHERE e.eventType IN ({self.types.domain_create}, {self.types.category})"
        )
        for event_type, global_tid, domain, category_id, text in rows:
            process = process_key(global_tid or 0)
            if event_type == self.types.domain_create and domain is not None:
                names.domains[(process, domain)] = text or ""
            elif category_id is not None:
                names.categories[(process, domain or 0, category_id)] = text or ""
        return names

    def process_names(self) -> dict[int, str]:
        """Process key -> name, from ``PROCESSES``."""
        if not self.schema.has_column(PROCESSES_TABLE, "globalPid"):
            return {}
        rows = self.db.execute(f"SELECT globalPid, name FROM {PROCESSES_TABLE}")
        return {process_key(pid): str(name) for pid, name in rows if pid is not None and name}

    def thread_names(self) -> dict[int, str]:
        """``globalTid`` -> name: the OS name, or the one given with ``nvtxNameOsThread``."""
        names: dict[int, str] = {}
        if self.schema.has_column(THREAD_NAMES_TABLE, "nameId") and self._strings:
            rows = self.db.execute(
                f"SELECT t.globalTid, s.value FROM {THREAD_NAMES_TABLE} AS t "
                f"JOIN {STRINGS_TABLE} AS s ON s.id = t.nameId"
            )
            names.update((tid, str(name)) for tid, name in rows if tid is not None and name)
        if self.schema.has_table(NVTX_TABLE):
            rows = self.db.execute(
                f"SELECT e.globalTid, {self._text('e')} FROM {NVTX_TABLE} AS e "
                f"{self._text_join('e')} WHERE e.eventType = {self.types.thread_name}"
            )
            names.update((tid, str(name)) for tid, name in rows if tid is not None and name)
        return names

    def gpu_names(self) -> dict[int, str]:
        """Device id -> GPU name, from ``TARGET_INFO_GPU``."""
        if not self.schema.has_column(GPU_INFO_TABLE, "name"):
            return {}
        device = "cuDevice" if self.schema.has_column(GPU_INFO_TABLE, "cuDevice") else "id"
        rows = self.db.execute(f"SELECT {device}, name FROM {GPU_INFO_TABLE}")
        return {int(index): str(name) for index, name in rows if index is not None and name}

    def device_properties(self) -> list[dict[str, Any]]:
        """The GPUs in the shape of Kineto's ``deviceProperties``."""
        if not self.schema.has_column(GPU_INFO_TABLE, "name"):
            return []
        wanted = {
            "totalMemory": "totalGlobalMem",
            "smCount": "numSms",
            "computeMajor": "computeMajor",
            "computeMinor": "computeMinor",
        }
        present = [column for column in wanted if self.schema.has_column(GPU_INFO_TABLE, column)]
        device = "cuDevice" if self.schema.has_column(GPU_INFO_TABLE, "cuDevice") else "id"
        columns = ", ".join([device, "name", *present])
        properties = []
        for row in self.db.execute(f"SELECT {columns} FROM {GPU_INFO_TABLE} ORDER BY {device}"):
            entry: dict[str, Any] = {"id": row[0], "name": row[1]}
            entry.update((wanted[c], value) for c, value in zip(present, row[2:], strict=True))
            properties.append(entry)
        return properties

    def session_start_ns(self) -> int | None:
        """Wall-clock (Unix epoch) nanoseconds of the report's time zero, when recorded."""
        if not self.schema.has_column(SESSION_START_TABLE, "utcEpochNs"):
            return None
        row = self.db.execute(f"SELECT utcEpochNs FROM {SESSION_START_TABLE}").fetchone()
        return int(row[0]) if row and isinstance(row[0], int) else None

    def export_metadata(self) -> dict[str, str]:
        """``META_DATA_EXPORT`` (product and schema version of the exporter)."""
        if not self.schema.has_column(EXPORT_METADATA_TABLE, "value"):
            return {}
        rows = self.db.execute(f"SELECT name, value FROM {EXPORT_METADATA_TABLE}")
        return {str(name): str(value) for name, value in rows}

    # ------------------------------------------------------------------ temporary tables

    def create_work_tables(self) -> None:
        """Create and fill the converter's temporary tables (see the module docstring)."""
        db = self.db
        db.execute(
            "CREATE TEMP TABLE ncompass_gpu_launch (kind INTEGER, row INTEGER, start INTEGER, "
            '"end" INTEGER, process INTEGER, device INTEGER, context INTEGER, stream INTEGER, '
            "correlation INTEGER)"
        )
        for table in self.gpu_tables:
            if not self.schema.has_column(table, "correlationId"):
                continue
            process = self._process_of(table, "g")
            db.execute(
                f"INSERT INTO temp.ncompass_gpu_launch SELECT {GPU_OP_KINDS[table]}, g.rowid, "
                f'g.start, g."end", {process}, g.deviceId, g.contextId, g.streamId, '
                f"g.correlationId FROM main.{table} AS g WHERE g.correlationId IS NOT NULL"
            )
        db.execute(
            "CREATE INDEX temp.ncompass_gpu_launch_by_correlation "
            "ON ncompass_gpu_launch (process, correlation)"
        )
        db.execute(
            "CREATE TEMP TABLE ncompass_op_link (kind INTEGER, row INTEGER, first INTEGER, "
            "range_name TEXT, range_path TEXT, PRIMARY KEY (kind, row)) WITHOUT ROWID"
        )
        db.execute(
            "CREATE TEMP TABLE ncompass_projection (process INTEGER, device INTEGER, "
            'context INTEGER, stream INTEGER, start INTEGER, "end" INTEGER, name TEXT, '
            "domain TEXT, gpu_ops INTEGER, gpu_ns INTEGER, tid INTEGER)"
        )

    def add_op_links(self, rows: list[tuple[int, int, int, str | None, str | None]]) -> None:
        """Record ``(kind code, row, first of its launch, innermost range, range path)`` rows."""
        self.db.executemany(
            "INSERT OR IGNORE INTO temp.ncompass_op_link VALUES (?, ?, ?, ?, ?)", rows
        )

    def add_projections(self, rows: list[tuple[Any, ...]]) -> None:
        """Record projected ranges (columns of ``ncompass_projection``)."""
        self.db.executemany(
            "INSERT INTO temp.ncompass_projection VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows
        )

    def projections(self) -> Iterator[tuple[Any, ...]]:
        """Projected ranges by stream, then start (longer first)."""
        return self._rows(
            "SELECT * FROM temp.ncompass_projection ORDER BY process, device, context, stream, "
            'start, "end" DESC'
        )

    # ------------------------------------------------------------------ CPU-side events

    def runtime_calls(self) -> Iterator[RuntimeCall]:
        """CUDA API calls with the GPU operations each launched, by thread and start."""
        if not self.schema.has_table(RUNTIME_TABLE):
            return
        name = "COALESCE(s.value, '')" if self._strings else "''"
        join_name = f"LEFT JOIN {STRINGS_TABLE} AS s ON s.id = r.nameId" if self._strings else ""
        returned = self.schema.column(RUNTIME_TABLE, "returnValue", "r")
        rows = self._rows(
            f'SELECT r.rowid, r.globalTid, r.start, r."end", r.correlationId, {name}, {returned}, '
            'g.kind, g.row, g.start, g."end", g.process, g.device, g.context, g.stream '
            f"FROM main.{RUNTIME_TABLE} AS r {join_name} "
            "LEFT JOIN temp.ncompass_gpu_launch AS g "
            "ON g.process = (r.globalTid >> 24) AND g.correlation = r.correlationId "
            'WHERE r.globalTid IS NOT NULL ORDER BY r.globalTid, r.start, r."end" DESC, r.rowid, '
            "g.start"
        )
        for _, group in groupby(rows, key=lambda row: row[0]):
            first = next(group)
            call = RuntimeCall(first[0], first[1], first[2], first[3], first[4], first[5], first[6])
            for row in (first, *group):
                if row[7] is not None:
                    call.ops.append(GpuOpLaunch(_KIND_NAMES[row[7]], *row[8:15]))
            yield call

    def thread_ranges(self, names: NvtxNames, end_of_report: int) -> Iterator[NvtxRange]:
        """NVTX ranges that begin and end on one thread, by thread and start (outer first)."""
        yield from self._ranges(names, end_of_report, same_thread=True)

    def cross_thread_ranges(self, names: NvtxNames, end_of_report: int) -> Iterator[NvtxRange]:
        """Start/end ranges that end on another thread than the one that started them."""
        yield from self._ranges(names, end_of_report, same_thread=False)

    def marks(self, names: NvtxNames) -> Iterator[NvtxMark]:
        """NVTX marks, by thread and time."""
        if not self.schema.has_table(NVTX_TABLE):
            return
        rows = self._rows(
            f"SELECT e.rowid, e.globalTid, e.start, {self._text('e')}, {self._attributes('e')} "
            f"FROM {NVTX_TABLE} AS e {self._text_join('e')} "
            f"WHERE e.eventType = {self.types.mark} AND e.globalTid IS NOT NULL "
            "ORDER BY e.globalTid, e.start"
        )
        for row in rows:
            attributes = names.attributes(row[1], row, 4)
            yield NvtxMark(row[0], row[1], row[2], row[3] or "", attributes)

    def os_calls(self) -> Iterator[OsCall]:
        """OS runtime library calls, by thread and start (outer first)."""
        if not self.schema.has_table(OSRT_TABLE):
            return
        name = "COALESCE(s.value, '')" if self._strings else "''"
        join_name = f"LEFT JOIN {STRINGS_TABLE} AS s ON s.id = o.nameId" if self._strings else ""
        returned = self.schema.column(OSRT_TABLE, "returnValue", "o")
        nesting = self.schema.column(OSRT_TABLE, "nestingLevel", "o")
        rows = self._rows(
            f'SELECT o.globalTid, o.start, o."end", {name}, {returned}, {nesting} '
            f"FROM {OSRT_TABLE} AS o {join_name} WHERE o.globalTid IS NOT NULL "
            'ORDER BY o.globalTid, o.start, o."end" DESC'
        )
        for row in rows:
            yield OsCall(*row)

    # ------------------------------------------------------------------ GPU-side events

    def gpu_ops(self) -> Iterator[GpuOp]:
        """Kernels, copies and sets, by stream then start (longer first), with their links."""
        tables = [self._gpu_ops_of(table) for table in self.gpu_tables]
        yield from heapq.merge(*tables, key=lambda op: op.order)

    def _gpu_ops_of(self, table: str) -> Iterator[GpuOp]:
        kind = _KIND_NAMES[GPU_OP_KINDS[table]]
        details, build = detail_columns(self.schema, table)
        correlation = self.schema.column(table, "correlationId", "g")
        rows = self._rows(
            f'SELECT g.rowid, g.start, g."end", {self._process_of(table, "g")}, g.deviceId, '
            f"g.contextId, g.streamId, {correlation}, l.row IS NOT NULL, l.first, "
            f"l.range_name, l.range_path, {details} FROM main.{table} AS g "
            f"{name_joins(self.schema, table)} "
            f"LEFT JOIN temp.ncompass_op_link AS l ON l.kind = {_KIND_CODES[kind]} "
            "AND l.row = g.rowid "
            'ORDER BY 4, g.deviceId, g.contextId, g.streamId, g.start, g."end" DESC'
        )
        for row in rows:
            name, args = build(row[12:])
            path = row[11]
            yield GpuOp(
                kind=kind,
                row=row[0],
                name=name,
                start=row[1],
                end=row[2],
                process=row[3],
                device=row[4],
                context=row[5],
                stream=row[6],
                correlation=row[7],
                launched=bool(row[8]),
                first_of_launch=bool(row[9]),
                nvtx_range=row[10],
                nvtx_path=path.split("\x1f") if path else None,
                args=args,
            )

    # ------------------------------------------------------------------ helpers

    def _ranges(
        self, names: NvtxNames, end_of_report: int, *, same_thread: bool
    ) -> Iterator[NvtxRange]:
        if not self.schema.has_table(NVTX_TABLE):
            return
        ends_on = self.schema.column(NVTX_TABLE, "endGlobalTid", "e")
        same = f"({ends_on} IS NULL OR {ends_on} = e.globalTid)"
        push_pops = ", ".join(str(code) for code in self.types.push_pops)
        rows = self._rows(
            f'SELECT e.rowid, e.globalTid, {ends_on}, e.start, COALESCE(e."end", ?), '
            f'e."end" IS NULL, e.eventType IN ({push_pops}), {self._text("e")}, '
            f"{self._attributes('e')} FROM {NVTX_TABLE} AS e {self._text_join('e')} "
            f"WHERE e.eventType IN ({', '.join(str(code) for code in self.types.ranges)}) "
            f"AND e.globalTid IS NOT NULL AND {'' if same_thread else 'NOT '}{same} "
            "ORDER BY e.globalTid, e.start, 5 DESC",
            (end_of_report,),
        )
        for row in rows:
            yield NvtxRange(
                row=row[0],
                global_tid=row[1],
                end_global_tid=row[2] if row[2] is not None and row[2] != row[1] else None,
                start=row[3],
                end=max(row[4], row[3]),
                unclosed=bool(row[5]),
                kind="push_pop" if row[6] else "start_end",
                name=row[7] or "",
                attributes=names.attributes(row[1], row, 8),
            )

    def _text(self, alias: str) -> str:
        """The event's name: its own text, else its registered string."""
        has_id = self.schema.has_column(NVTX_TABLE, "textId") and self._strings
        return f"COALESCE({alias}.text, t.value)" if has_id else f"{alias}.text"

    def _text_join(self, alias: str) -> str:
        if self.schema.has_column(NVTX_TABLE, "textId") and self._strings:
            return f"LEFT JOIN {STRINGS_TABLE} AS t ON t.id = {alias}.textId"
        return ""

    def _attributes(self, alias: str) -> str:
        columns = ("domainId", "category", "color", *_PAYLOAD_COLUMNS)
        return ", ".join(self.schema.column(NVTX_TABLE, c, alias) for c in columns)

    def _process_of(self, table: str, alias: str) -> str:
        if self.schema.has_column(table, "globalPid"):
            return f"(COALESCE({alias}.globalPid, 0) >> 24)"
        return "0"

    def _rows(self, sql: str, parameters: Sequence[Any] = ()) -> Iterator[tuple[Any, ...]]:
        cursor = self.db.execute(sql, parameters)
        try:
            while rows := cursor.fetchmany(_FETCH):
                yield from rows
        finally:
            cursor.close()


__all__ = ["NvtxNames", "ReportQueries"]
