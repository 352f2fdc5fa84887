"""Nsight Systems' SQLite export: the tables and columns the converter reads, as nsys names them.

``nsys export --type sqlite`` writes one table per kind of data, creates tables lazily (a report
without CUDA has no ``CUPTI_ACTIVITY_KIND_*`` tables) and adds columns over versions, so the
converter asks the file what it has (:class:`ReportSchema`) instead of assuming.

Identifiers are serialized: ``globalTid`` holds the process id in bits 24-47 and the thread id
in bits 0-23 (higher bits name the machine); ``globalPid`` is the same with the thread bits zero.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import quote

from ncompass.errors import TraceError

KERNEL_TABLE = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPY_TABLE = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET_TABLE = "CUPTI_ACTIVITY_KIND_MEMSET"
RUNTIME_TABLE = "CUPTI_ACTIVITY_KIND_RUNTIME"
NVTX_TABLE = "NVTX_EVENTS"
OSRT_TABLE = "OSRT_API"
STRINGS_TABLE = "StringIds"
THREAD_NAMES_TABLE = "ThreadNames"
PROCESSES_TABLE = "PROCESSES"
GPU_INFO_TABLE = "TARGET_INFO_GPU"
SESSION_START_TABLE = "TARGET_INFO_SESSION_START_TIME"
EXPORT_METADATA_TABLE = "META_DATA_EXPORT"
EVENT_TYPE_TABLE = "ENUM_NSYS_EVENT_TYPE"

GPU_OP_TABLES = (KERNEL_TABLE, MEMCPY_TABLE, MEMSET_TABLE)
"""GPU activity tables, in the order of their codes in :data:`GPU_OP_KINDS`."""

GPU_OP_KINDS = {KERNEL_TABLE: 0, MEMCPY_TABLE: 1, MEMSET_TABLE: 2}
"""A small code per GPU activity table: together with ``rowid`` it names one GPU operation."""

_EVENT_TABLES = (*GPU_OP_TABLES, RUNTIME_TABLE, NVTX_TABLE, OSRT_TABLE)

_THREAD_BITS = 24
_ID_MASK = (1 << _THREAD_BITS) - 1


def process_key(global_id: int) -> int:
    """The process part of a ``globalTid``/``globalPid`` (machine bits included)."""
    return global_id >> _THREAD_BITS


def os_pid(global_id: int) -> int:
    """The operating-system process id in a ``globalTid`` or ``globalPid``."""
    return (global_id >> _THREAD_BITS) & _ID_MASK


def process_pid(process: int) -> int:
    """The operating-system process id of a :func:`process_key`."""
    return process & _ID_MASK


def os_tid(global_tid: int) -> int:
    """The operating-system thread id in a ``globalTid``."""
    return global_tid & _ID_MASK


@dataclass(frozen=True)
class NvtxEventTypes:
    """The ``NVTX_EVENTS.eventType`` codes (``ENUM_NSYS_EVENT_TYPE``) the converter reads.

    The defaults are the values Nsight Systems documents; :meth:`ReportSchema.read` replaces
    them with the report's own enum table when it has one.
    """

    category: int = 33
    mark: int = 34
    thread_name: int = 39
    push_pop: int = 59
    start_end: int = 60
    nvtxt_push_pop: int = 70
    nvtxt_start_end: int = 71
    domain_create: int = 75

    @property
    def ranges(self) -> tuple[int, ...]:
        """Every range type: push/pop and start/end, from the API or imported NVTXT files."""
        return (self.push_pop, self.start_end, self.nvtxt_push_pop, self.nvtxt_start_end)

    @property
    def push_pops(self) -> tuple[int, ...]:
        """The push/pop range types."""
        return (self.push_pop, self.nvtxt_push_pop)


# ENUM_NSYS_EVENT_TYPE.name -> NvtxEventTypes field
_EVENT_TYPE_NAMES = {
    "NvtxCategory": "category",
    "NvtxMark": "mark",
    "NvtxThread": "thread_name",
    "NvtxPushPopRange": "push_pop",
    "NvtxStartEndRange": "start_end",
    "NvtxtPushPopRange": "nvtxt_push_pop",
    "NvtxtStartEndRange": "nvtxt_start_end",
    "NvtxDomainCreate": "domain_create",
}


@dataclass(frozen=True)
class ReportSchema:
    """What one exported report holds: its tables and their columns.

    Attributes:
        path: The SQLite file.
        columns: Table name -> its column names.
        event_types: The NVTX event type codes of this export.
    """

    path: Path
    columns: dict[str, frozenset[str]]
    event_types: NvtxEventTypes = field(default_factory=NvtxEventTypes)

    @classmethod
    def read(cls, connection: sqlite3.Connection, path: Path) -> ReportSchema:
        """Inspect an open export.

        Raises:
            TraceError: The file is not an SQLite database, or holds none of the tables
                Nsight Systems exports events into.
        """
        try:
            tables = [
                str(row[0])
                for row in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")
            ]
            columns = {
                table: frozenset(
                    str(row[1]) for row in connection.execute(f'PRAGMA table_info("{table}")')
                )
                for table in tables
            }
        except sqlite3.DatabaseError as error:
            raise TraceError(
                f"{path}: not an SQLite database ({error}); pass an .nsys-rep report or the "
                "file `nsys export --type sqlite` wrote"
            ) from None
        schema = cls(path, columns)
        if not any(schema.has_table(table) for table in _EVENT_TABLES):
            raise TraceError(
                f"{path}: not an Nsight Systems export: it has none of the tables "
                f"{', '.join(_EVENT_TABLES)}; export the report with "
                "`nsys export --type sqlite REPORT.nsys-rep`"
            )
        return cls(path, columns, _event_types(connection, schema))

    def has_table(self, table: str) -> bool:
        """Whether the export has ``table``."""
        return table in self.columns

    def has_column(self, table: str, column: str) -> bool:
        """Whether the export has ``table`` with ``column``."""
        return column in self.columns.get(table, frozenset())

    def column(self, table: str, column: str, alias: str) -> str:
        """SQL for ``alias.column``, or ``NULL`` when this export lacks that column."""
        return f"{alias}.{column}" if self.has_column(table, column) else "NULL"

    def require(self, table: str, *columns: str) -> None:
        """Check that ``table`` has ``columns``.

        Raises:
            TraceError: Naming the file, the table and the missing columns.
        """
        missing = [column for column in columns if not self.has_column(table, column)]
        if missing:
            raise TraceError(
                f"{self.path}: table {table} lacks the column(s) {', '.join(missing)}; this "
                "export is from an Nsight Systems version ncompass does not know. Export the "
                "report again with a recent `nsys export --type sqlite`"
            )


MAX_VALUE_BYTES = 16 << 20
"""Largest single value (a name, an NVTX message or payload) read from a report export."""
_SQLITE_LIMIT_LENGTH = 0  # sqlite3.SQLITE_LIMIT_LENGTH, named there from Python 3.11 on


def open_report(path: Path) -> sqlite3.Connection:
    """Open an exported report read-only; temporary tables and sorts go to temporary files.

    Raises:
        TraceError: The file is missing or cannot be opened.
    """
    if not path.is_file():
        raise TraceError(f"{path}: no such report file; check the path")
    try:
        connection = sqlite3.connect(f"file:{quote(str(path.resolve()))}?mode=ro", uri=True)
        # Sorting and the converter's own tables spill to disk: memory stays bounded.
        connection.execute("PRAGMA temp_store = FILE")
        connection.execute("PRAGMA cache_size = -8192")  # 8 MiB of page cache
        # A single value past this is refused (sqlite3.DataError) instead of read into memory.
        set_limit = getattr(connection, "setlimit", None)  # Python 3.11+
        if set_limit is not None:
            set_limit(_SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
    except sqlite3.DatabaseError as error:
        raise TraceError(
            f"{path}: not an SQLite database ({error}); pass an .nsys-rep report or the "
            "file `nsys export --type sqlite` wrote"
        ) from None
    except sqlite3.Error as error:
        raise TraceError(f"{path}: cannot open the report ({error})") from None
    return connection


def _event_types(connection: sqlite3.Connection, schema: ReportSchema) -> NvtxEventTypes:
    if not schema.has_column(EVENT_TYPE_TABLE, "name"):
        return NvtxEventTypes()
    found: dict[str, int] = {}
    for code, name in connection.execute(f"SELECT id, name FROM {EVENT_TYPE_TABLE}"):
        attribute = _EVENT_TYPE_NAMES.get(str(name))
        if attribute is not None and isinstance(code, int):
            found[attribute] = code
    return replace(NvtxEventTypes(), **found)


__all__ = [
    "EVENT_TYPE_TABLE",
    "EXPORT_METADATA_TABLE",
    "GPU_INFO_TABLE",
    "GPU_OP_KINDS",
    "GPU_OP_TABLES",
    "KERNEL_TABLE",
    "MAX_VALUE_BYTES",
    "MEMCPY_TABLE",
    "MEMSET_TABLE",
    "NVTX_TABLE",
    "OSRT_TABLE",
    "PROCESSES_TABLE",
    "RUNTIME_TABLE",
    "SESSION_START_TABLE",
    "STRINGS_TABLE",
    "THREAD_NAMES_TABLE",
    "NvtxEventTypes",
    "ReportSchema",
    "open_report",
    "os_pid",
    "os_tid",
    "process_key",
    "process_pid",
]
