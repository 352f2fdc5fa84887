"""Timing one candidate launch: CUDA events on a GPU, the CPU clock in the interpreter."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any, Protocol


class Timer(Protocol):
    """Measures how long ``run`` takes, in milliseconds (a robust middle of several runs)."""

    name: str

    def measure(self, run: Callable[[], object]) -> float:
        """Run ``run`` a few times and return its typical duration in ms."""


class CpuTimer:
    """Wall-clock timing for kernels executed by Triton's interpreter (synchronous, on the CPU).

    Args:
        warmup: Untimed runs first (the interpreter rewrites a kernel's AST on first use).
        repeat: Timed runs; the median is returned.
    """

    name = "cpu"

    def __init__(self, warmup: int = 1, repeat: int = 3) -> None:
        self.warmup = warmup
        self.repeat = repeat

    def measure(self, run: Callable[[], object]) -> float:
        """Median wall time of ``repeat`` runs after ``warmup`` runs, in ms."""
        for _ in range(self.warmup):
            run()
        samples = []
        for _ in range(self.repeat):
            start = time.perf_counter()
            run()
            samples.append((time.perf_counter() - start) * 1e3)
        return statistics.median(samples)


class CudaEventTimer:
    """GPU timing with CUDA events, L2 flushed before each run.

    Without the flush, a candidate whose operands are still in L2 from the previous run looks
    faster than it is in a model, where other kernels run in between.

    Args:
        warmup: Untimed runs first (the first one compiles the kernel).
        repeat: Timed runs; the median is returned.
        flush_bytes: Size of the buffer written to evict L2.
    """

    name = "cuda-events"

    def __init__(self, warmup: int = 3, repeat: int = 20, flush_bytes: int = 256 << 20) -> None:
        self.warmup = warmup
        self.repeat = repeat
        self.flush_bytes = flush_bytes
        self._flush: Any = None

    def measure(self, run: Callable[[], object]) -> float:
        """Median of ``repeat`` event-timed runs, in ms."""
        import torch

        if self._flush is None:
            self._flush = torch.empty(self.flush_bytes, dtype=torch.int8, device="cuda")
        for _ in range(self.warmup):
            run()
        torch.cuda.synchronize()
        pairs = []
        for _ in range(self.repeat):
            self._flush.zero_()
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            run()
            end.record()
            pairs.append((start, end))
        torch.cuda.synchronize()
        return float(statistics.median(start.elapsed_time(end) for start, end in pairs))


def timer_for(interpreted: bool) -> Timer:
    """The timer that fits where kernels run."""
    return CpuTimer() if interpreted else CudaEventTimer()


__all__ = ["CpuTimer", "CudaEventTimer", "Timer", "timer_for"]
