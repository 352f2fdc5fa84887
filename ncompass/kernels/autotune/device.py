"""Which device a tuning result belongs to (part of the autotune cache key)."""

from __future__ import annotations

import platform
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

INTERPRETER_CAPABILITY = "interpreter"


@dataclass(frozen=True)
class DeviceIdentity:
    """A device model and what it can run.

    Attributes:
        name: ``NVIDIA A100-SXM4-80GB``; for the interpreter, the host CPU model.
        capability: ``sm_80`` (CUDA compute capability), an AMD arch, or ``interpreter``.
    """

    name: str
    capability: str

    @property
    def interpreted(self) -> bool:
        """Whether this is Triton's interpreter (timings there say nothing about a GPU)."""
        return self.capability == INTERPRETER_CAPABILITY

    def slug(self) -> str:
        """A file-name-safe form: ``nvidia-a100-sxm4-80gb-sm_80``."""
        text = f"{self.name}-{self.capability}".lower()
        return re.sub(r"[^a-z0-9_.]+", "-", text).strip("-")


def device_identity(device: Any, interpreted: bool) -> DeviceIdentity:
    """The identity of the torch ``device`` a kernel runs on (or of the interpreter)."""
    if interpreted:
        return interpreter_identity()
    return _cuda_identity(device.index if device.index is not None else _current_cuda())


def interpreter_identity() -> DeviceIdentity:
    """The interpreter on this host: its speed is the CPU's."""
    return DeviceIdentity(_cpu_model(), INTERPRETER_CAPABILITY)


def _current_cuda() -> int:
    import torch

    return int(torch.cuda.current_device())


@cache
def _cuda_identity(index: int) -> DeviceIdentity:
    import torch

    properties = torch.cuda.get_device_properties(index)
    arch = getattr(properties, "gcnArchName", None) if torch.version.hip else None
    capability = arch or f"sm_{properties.major}{properties.minor}"
    return DeviceIdentity(str(properties.name), str(capability))


@cache
def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


__all__ = ["INTERPRETER_CAPABILITY", "DeviceIdentity", "device_identity", "interpreter_identity"]
