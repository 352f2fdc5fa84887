"""One point of a search space: a kernel's block sizes and launch options."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, order=True)
class KernelConfig:
    """Compile-time parameters of one kernel launch.

    Attributes:
        meta: The kernel's ``tl.constexpr`` tile parameters (``BLOCK_M``, ``GROUP_M``, ...),
            as sorted ``(name, value)`` pairs so configs hash and compare.
        num_warps: Warps per program (ignored by Triton's interpreter).
        num_stages: Software-pipelining depth of the K loop (ignored by the interpreter).
    """

    meta: tuple[tuple[str, int], ...]
    num_warps: int = 4
    num_stages: int = 3

    @classmethod
    def of(cls, num_warps: int = 4, num_stages: int = 3, **meta: int) -> KernelConfig:
        """``KernelConfig.of(BLOCK_M=64, BLOCK_N=64, num_warps=4)``."""
        return cls(tuple(sorted(meta.items())), num_warps, num_stages)

    def __getitem__(self, name: str) -> int:
        for key, value in self.meta:
            if key == name:
                return value
        raise KeyError(name)

    def replace(self, **meta: int) -> KernelConfig:
        """A copy with some tile parameters changed."""
        merged = dict(self.meta) | meta
        return KernelConfig(tuple(sorted(merged.items())), self.num_warps, self.num_stages)

    def launch_options(self) -> dict[str, int]:
        """The keyword arguments of ``kernel[grid](...)`` this config sets."""
        return {**dict(self.meta), "num_warps": self.num_warps, "num_stages": self.num_stages}

    def to_json(self) -> dict[str, int]:
        """The flat form stored in the autotune cache."""
        return self.launch_options()

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> KernelConfig:
        """Read the flat form back.

        Raises:
            ValueError: a value is not an int, or ``num_warps`` / ``num_stages`` is missing.
        """
        values = dict(data)
        if not all(type(value) is int for value in values.values()):
            raise ValueError(f"config values must be integers, got {values}")
        try:
            num_warps = values.pop("num_warps")
            num_stages = values.pop("num_stages")
        except KeyError as missing:
            raise ValueError(f"config lacks {missing}") from None
        return cls(tuple(sorted(values.items())), num_warps, num_stages)

    def describe(self) -> str:
        """``BLOCK_M=64 BLOCK_N=64 BLOCK_K=32 GROUP_M=8 warps=4 stages=3``."""
        tiles = " ".join(f"{name}={value}" for name, value in self.meta)
        return f"{tiles} warps={self.num_warps} stages={self.num_stages}"


__all__ = ["KernelConfig"]
