"""Whether the machine was busy during the run: the share its main thread waited for a CPU.

``ncompass run`` records in the sidecar (``NAME.ncompass.json``, key ``cpu_wait``) how long the
main thread ran and how long it was ready to run but waited for a CPU (Linux schedstat). When
it waited a good share of the run, every figure of the trace is stretched by waits that have
nothing to do with the code; the session already says so, and so does ``summarize``.
"""

from __future__ import annotations

from pathlib import Path

import orjson

# The share from which the machine counts as contended; the session's threshold (the capture
# layer's CONTENDED_WAIT_SHARE, which this layer cannot import; a test keeps them equal).
CONTENDED_WAIT_SHARE = 0.15


def sidecar_of(trace_path: str | Path) -> Path:
    """The sidecar ``ncompass run`` writes beside ``NAME.json[.gz]``: ``NAME.ncompass.json``."""
    path = Path(trace_path)
    stem = path.name
    for suffix in (".json.gz", ".json"):
        if stem.endswith(suffix):
            stem = stem[: -len(suffix)]
            break
    return path.with_name(stem + ".ncompass.json")


def cpu_waited_share(trace_path: str | Path) -> float | None:
    """The share of the run the main thread waited for a CPU, from the sidecar (None without
    a sidecar or its ``cpu_wait``, as for traces not written by ``ncompass run`` on Linux)."""
    try:
        sidecar = orjson.loads(sidecar_of(trace_path).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    record = sidecar.get("cpu_wait") if isinstance(sidecar, dict) else None
    if not isinstance(record, dict):
        return None
    waited, wall = record.get("waited_s"), record.get("wall_s")
    if not isinstance(waited, int | float) or not isinstance(wall, int | float) or wall <= 0:
        return None
    return min(1.0, max(0.0, waited / wall))


def busy_machine_sentence(share: float) -> str:
    """The report's warning for a contended run (markdown)."""
    return (
        f"**Busy machine:** the program's main thread waited for a CPU {share:.0%} of the run "
        "(other processes had the cores), so every time below is stretched, by different "
        "amounts: re-run on a quiet machine before acting on a small difference."
    )
