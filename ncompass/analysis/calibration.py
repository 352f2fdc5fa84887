"""This machine's CPU roofline, measured: a GEMM and a stream copy, cached per machine.

A CPU has no datasheet row, so its peaks are measured once (a second or two) and cached under
the machine's identity (host, processor model, core count, torch version and threads) in
``$NCOMPASS_PEAKS_DIR`` (default ``$XDG_CACHE_HOME/ncompass/peaks``). A peak measured on a busy
machine would later be beaten by the program itself, so each measurement is the best of
several repeats, the cache keeps the best of every calibration, and the GEMM figure is bounded
by the processor's theoretical peak (cores × clock × FLOPs per cycle of its widest FMA) where
``/proc/cpuinfo`` and ``cpufreq`` tell them.

torch is imported only here, and only when a calibration runs.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import time
from pathlib import Path
from typing import Any

from ncompass._files import write_atomic
from ncompass.analysis.device_peaks import DevicePeaks
from ncompass.environment_variables import NCOMPASS_PEAKS_DIR

_GEMM_SIZE = 1024  # fp32: 4 MiB a matrix, 2.1 GFLOP a product
_COPY_BYTES = 64 << 20  # larger than any last-level cache this is likely to run on
_REPEATS = 7


def peaks_dir() -> Path:
    """``$NCOMPASS_PEAKS_DIR``, else ``$XDG_CACHE_HOME/ncompass/peaks`` (``~/.cache``)."""
    override = os.environ.get(NCOMPASS_PEAKS_DIR)
    if override:
        return Path(override).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "ncompass" / "peaks"


def _cpuinfo() -> dict[str, str]:
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return {}
    info: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            break  # the first processor is enough
        key, _, value = line.partition(":")
        info[key.strip()] = value.strip()
    return info


def cpu_name() -> str:
    """The processor's model name (``platform.processor()`` where /proc/cpuinfo is absent)."""
    return _cpuinfo().get("model name") or platform.processor() or platform.machine() or "cpu"


def theoretical_flops() -> float | None:
    """cores × max clock × fp32 FLOPs a cycle (2 FMA units of the widest vector), or None."""
    info = _cpuinfo()
    flags = set(info.get("flags", "").split())
    lanes = 16 if "avx512f" in flags else 8 if "avx2" in flags or "avx" in flags else 4
    if not flags:
        return None
    per_cycle = lanes * 2 * (2 if "fma" in flags or "avx512f" in flags else 1)
    clock_hz: float | None = None
    try:
        khz = Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq").read_text()
        clock_hz = float(khz) * 1e3
    except (OSError, ValueError):
        try:
            clock_hz = float(info.get("cpu MHz", "")) * 1e6
        except ValueError:
            return None
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return float(cores or 1) * clock_hz * per_cycle


def machine_identity() -> dict[str, Any]:
    """What the cached peaks belong to: a different value of any of these calibrates anew."""
    import torch  # here only: calibrating needs it, summarizing a GPU trace does not

    return {
        "host": platform.node(),
        "cpu": cpu_name(),
        "cores": os.cpu_count(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
    }


def _best_seconds(run: Any, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def measure() -> tuple[float, float]:
    """Measure (GEMM FLOP/s, copy bytes/s) on this machine now: the best of a few repeats."""
    import torch

    a = torch.randn(_GEMM_SIZE, _GEMM_SIZE)
    b = torch.randn(_GEMM_SIZE, _GEMM_SIZE)
    out = torch.empty(_GEMM_SIZE, _GEMM_SIZE)
    torch.mm(a, b, out=out)  # warm: first call allocates and picks a kernel
    gemm = _best_seconds(lambda: torch.mm(a, b, out=out), _REPEATS)
    source = torch.empty(_COPY_BYTES // 4)
    target = torch.empty_like(source)
    target.copy_(source)
    copy = _best_seconds(lambda: target.copy_(source), _REPEATS)
    return 2.0 * _GEMM_SIZE**3 / gemm, 2.0 * _COPY_BYTES / copy  # a copy reads and writes


def cpu_peaks(*, recalibrate: bool = False) -> DevicePeaks:
    """This machine's measured peaks: the cached ones, else measured now and cached.

    Args:
        recalibrate: Measure again even when cached (the cache keeps the better figures).
    """
    identity = machine_identity()
    key = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]
    path = peaks_dir() / f"{key}.json"
    cached = _read(path)
    if cached is None or recalibrate:
        flops, bandwidth = measure()
        if cached is not None:  # the best of every calibration: a busy moment never lowers it
            flops = max(flops, cached["flops_per_s"])
            bandwidth = max(bandwidth, cached["bytes_per_s"])
        bound = theoretical_flops()
        if bound is not None:
            flops = min(flops, bound)
        cached = {"identity": identity, "flops_per_s": flops, "bytes_per_s": bandwidth}
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(path, json.dumps(cached, indent=1).encode())
        except OSError:  # a read-only home: the figures still hold for this summary
            pass
    flops = float(cached["flops_per_s"])
    note = (
        f"measured on this machine ({_GEMM_SIZE}x{_GEMM_SIZE} fp32 GEMM, "
        f"{_COPY_BYTES >> 20} MiB copy, best of {_REPEATS}; cached in {path})"
    )
    return DevicePeaks(
        str(identity["cpu"]),
        "cpu",
        {"fp32": flops},
        float(cached["bytes_per_s"]),
        "measured",
        note,
        extra={"theoretical_flops_per_s": theoretical_flops()},
    )


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    flops, bandwidth = data.get("flops_per_s"), data.get("bytes_per_s")
    if not isinstance(flops, (int, float)) or not isinstance(bandwidth, (int, float)):
        return None
    if flops <= 0 or bandwidth <= 0:
        return None
    return data


__all__ = ["cpu_name", "cpu_peaks", "machine_identity", "measure", "peaks_dir"]
