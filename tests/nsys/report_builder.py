"""Writes SQLite files shaped like ``nsys export --type sqlite`` output, holding chosen events.

Tables, columns, enum values and id encodings are the ones Nsight Systems writes (export schema
3.x, as of nsys 2024): ``globalTid = pid << 24 | tid`` (plus machine bits above bit 48 when
``machine`` is given), ``globalPid`` the same with tid 0, names in ``StringIds``, NVTX event
types from ``ENUM_NSYS_EVENT_TYPE``. Every column nsys declares is created, so the converter
is tested against the full tables and not only against the columns it reads.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

SCHEMA = """
CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE ThreadNames (nameId INTEGER NOT NULL, priority INTEGER, globalTid INTEGER);
CREATE TABLE PROCESSES (globalPid INTEGER, pid INTEGER, name TEXT);
CREATE TABLE META_DATA_EXPORT (name TEXT NOT NULL, value TEXT);
CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER, utcTime TEXT, localTime TEXT);
CREATE TABLE TARGET_INFO_GPU (
    vmId INTEGER NOT NULL, id INTEGER NOT NULL, name TEXT, busLocation TEXT, isDiscrete INTEGER,
    l2CacheSize INTEGER, totalMemory INTEGER, memoryBandwidth INTEGER, clockRate INTEGER,
    smCount INTEGER, pwGpuId INTEGER, uuid TEXT, luid INTEGER, chipName TEXT, cuDevice INTEGER,
    ctxswDevPath TEXT, ctrlDevPath TEXT, revision INTEGER, nodeMask INTEGER,
    constantMemory INTEGER, maxIPC INTEGER, maxRegistersPerBlock INTEGER,
    maxShmemPerBlock INTEGER, maxShmemPerBlockOptin INTEGER, maxShmemPerSm INTEGER,
    maxRegistersPerSm INTEGER, threadsPerWarp INTEGER, asyncEngines INTEGER,
    maxWarpsPerSm INTEGER, maxBlocksPerSm INTEGER, maxThreadsPerBlock INTEGER,
    maxBlockDimX INTEGER, maxBlockDimY INTEGER, maxBlockDimZ INTEGER, maxGridDimX INTEGER,
    maxGridDimY INTEGER, maxGridDimZ INTEGER, computeMajor INTEGER, computeMinor INTEGER,
    smMajor INTEGER, smMinor INTEGER);
