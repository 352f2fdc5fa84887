"""The autotuner: measure each candidate once per key, remember the fastest, on disk too.

Triton's own ``triton.autotune`` times with CUDA events only and keeps its results in memory
(per process); this loop takes a :class:`~ncompass.kernels.autotune.timing.Timer`, so the same
code tunes in the interpreter with the CPU clock, and persists through
:class:`~ncompass.kernels.autotune.cache.TuningCache`.

``NCOMPASS_AUTOTUNE=0`` turns measuring off: a cached choice is still used, otherwise the
space's default config (for services that must not spend their first requests tuning).

A cached config outside the kernel's search space is refused
(:class:`~ncompass.kernels.autotune.cache.UnusableCachedChoice`): the ops ask
:meth:`Autotuner.unusable` first and run PyTorch for that key, until a forced tuning replaces it.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from ncompass import environment_variables
from ncompass.kernels.autotune.cache import (
    CachedChoice,
    TuningCache,
    TuningKey,
    UnusableCachedChoice,
)
from ncompass.kernels.autotune.config import KernelConfig
from ncompass.kernels.autotune.timing import Timer

logger = logging.getLogger("ncompass.kernels.autotune")

AUTOTUNE_VARIABLE = environment_variables.NCOMPASS_AUTOTUNE

Origin = Literal["memo", "cache", "tuned", "default"]


@dataclass(frozen=True)
class Choice:
    """The config a call runs with, and where it came from.

    Attributes:
        config: The config.
        origin: ``memo`` (this process chose it before), ``cache`` (read from disk), ``tuned``
            (measured now), ``default`` (tuning is off and nothing was cached).
        ms: Its measured time, when known.
    """

    config: KernelConfig
    origin: Origin
    ms: float | None = None


def tuning_enabled() -> bool:
    """Whether a cache miss may measure candidates (``NCOMPASS_AUTOTUNE`` is not 0/off)."""
    value = os.environ.get(AUTOTUNE_VARIABLE, "1").strip().lower()
    return value not in {"0", "off", "false", "no"}


class Autotuner:
    """Chooses configs: memory first, then the persistent cache, then measurement.

    Args:
        cache: Where results persist (default: under ``default_cache_dir()``).
    """

    def __init__(self, cache: TuningCache | None = None) -> None:
        self.cache = cache if cache is not None else TuningCache()
        self._memo: dict[TuningKey, Choice] = {}
        self._lock = threading.Lock()
        self._origins: Counter[str] = Counter()
        self._unusable: dict[TuningKey, str] = {}

    def choose(
        self,
        key: TuningKey,
        candidates: Callable[[], Sequence[KernelConfig]],
        run: Callable[[KernelConfig], object],
        timer: Timer,
        *,
        force: bool = False,
    ) -> Choice:
        """The config to run ``key`` with.

        Args:
            key: What the choice depends on.
            candidates: Gives the pruned search space, default first (called only on a miss).
            run: Launches the kernel once with a config (on the call's own tensors).
            timer: Measures a launch.
            force: Measure again even if a choice is remembered or cached.

        Raises:
            UnusableCachedChoice: the cached config is outside the search space (not forced).
            Exception: every candidate failed to run (the last failure, re-raised).
        """
        if not force:
            remembered = self._memo.get(key)
            if remembered is not None:
                self._origins["memo"] += 1
                return Choice(remembered.config, "memo", remembered.ms)
        with self._lock:
            choice = None if force else self._without_measuring(key, candidates)
            if choice is None:
                choice = self._measure(key, candidates(), run, timer)
                self._unusable.pop(key, None)
            self._memo[key] = choice
            self._origins[choice.origin] += 1
            return choice

    def unusable(self, key: TuningKey) -> str | None:
        """Why the cached choice for ``key`` must not run (outside the search space), or None.

        Reads the cache once per key (``choose`` reads it again on its first call); the ops ask
        before they enter their ``[triton]`` range, so a refused key runs PyTorch alone.
        """
        if key in self._memo:
            return None
        with self._lock:
            if key not in self._unusable and key not in self._memo:
                try:
                    self.cache.lookup(key)
                except UnusableCachedChoice as refused:
                    self._unusable[key] = refused.reason
            return self._unusable.get(key)

    def remembered(self) -> dict[TuningKey, Choice]:
        """The choices this process has made, by key."""
        return dict(self._memo)

    def origins(self) -> dict[str, int]:
        """How many choices came from each origin since the last reset."""
        return dict(self._origins)

    def forget(self) -> None:
        """Forget remembered choices and counts (the disk cache stays)."""
        with self._lock:
            self._memo.clear()
            self._origins.clear()
            self._unusable.clear()

    def _without_measuring(
        self, key: TuningKey, candidates: Callable[[], Sequence[KernelConfig]]
    ) -> Choice | None:
        remembered = self._memo.get(key)  # another thread may have tuned it meanwhile
        if remembered is not None:
            return Choice(remembered.config, "memo", remembered.ms)
        refused = self._unusable.get(key)
        if refused is not None:
            raise UnusableCachedChoice(refused)
        try:
            cached = self.cache.lookup(key)
        except UnusableCachedChoice as unusable:
            self._unusable[key] = unusable.reason
            raise
        if cached is not None:
            return Choice(cached.config, "cache", cached.ms)
        if not tuning_enabled():
            return Choice(candidates()[0], "default")
        return None

    def _measure(
        self,
        key: TuningKey,
        candidates: Sequence[KernelConfig],
        run: Callable[[KernelConfig], object],
        timer: Timer,
    ) -> Choice:
        timings: list[tuple[float, KernelConfig]] = []
        failure: Exception | None = None
        for config in candidates:
            try:
                timings.append((timer.measure(functools.partial(run, config)), config))
            except Exception as error:  # a config the device cannot compile or run
                logger.debug("%s: %s failed: %s", key.kernel, config.describe(), error)
                failure = error
        if not timings:
            assert failure is not None
            raise failure
        ms, best = min(timings, key=lambda timing: timing[0])
        logger.info(
            "tuned %s %s on %s: %s (%.3f ms, %d candidates, %s timer)",
            key.kernel, key.entry, key.device.name, best.describe(), ms, len(timings), timer.name,
        )  # fmt: skip
        self.cache.store(key, CachedChoice(best, ms, len(timings), timer.name))
        return Choice(best, "tuned", ms)


_autotuner: Autotuner | None = None
_autotuner_lock = threading.Lock()


def autotuner() -> Autotuner:
    """The process-wide autotuner (its cache folder is read from the environment once)."""
    global _autotuner
    with _autotuner_lock:
        if _autotuner is None:
            _autotuner = Autotuner()
        return _autotuner


def reset_autotuner() -> None:
    """Drop the process-wide autotuner: the next call reads the environment again."""
    global _autotuner
    with _autotuner_lock:
        _autotuner = None


__all__ = [
    "AUTOTUNE_VARIABLE",
    "Autotuner",
    "Choice",
    "autotuner",
    "reset_autotuner",
    "tuning_enabled",
]
