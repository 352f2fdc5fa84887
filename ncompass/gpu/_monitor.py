"""``GpuMonitor``: sample devices in the background while a block of code runs."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from types import TracebackType

from ncompass.gpu import _switch_interval
from ncompass.gpu._backends import BACKEND_NAMES, MonitorBackend, open_backend
from ncompass.gpu._backends.base import DeviceInfo, Notes
from ncompass.gpu._backends.none import NoneBackend
from ncompass.gpu._sample import DeviceSpec, GpuSample, normalize_devices
from ncompass.gpu._sampler import Sampler
from ncompass.gpu._summary import GpuSummary, SummaryAccumulator

MIN_INTERVAL_S = 0.001
# how long stop() waits for the sampler thread; only a hung backend call takes that long
_STOP_TIMEOUT_S = 5.0


class GpuMonitor:
    """Samples GPU utilisation, memory, power and temperature while a block runs.

    ``with GpuMonitor(...) as mon: ...`` then read ``mon.summary``. Sampling runs on a background
    thread at ``start + k·interval_s``; the thread is stopped and joined when the block exits,
    also when it raises. Monitors are independent: they nest and run concurrently.

    With several devices there is one summary per device: ``summaries`` holds all of them in the
    order requested, ``summary`` the first.

    Args:
        device: A GPU index, a list of indices, or ``"all"``. Indices are NVML's (as
            nvidia-smi shows them), which can differ from CUDA's when ``CUDA_VISIBLE_DEVICES``
            is set.
        interval_s: The sampling period in seconds.
        backend: ``"auto"`` (NVML, else nvidia-smi), ``"nvml"``, ``"smi"``, ``"cpu"`` (host CPU
            and memory of this process tree) or ``"none"`` (no sampling).
        strict: Raise ``GpuBackendError`` when the backend cannot start. When false, ``auto``
            falls back to ``cpu`` and an explicit backend to ``none``, with a warning.
        sync_fn: Called when the block exits normally, before the region closes, so queued
            asynchronous work is included (e.g. ``torch.cuda.synchronize``).
        warmup_s: Samples in the first ``warmup_s`` seconds are left out of the statistics.
        keep_samples: Keep every sample in ``samples`` (the statistics never need them).

    Attributes:
        summary: The first device's summary once the monitor has stopped, else ``None``.
        summaries: Every device's summary once the monitor has stopped.
        samples: Every sample in time order when ``keep_samples`` is true, else empty.
        backend_used: The backend that ran, after a fallback too (``None`` before start).
    """

    def __init__(
        self,
        device: DeviceSpec = 0,
        interval_s: float = 0.2,
        backend: str = "auto",
        strict: bool = True,
        sync_fn: Callable[[], None] | None = None,
        warmup_s: float = 0.0,
        keep_samples: bool = False,
    ) -> None:
        if not interval_s >= MIN_INTERVAL_S:
            raise ValueError(f"interval_s must be at least {MIN_INTERVAL_S}, not {interval_s!r}")
        if not warmup_s >= 0:
            raise ValueError(f"warmup_s must be >= 0, not {warmup_s!r}")
        if backend not in BACKEND_NAMES:
            raise ValueError(f"backend must be one of {', '.join(BACKEND_NAMES)}, not {backend!r}")
        self.device = device
        self.interval_s = float(interval_s)
        self.backend = backend
        self.strict = strict
        self.sync_fn = sync_fn
        self.warmup_s = float(warmup_s)
        self.keep_samples = keep_samples
        self._devices = normalize_devices(device)
        self.summary: GpuSummary | None = None
        self.summaries: tuple[GpuSummary, ...] = ()
        self.samples: list[GpuSample] = []
        self.backend_used: str | None = None
        self._run: _Run | None = None
        self._lock = threading.Lock()

    def start(self) -> GpuMonitor:
        """Opens the backend and starts sampling; ``with`` calls this for you.

        Raises:
            GpuBackendError: The backend cannot start (with ``strict``) or a device is missing.
            RuntimeError: The monitor is already running.
        """
        with self._lock:
            if self._run is not None:
                raise RuntimeError("this GpuMonitor is already running")
            opened = open_backend(
                self.backend,
                self._devices,
                self.interval_s,
                strict=self.strict,
            )
            self.summary, self.summaries, self.samples = None, (), []
            self.backend_used = opened.backend.name
            notes = Notes()
            if opened.fallback_reason:
                notes.add(None, opened.fallback_reason)
            try:
                self._run = _Run(
                    opened.backend,
                    opened.devices,
                    self.samples if self.keep_samples else None,
                    int(self.interval_s * 1e9),
                    int(self.warmup_s * 1e9),
                    notes,
                )
            except BaseException:
                opened.backend.close()  # e.g. no thread could be started: do not leak a child
                raise
        return self

    def stop(self, *, sync: bool = True) -> tuple[GpuSummary, ...]:
        """Calls ``sync_fn`` (when ``sync``), stops sampling and computes the summaries.

        The sampler thread is stopped and the backend closed even when ``sync_fn`` raises.
        """
        run = self._run
        if run is None:
            raise RuntimeError("this GpuMonitor is not running")
        try:
            if sync and self.sync_fn is not None:
                self.sync_fn()  # still inside the region: the sampler keeps sampling
        finally:
            with self._lock:
                self._run = None
            self.summaries = run.finish(
                self.backend_used or self.backend, self.interval_s, self.warmup_s
            )
            self.summary = self.summaries[0]
        return self.summaries

    def __enter__(self) -> GpuMonitor:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        # after an exception sync_fn is skipped: it would likely raise the same device error
        self.stop(sync=exc_type is None)

    @property
    def running(self) -> bool:
        """Whether the monitor is between ``start`` and ``stop``."""
        return self._run is not None

    @property
    def sampler_thread(self) -> threading.Thread | None:
        """The background thread while running (``None`` for backend ``none``)."""
        run = self._run
        return run.sampler.thread if run is not None and run.sampler is not None else None


class _Run:
    """One start-to-stop run: the open backend, its sampler and the per-device statistics."""

    def __init__(
        self,
        backend: MonitorBackend,
        devices: Sequence[DeviceInfo],
        kept: list[GpuSample] | None,
        interval_ns: int,
        warmup_ns: int,
        notes: Notes,
    ) -> None:
        self.backend = backend
        self.devices = devices
        self.kept = kept
        self.notes = notes
        self.closed = False
        self.start_ns = time.perf_counter_ns()
        self.accumulators = {
            info.index: SummaryAccumulator(info, self.start_ns + warmup_ns) for info in devices
        }
        self.sampler: Sampler | None = None
        if not isinstance(backend, NoneBackend):
            self.sampler = Sampler(self.take, interval_ns)
            _switch_interval.shorten()
            try:
                self.sampler.start(self.start_ns)
            except BaseException:
                _switch_interval.restore()
                raise

    def take(self, tick: int) -> None:
        """Reads every device once and counts the samples (sampler thread, then the closer)."""
        if self.closed:
            return  # a read that hung past stop() finished late: the summary is already made
        monotonic_ns = time.perf_counter_ns()
        time_ns = time.time_ns()
        try:
            samples: Sequence[GpuSample] = self.backend.read(time_ns, monotonic_ns)
        except Exception as error:  # a failing read must not kill the sampler thread
            self.notes.add(None, f"reading the devices failed: {error!r}")
            samples = [GpuSample(info.index, time_ns, monotonic_ns) for info in self.devices]
        for sample in samples:
            accumulator = self.accumulators.get(sample.device)
            if accumulator is not None:
                accumulator.add(sample)
        if self.kept is not None:
            self.kept.extend(samples)

    def finish(
        self, backend_name: str, interval_s: float, warmup_s: float
    ) -> tuple[GpuSummary, ...]:
        """Stops the sampler, takes the closing sample, closes the backend, summarises."""
        end_ns = time.perf_counter_ns()
        try:
            if self.sampler is not None:
                if self.sampler.stop(_STOP_TIMEOUT_S):
                    self.take(-1)  # the closing sample: the region's last moments
                else:
                    self.notes.add(None, "the sampler thread hung in a backend call and was left")
                if self.sampler.skipped_ticks:
                    self.notes.add(
                        None,
                        f"{self.sampler.skipped_ticks} ticks skipped (readings slower than "
                        "the interval, or a busy machine)",
                    )
        finally:
            self.closed = True
            if self.sampler is not None:
                _switch_interval.restore()
            self.backend.close()
        for device, text in self.backend.notes():
            self.notes.add(device, text)
        duration_s = (end_ns - self.start_ns) / 1e9
        return tuple(
            self.accumulators[info.index].finish(
                backend=backend_name,
                duration_s=duration_s,
                warmup_s=warmup_s,
                interval_s=interval_s,
                notes=[text for device, text in self.notes.items() if device in (None, info.index)],
            )
            for info in self.devices
        )