CREATE TABLE ENUM_NSYS_EVENT_TYPE (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
CREATE TABLE ENUM_CUDA_MEMCPY_OPER (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (
    start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
    contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL,
    correlationId INTEGER, globalPid INTEGER, demangledName INTEGER NOT NULL,
    shortName INTEGER NOT NULL, mangledName INTEGER, launchType INTEGER, cacheConfig INTEGER,
    registersPerThread INTEGER NOT NULL, gridX INTEGER NOT NULL, gridY INTEGER NOT NULL,
    gridZ INTEGER NOT NULL, blockX INTEGER NOT NULL, blockY INTEGER NOT NULL,
    blockZ INTEGER NOT NULL, staticSharedMemory INTEGER NOT NULL,
    dynamicSharedMemory INTEGER NOT NULL, localMemoryPerThread INTEGER NOT NULL,
    localMemoryTotal INTEGER NOT NULL, gridId INTEGER NOT NULL, sharedMemoryExecuted INTEGER,
    graphNodeId INTEGER, sharedMemoryLimitConfig INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (
    start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
    contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL,
    correlationId INTEGER, globalPid INTEGER, bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL,
    deprecatedSrcId INTEGER, srcKind INTEGER, dstKind INTEGER, srcDeviceId INTEGER,
    srcContextId INTEGER, dstDeviceId INTEGER, dstContextId INTEGER, migrationCause INTEGER,
    graphNodeId INTEGER, virtualAddress INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (
    start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
    contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL,
    correlationId INTEGER, globalPid INTEGER, value INTEGER NOT NULL, bytes INTEGER NOT NULL,
    graphNodeId INTEGER, memKind INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (
    start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL,
    globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL,
    returnValue INTEGER NOT NULL, callchainId INTEGER);
CREATE TABLE NVTX_EVENTS (
    start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER,
    category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER,
    textId INTEGER, domainId INTEGER, uint64Value INTEGER, int64Value INTEGER,
    doubleValue REAL, uint32Value INTEGER, int32Value INTEGER, floatValue REAL,
    jsonTextId INTEGER, jsonText TEXT, binaryData TEXT);
CREATE TABLE OSRT_API (
    start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL,
    globalTid INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL,
    nestingLevel INTEGER, callchainId INTEGER NOT NULL);
"""

EVENT_TYPES = {
    33: "NvtxCategory",
    34: "NvtxMark",
    39: "NvtxThread",
    59: "NvtxPushPopRange",
    60: "NvtxStartEndRange",
    75: "NvtxDomainCreate",
    76: "NvtxDomainDestroy",
}
COPY_KINDS = {1: "Host-to-Device", 2: "Device-to-Host", 8: "Device-to-Device"}
PUSH_POP, START_END, MARK, DOMAIN_CREATE, THREAD_NAME, CATEGORY = 59, 60, 34, 75, 39, 33
RUNTIME_CLASS, OSRT_CLASS = 1, 27


def global_tid(pid: int, tid: int, machine: int = 0) -> int:
    """A serialized thread id as nsys writes it."""
    return (machine << 48) | (pid << 24) | tid


def global_pid(pid: int, machine: int = 0) -> int:
    """A serialized process id as nsys writes it."""
    return global_tid(pid, 0, machine)


class ReportBuilder:
    """An export being written. Times are nanoseconds; ``close()`` commits it.

    Correlation ids are numbered per process from 1, as CUPTI numbers them in each process, so
    two processes reuse the same ids.
    """

    def __init__(self, path: Path, *, session_start_ns: int | None = 1_700_000_000_000_000_000):
        self.path = path
        self.db = sqlite3.connect(path)
        self.db.executescript(SCHEMA)
        self.db.executemany(
            "INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (?, ?, ?)",
            [(code, name, name) for code, name in EVENT_TYPES.items()],
        )
        self.db.executemany(
            "INSERT INTO ENUM_CUDA_MEMCPY_OPER VALUES (?, ?, ?)",
            [(code, f"CUDA_MEMCPY_KIND_{code}", label) for code, label in COPY_KINDS.items()],
        )
        self.db.executemany(
            "INSERT INTO META_DATA_EXPORT VALUES (?, ?)",
            [("EXPORT_PRODUCT_VERSION", "2024.6.2.225"), ("EXPORT_SCHEMA_VERSION", "3.16.1")],
        )
        if session_start_ns is not None:
            self.db.execute(
                "INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (?, '', '')",
                (session_start_ns,),
            )
        self._strings: dict[str, int] = {}
        self._correlations: dict[int, int] = {}
        self._grid = 0

    def string(self, text: str) -> int:
        """The ``StringIds`` id of ``text``."""
        if text not in self._strings:
            self._strings[text] = len(self._strings) + 1
            self.db.execute("INSERT INTO StringIds VALUES (?, ?)", (self._strings[text], text))
        return self._strings[text]

    def process(self, pid: int, name: str, machine: int = 0) -> None:
        """A process of the report."""
        self.db.execute(
            "INSERT INTO PROCESSES VALUES (?, ?, ?)", (global_pid(pid, machine), pid, name)
        )

    def thread(self, pid: int, tid: int, name: str, machine: int = 0) -> None:
        """A thread's OS name."""
        self.db.execute(
            "INSERT INTO ThreadNames VALUES (?, 0, ?)",
            (self.string(name), global_tid(pid, tid, machine)),
        )

    def gpu(self, device: int, name: str) -> None:
        """A GPU of the machine."""
        self.db.execute(
            "INSERT INTO TARGET_INFO_GPU (vmId, id, name, totalMemory, smCount, cuDevice, "
            "computeMajor, computeMinor) VALUES (0, ?, ?, 85899345920, 132, ?, 9, 0)",
            (device, name, device),
        )

    def domain(self, pid: int, tid: int, domain_id: int, name: str, at: int = 0) -> None:
        """``nvtxDomainCreate``: names ``domain_id`` in this process."""
        self._nvtx(at, None, DOMAIN_CREATE, pid, tid, text=name, domainId=domain_id)

    def category(self, pid: int, tid: int, domain_id: int, category: int, name: str) -> None:
        """``nvtxDomainNameCategory``."""
        self._nvtx(0, None, CATEGORY, pid, tid, text=name, domainId=domain_id, category=category)

    def nvtx_thread_name(self, pid: int, tid: int, name: str) -> None:
        """``nvtxNameOsThread``."""
        self._nvtx(0, None, THREAD_NAME, pid, tid, text=name)

    def push_pop(
        self,
        pid: int,
        tid: int,
        start: int,
        end: int | None,
        text: str,
        *,
        domain_id: int = 0,
        registered: bool = False,
        **columns: object,
    ) -> None:
        """A push/pop range (``end`` None: never popped)."""
        name = {"textId": self.string(text)} if registered else {"text": text}
        self._nvtx(start, end, PUSH_POP, pid, tid, domainId=domain_id, **name, **columns)

    def start_end(
        self,
        pid: int,
        tid: int,
        start: int,
        end: int | None,
        text: str,
        *,
        end_tid: int | None = None,
        range_id: int = 1,
        domain_id: int = 0,
        machine: int = 0,
        **columns: object,
    ) -> None:
        """A start/end range, ended on ``end_tid`` when given."""
        ends_on = global_tid(pid, end_tid, machine) if end_tid is not None else None
        self._nvtx(
            start,
            end,
            START_END,
            pid,
            tid,
            text=text,
            rangeId=range_id,
            domainId=domain_id,
            endGlobalTid=ends_on,
            machine=machine,
            **columns,
        )

    def mark(self, pid: int, tid: int, at: int, text: str, *, domain_id: int = 0) -> None:
        """An NVTX mark."""
        self._nvtx(at, None, MARK, pid, tid, text=text, domainId=domain_id)

    def call(
        self,
        pid: int,
        tid: int,
        start: int,
        end: int,
        name: str = "cudaLaunchKernel_v7000",
        machine: int = 0,
    ) -> int:
        """A CUDA API call; returns its correlation id."""
        key = global_pid(pid, machine)
        correlation = self._correlations[key] = self._correlations.get(key, 0) + 1
        self.db.execute(
            "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, ?, ?, ?, ?, 0, NULL)",
            (
                start,
                end,
                RUNTIME_CLASS,
                global_tid(pid, tid, machine),
                correlation,
                self.string(name),
            ),
        )
        return correlation

    def kernel(
        self,
        pid: int,
        correlation: int | None,
        start: int,
        end: int,
        name: str,
        *,
        device: int = 0,
        stream: int = 7,
        context: int = 1,
        machine: int = 0,
    ) -> None:
        """A kernel launched by the call with ``correlation`` (None: its launch is missing)."""
        self._grid += 1
        self.db.execute(
            "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, contextId, streamId, "
            "correlationId, globalPid, demangledName, shortName, registersPerThread, gridX, "
            "gridY, gridZ, blockX, blockY, blockZ, staticSharedMemory, dynamicSharedMemory, "
            "localMemoryPerThread, localMemoryTotal, gridId) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 32, 128, 1, 1, 256, 1, 1, 0, 1024, 0, 0, ?)",
            (
                start,
                end,
                device,
                context,
                stream,
                correlation,
                global_pid(pid, machine),
                self.string(f"void {name}<float>(float*)"),
                self.string(name),
                self._grid,
            ),
        )

    def memcpy(
        self,
        pid: int,
        correlation: int,
        start: int,
        end: int,
        size: int,
        *,
        copy_kind: int = 1,
        device: int = 0,
        stream: int = 7,
    ) -> None:
        """A copy (copy kind 1 = host to device), pageable host memory to device memory."""
        self.db.execute(
            "INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY (start, end, deviceId, contextId, streamId, "
            "correlationId, globalPid, bytes, copyKind, srcKind, dstKind) "
            "VALUES (?, ?, ?, 1, ?, ?, ?, ?, ?, 0, 2)",
            (start, end, device, stream, correlation, global_pid(pid), size, copy_kind),
        )

    def memset(
        self, pid: int, correlation: int, start: int, end: int, size: int, *, stream: int = 7
    ) -> None:
        """A memory set of device memory."""
        self.db.execute(
            "INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET (start, end, deviceId, contextId, streamId, "
            "correlationId, globalPid, value, bytes, memKind) VALUES (?, ?, 0, 1, ?, ?, ?, 0, ?, 2)",
            (start, end, stream, correlation, global_pid(pid), size),
        )

    def os_call(self, pid: int, tid: int, start: int, end: int, name: str) -> None:
        """An OS runtime library call."""
        self.db.execute(
            "INSERT INTO OSRT_API VALUES (?, ?, ?, ?, ?, 0, 0, 0)",
            (start, end, OSRT_CLASS, global_tid(pid, tid), self.string(name)),
        )

    def close(self) -> Path:
        """Commit and close; returns the file."""
        self.db.commit()
        self.db.close()
        return self.path

    def _nvtx(
        self,
        start: int,
        end: int | None,
        event_type: int,
        pid: int,
        tid: int,
        machine: int = 0,
        **columns: object,
    ) -> None:
        values = {
            "start": start,
            "end": end,
            "eventType": event_type,
            "globalTid": global_tid(pid, tid, machine),
            **columns,
        }
        names = ", ".join(values)
        marks = ", ".join("?" for _ in values)
        self.db.execute(
            f"INSERT INTO NVTX_EVENTS ({names}) VALUES ({marks})", list(values.values())
        )
