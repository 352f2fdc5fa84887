"""The sampling schedule: a background thread that takes sample k at start + k·interval.

Targets are computed from the start, never from the previous sample, so the time a reading takes
does not accumulate into drift. When a reading (or the machine) makes the thread miss ticks, it
skips to the next tick still ahead instead of bursting to catch up, and counts what it skipped.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class Sampler:
    """Calls ``take(tick)`` at ``start_ns + tick * interval_ns`` until stopped.

    Args:
        take: Takes one sample. Runs on the sampler thread; must not raise.
        interval_ns: The sampling period.
        clock: A monotonic clock in nanoseconds (injectable for tests).
        wait: Sleeps up to the given seconds; returns True when the sampler is asked to stop.
            Defaults to waiting on the stop event, so ``stop()`` wakes the thread at once.
    """

    def __init__(
        self,
        take: Callable[[int], None],
        interval_ns: int,
        *,
        clock: Callable[[], int] = time.perf_counter_ns,
        wait: Callable[[float], bool] | None = None,
    ) -> None:
        if interval_ns <= 0:
            raise ValueError("interval_ns must be positive")
        self._take = take
        self._interval_ns = interval_ns
        self._clock = clock
        self._stop = threading.Event()
        self._wait = wait if wait is not None else self._stop.wait
        self._thread: threading.Thread | None = None
        self.skipped_ticks = 0
        """Ticks skipped because a reading or the machine was too slow."""

    def start(self, start_ns: int) -> None:
        """Starts the thread; tick 0 is due at ``start_ns``."""
        if self._thread is not None:
            raise RuntimeError("a Sampler starts once")
        self._thread = threading.Thread(
            target=self.run, args=(start_ns,), name="ncompass-gpu-sampler", daemon=True
        )
        self._thread.start()

    def run(self, start_ns: int) -> None:
        """The schedule loop; returns when asked to stop. ``start`` runs it on a thread."""
        tick = 0
        while True:
            target = start_ns + tick * self._interval_ns
            now = self._clock()
            while now < target:
                if self._wait((target - now) / 1e9):
                    return
                now = self._clock()  # a timed wait may wake a little early
            if self._stop.is_set():
                return
            self._take(tick)
            if self._stop.is_set():
                return
            elapsed = self._clock() - start_ns
            next_tick = max(tick + 1, -(-elapsed // self._interval_ns))  # first tick not past
            self.skipped_ticks += next_tick - tick - 1
            tick = next_tick

    def request_stop(self) -> None:
        """Asks the loop to return after the sample in progress, without waiting for it."""
        self._stop.set()

    def stop(self, timeout_s: float) -> bool:
        """Stops the thread and waits for it; returns False if it is still running (a hung read)."""
        self._stop.set()
        if self._thread is None:
            return True
        self._thread.join(timeout_s)
        return not self._thread.is_alive()

    @property
    def thread(self) -> threading.Thread | None:
        """The sampler thread once started."""
        return self._thread
