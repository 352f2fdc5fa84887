"""What the columns of the GPU activity tables mean: names and details of kernels, copies, sets.

Kernel names are ``StringIds`` entries (demangled and short); copies and sets are named the way
the PyTorch profiler names them (``Memcpy HtoD (Pageable -> Device)``, ``Memset (Device)``), so
ncompass analysis classifies them as memory operations.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ncompass.traces.nsys.schema import KERNEL_TABLE, MEMCPY_TABLE, STRINGS_TABLE, ReportSchema

Details = Callable[[Sequence[Any]], tuple[str, dict[str, object]]]
"""Turns a table's detail columns into ``(event name, args)``."""

# CUPTI's copy kinds and memory kinds (ENUM_CUDA_MEMCPY_OPER, ENUM_CUDA_MEM_KIND), in the short
# form the PyTorch profiler uses for copies: "Memcpy HtoD (Pageable -> Device)".
_COPY_KINDS = {
    1: "HtoD",
    2: "DtoH",
    3: "HtoA",
    4: "AtoH",
    5: "AtoA",
    6: "AtoD",
    7: "DtoA",
    8: "DtoD",
    9: "HtoH",
    10: "PtoP",
}
_MEMORY_KINDS = {
    0: "Pageable",
    1: "Pinned",
    2: "Device",
    3: "Array",
    4: "Managed",
    5: "Device Static",
    6: "Managed Static",
}


def detail_columns(schema: ReportSchema, table: str) -> tuple[str, Details]:
    """The extra columns to select from ``table`` (alias ``g``) and how to read them."""
    strings = schema.has_table(STRINGS_TABLE)
    column = schema.column
    wanted: tuple[str, ...]
    if table == KERNEL_TABLE:
        wanted = (
            "gridX",
            "gridY",
            "gridZ",
            "blockX",
            "blockY",
            "blockZ",
            "registersPerThread",
            "staticSharedMemory",
            "dynamicSharedMemory",
        )
        names = "COALESCE(dn.value, sn.value, '')" if strings else "''"
        short = "sn.value" if strings else "NULL"
        sql = ", ".join([names, short, *(column(table, c, "g") for c in wanted)])
        return sql, _kernel_details
    if table == MEMCPY_TABLE:
        wanted = ("bytes", "copyKind", "srcKind", "dstKind")
        return ", ".join(column(table, c, "g") for c in wanted), _memcpy_details
    wanted = ("bytes", "value", "memKind")
    return ", ".join(column(table, c, "g") for c in wanted), _memset_details


def name_joins(schema: ReportSchema, table: str) -> str:
    """The joins that give kernel rows their names (``dn.value``, ``sn.value``)."""
    if table != KERNEL_TABLE or not schema.has_table(STRINGS_TABLE):
        return ""
    joins = []
    for alias, name_column in (("dn", "demangledName"), ("sn", "shortName")):
        if schema.has_column(table, name_column):
            joins.append(f"LEFT JOIN {STRINGS_TABLE} AS {alias} ON {alias}.id = g.{name_column}")
        else:
            joins.append(f"LEFT JOIN (SELECT NULL AS value) AS {alias} ON 0")
    return " ".join(joins)


def _kernel_details(values: Sequence[Any]) -> tuple[str, dict[str, object]]:
    name, short, gx, gy, gz, bx, by, bz, registers, static_shared, dynamic_shared = values
    args: dict[str, object] = {}
    if short and short != name:
        args["short name"] = short
    if gx is not None:
        args["grid"] = [gx, gy, gz]
    if bx is not None:
        args["block"] = [bx, by, bz]
    if registers is not None:
        args["registers per thread"] = registers
    if static_shared is not None or dynamic_shared is not None:
        args["shared memory"] = (static_shared or 0) + (dynamic_shared or 0)
    return str(name or short or "kernel"), args


def _memcpy_details(values: Sequence[Any]) -> tuple[str, dict[str, object]]:
    size, copy_kind, source, destination = values
    direction = _COPY_KINDS.get(copy_kind, "")
    name = f"Memcpy {direction}".rstrip()
    if source in _MEMORY_KINDS and destination in _MEMORY_KINDS:
        name += f" ({_MEMORY_KINDS[source]} -> {_MEMORY_KINDS[destination]})"
    return name, {"bytes": size} if size is not None else {}


def _memset_details(values: Sequence[Any]) -> tuple[str, dict[str, object]]:
    size, value, memory_kind = values
    name = "Memset" + (f" ({_MEMORY_KINDS[memory_kind]})" if memory_kind in _MEMORY_KINDS else "")
    args: dict[str, object] = {}
    if size is not None:
        args["bytes"] = size
    if value is not None:
        args["value"] = value
    return name, args


__all__ = ["Details", "detail_columns", "name_joins"]
