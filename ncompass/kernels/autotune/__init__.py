"""The autotuner: search spaces, timers, the persistent cache, and the loop that uses them."""

from ncompass.kernels.autotune.cache import (
    CACHE_DIR_VARIABLE,
    AutotuneCacheWarning,
    CachedChoice,
    TuningCache,
    TuningKey,
    default_cache_dir,
)
from ncompass.kernels.autotune.config import KernelConfig
from ncompass.kernels.autotune.tuner import (
    AUTOTUNE_VARIABLE,
    Autotuner,
    Choice,
    autotuner,
    reset_autotuner,
    tuning_enabled,
)

__all__ = [
    "AUTOTUNE_VARIABLE",
    "CACHE_DIR_VARIABLE",
    "AutotuneCacheWarning",
    "Autotuner",
    "CachedChoice",
    "Choice",
    "KernelConfig",
    "TuningCache",
    "TuningKey",
    "autotuner",
    "default_cache_dir",
    "reset_autotuner",
    "tuning_enabled",
]
