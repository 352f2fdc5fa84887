"""``--profiler nvtx``: markers become NVTX ranges for an external tool (Nsight Systems).

Nothing is recorded in-process: ``nsys profile ncompass run --profiler nvtx ...`` attaches
through ``NVTX_INJECTION64_PATH`` and records the ranges with the CUDA activity around them.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from ncompass import environment_variables
from ncompass.capture.backends.backend import ProfilerBackend

INJECTION_ENV = environment_variables.NVTX_INJECTION64_PATH


class NvtxProfiler(ProfilerBackend):
    """Emits NVTX ranges; an attached tool records them."""

    name = "nvtx"
    marker_context = "nvtx"

    def start(self) -> None:
        """Warn (once, on stderr) when no NVTX tool is attached: the ranges would go nowhere."""
        if not os.environ.get(INJECTION_ENV):
            print(
                "ncompass: markers are NVTX ranges but no NVTX tool is attached; run under "
                "`nsys profile ...` to record them (or use --profiler torch)",
                file=sys.stderr,
            )

    def stop(self) -> Path | None:
        """The attached tool writes its own report."""
        return None


__all__ = ["INJECTION_ENV", "NvtxProfiler"]
