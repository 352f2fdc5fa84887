"""The search space of each kernel, and its pruning by the problem's shape.

Spaces are curated lists (the configurations that win somewhere on current GPUs, after the
Triton matmul tutorial and our own conv/norm layouts), not full cross products: a cross
product of block sizes, group sizes, warps and stages has hundreds of points, most of them
never best, and each costs a compilation on a GPU. Pruning then:

- clamps every block to the problem (a 128-row tile for a 20-row GEMM computes 108 padding
  rows), merging the configs that become equal;
- drops configs whose pipelined operand tiles exceed the device's shared memory;
- in Triton's interpreter, where ``num_warps`` and ``num_stages`` change nothing, keeps one
  config per tile shape.

The first candidate is the default used when tuning is off.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ncompass.kernels.autotune.config import KernelConfig
from ncompass.kernels.problems import (
    AttentionProblem,
    Conv2dProblem,
    GemmProblem,
    NormProblem,
    next_power_of_2,
)

MIN_DOT_BLOCK = 16
"""``tl.dot`` needs every tile dimension to be at least 16."""

_ELEMENT_SIZE = {"float32": 4, "float16": 2, "bfloat16": 2}


def _gemm_config(bm: int, bn: int, bk: int, group: int, warps: int, stages: int) -> KernelConfig:
    return KernelConfig.of(
        BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=group, num_warps=warps, num_stages=stages
    )


GEMM_SPACE: tuple[KernelConfig, ...] = tuple(
    _gemm_config(*values)
    for values in (
        (64, 64, 32, 8, 4, 3),  # default: fits every shape and every device
        (128, 256, 64, 8, 8, 3),
        (64, 256, 32, 8, 4, 4),
        (128, 128, 32, 8, 4, 4),
        (128, 64, 32, 8, 4, 4),
        (64, 128, 32, 8, 4, 4),
        (128, 32, 32, 8, 4, 4),
        (64, 32, 32, 8, 2, 5),
        (32, 64, 32, 8, 2, 5),
        (128, 128, 64, 8, 8, 3),
        (16, 64, 64, 1, 2, 4),  # skinny M: decoding, small batches
        (16, 128, 128, 1, 4, 3),
        (32, 32, 64, 1, 2, 4),
    )
)

CONV2D_SPACE: tuple[KernelConfig, ...] = tuple(
    _gemm_config(*values)
    for values in (
        (64, 64, 32, 8, 4, 3),  # default
        (128, 128, 32, 8, 8, 3),
        (128, 64, 32, 8, 4, 3),
        (64, 128, 32, 8, 4, 3),
        (128, 32, 32, 8, 4, 4),
        (64, 32, 64, 8, 4, 3),
        (32, 64, 64, 8, 2, 4),
        (128, 16, 32, 8, 4, 3),  # few output channels (the first layers of a CNN)
        (256, 64, 16, 8, 8, 2),  # large images, a short reduction (C*R*S small)
        (32, 32, 32, 1, 2, 2),
    )
)

NORM_SPACE: tuple[KernelConfig, ...] = tuple(
    KernelConfig.of(BLOCK_M=rows, num_warps=warps, num_stages=1)
    for rows, warps in (
        (1, 4),  # default: one row per program
        (1, 8),
        (1, 16),
        (2, 4),
        (2, 8),
        (4, 4),
        (4, 8),
        (8, 4),
        (8, 8),
        (16, 8),
        (32, 16),
    )
)

ATTENTION_SPACE: tuple[KernelConfig, ...] = tuple(
    KernelConfig.of(BLOCK_M=bm, BLOCK_N=bn, num_warps=warps, num_stages=stages)
    for bm, bn, warps, stages in (
        (64, 64, 4, 2),  # default
        (128, 64, 4, 3),
        (128, 64, 8, 3),
        (128, 128, 8, 2),
        (64, 128, 4, 3),
        (64, 32, 4, 3),
        (32, 64, 4, 2),
        (16, 64, 2, 3),  # few queries: decoding
        (16, 128, 4, 3),
    )
)

NORM_TILE_LIMIT = 32768
"""Elements one program may hold (``BLOCK_M * BLOCK_N``) before it spills registers."""


@dataclass(frozen=True)
class SearchSpace:
    """A kernel's candidate configs and the axes they vary.

    Attributes:
        configs: The curated list, default first.
        axes: The tile parameters that vary, for display.
        lowest: The parameters pruning may lower to fit a problem, with the smallest value it
            lowers them to (by powers of two).
    """

    configs: tuple[KernelConfig, ...]
    axes: tuple[str, ...]
    lowest: Mapping[str, int] = field(default_factory=dict)

    def outside(self, config: KernelConfig) -> str | None:
        """Why pruning this space can never give ``config`` (a cache entry that would not
        compile, or not be the kernel's), or None when it can."""
        names = sorted(name for name, _ in self.configs[0].meta)
        given = sorted(name for name, _ in config.meta)
        if given != names:
            return f"parameters {', '.join(given)} instead of {', '.join(names)}"
        settings = [*config.meta, ("num_warps", config.num_warps)]
        for name, value in [*settings, ("num_stages", config.num_stages)]:
            allowed = self._values(name)
            if value not in allowed:
                return f"{name}={value} is not one of {', '.join(map(str, sorted(allowed)))}"
        return None

    def _values(self, name: str) -> set[int]:
        """The values ``name`` takes in the space, and those pruning may lower it to."""
        if name in ("num_warps", "num_stages"):
            return {getattr(config, name) for config in self.configs}
        values = {config[name] for config in self.configs}
        low = self.lowest.get(name)
        if low is not None:
            values |= {1 << bit for bit in range(max(values).bit_length()) if low <= 1 << bit}
        return values


_DOT_BLOCKS = {"BLOCK_M": MIN_DOT_BLOCK, "BLOCK_N": MIN_DOT_BLOCK, "BLOCK_K": MIN_DOT_BLOCK}

SPACES: dict[str, SearchSpace] = {
    "gemm": SearchSpace(
        GEMM_SPACE, ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M"), {**_DOT_BLOCKS, "GROUP_M": 1}
    ),
    "conv2d": SearchSpace(
        CONV2D_SPACE, ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M"), {**_DOT_BLOCKS, "GROUP_M": 1}
    ),
    "norm": SearchSpace(NORM_SPACE, ("BLOCK_M",), {"BLOCK_M": 1}),
    "attention": SearchSpace(
        ATTENTION_SPACE,
        ("BLOCK_M", "BLOCK_N"),
        {"BLOCK_M": MIN_DOT_BLOCK, "BLOCK_N": MIN_DOT_BLOCK},
    ),
}


def gemm_candidates(
    problem: GemmProblem,
    interpreted: bool,
    shared_memory: int | None = None,
    space: tuple[KernelConfig, ...] = GEMM_SPACE,
) -> list[KernelConfig]:
    """The configs worth measuring for ``problem`` (conv2d passes its own ``space``).

    Args:
        problem: The GEMM (for conv2d, its implicit GEMM).
        interpreted: Kernels run in Triton's interpreter.
        shared_memory: Bytes of shared memory per block on the device, when known.
        space: The list to prune.
    """
    size = _ELEMENT_SIZE[problem.dtype]
    limits = {
        "BLOCK_M": max(MIN_DOT_BLOCK, next_power_of_2(problem.m)),
        "BLOCK_N": max(MIN_DOT_BLOCK, next_power_of_2(problem.n)),
        "BLOCK_K": max(MIN_DOT_BLOCK, next_power_of_2(problem.k)),
    }

    def fits(config: KernelConfig) -> bool:
        if shared_memory is None:
            return True
        tiles = config["BLOCK_K"] * (config["BLOCK_M"] + config["BLOCK_N"]) * size
        return tiles * config.num_stages <= shared_memory

    def clamp(config: KernelConfig) -> KernelConfig:
        clamped = config.replace(**{name: min(config[name], cap) for name, cap in limits.items()})
        tiles_m = -(-problem.m // clamped["BLOCK_M"])
        # grouping only reorders row tiles: with one row of tiles it changes nothing
        return clamped.replace(GROUP_M=1) if tiles_m == 1 else clamped

    return _prune(space, clamp, fits, interpreted)


def conv2d_candidates(
    problem: Conv2dProblem, interpreted: bool, shared_memory: int | None = None
) -> list[KernelConfig]:
    """The configs worth measuring for a convolution (pruned on its implicit GEMM)."""
    return gemm_candidates(problem.gemm(), interpreted, shared_memory, CONV2D_SPACE)


def norm_candidates(problem: NormProblem, interpreted: bool) -> list[KernelConfig]:
    """The configs worth measuring for a row normalisation."""
    block_n = next_power_of_2(problem.cols)
    max_rows = max(1, min(next_power_of_2(problem.rows), NORM_TILE_LIMIT // block_n))

    def clamp(config: KernelConfig) -> KernelConfig:
        return config.replace(BLOCK_M=min(config["BLOCK_M"], max_rows))

    return _prune(NORM_SPACE, clamp, lambda config: True, interpreted)


def attention_candidates(
    problem: AttentionProblem, interpreted: bool, shared_memory: int | None = None
) -> list[KernelConfig]:
    """The configs worth measuring for an attention call."""
    size = _ELEMENT_SIZE[problem.dtype]
    head = max(MIN_DOT_BLOCK, next_power_of_2(problem.head_dim))
    limits = {
        "BLOCK_M": max(MIN_DOT_BLOCK, next_power_of_2(problem.q_len)),
        "BLOCK_N": max(MIN_DOT_BLOCK, next_power_of_2(problem.kv_len)),
    }

    def fits(config: KernelConfig) -> bool:
        if shared_memory is None:
            return True
        # the query block stays; key and value blocks are pipelined
        tiles = head * (config["BLOCK_M"] + 2 * config["BLOCK_N"] * config.num_stages)
        return tiles * size <= shared_memory

    def clamp(config: KernelConfig) -> KernelConfig:
        return config.replace(**{name: min(config[name], cap) for name, cap in limits.items()})

    return _prune(ATTENTION_SPACE, clamp, fits, interpreted)


def _prune(
    space: tuple[KernelConfig, ...],
    clamp: Callable[[KernelConfig], KernelConfig],
    fits: Callable[[KernelConfig], bool],
    interpreted: bool,
) -> list[KernelConfig]:
    kept: list[KernelConfig] = []
    seen: set[object] = set()
    for config in space:
        clamped = clamp(config)
        if not fits(clamped):
            continue
        identity: object = clamped.meta if interpreted else clamped
        if identity not in seen:
            seen.add(identity)
            kept.append(clamped)
    if not kept:  # every config too big for the device: the smallest still runs
        kept.append(min((clamp(config) for config in space), key=_tile_size))
    return kept


def _tile_size(config: KernelConfig) -> int:
    size = 1
    for _, value in config.meta:
        size *= value
    return size * config.num_stages


__all__ = [
    "ATTENTION_SPACE",
    "CONV2D_SPACE",
    "GEMM_SPACE",
    "MIN_DOT_BLOCK",
    "NORM_SPACE",
    "NORM_TILE_LIMIT",
    "SPACES",
    "SearchSpace",
    "attention_candidates",
    "conv2d_candidates",
    "gemm_candidates",
    "norm_candidates",
]
