"""Running a supported call on its Triton kernel: allocate the output, choose a config, launch.

Importing this module does not import triton; building a launch imports the kernel's module.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from types import ModuleType
from typing import Any

from ncompass.kernels.autotune.cache import TuningKey
from ncompass.kernels.autotune.config import KernelConfig
from ncompass.kernels.autotune.device import device_identity
from ncompass.kernels.autotune.spaces import (
    attention_candidates,
    conv2d_candidates,
    gemm_candidates,
    norm_candidates,
)
from ncompass.kernels.autotune.timing import timer_for
from ncompass.kernels.autotune.tuner import Choice, autotuner
from ncompass.kernels.catalog import KERNEL_MODULES, kernel_source_hash, triton_version
from ncompass.kernels.problems import AttentionProblem, Conv2dProblem, GemmProblem, NormProblem

Problem = GemmProblem | Conv2dProblem | NormProblem | AttentionProblem

UNUSABLE_CACHED_CHOICE = "cached tuning choice outside the search space (see its warning)"
"""The fallback reason of a call whose cached config is refused (as ``stats()`` counts it)."""


@dataclass
class KernelLaunch:
    """One call, ready to run: its kernel, problem, output, and how to launch it with a config.

    Attributes:
        kernel: The kernel's name (``gemm``, ``conv2d``, ``norm``).
        problem: The call's sizes.
        device: The torch device of its tensors.
        output: The tensor the kernel writes.
        launch: Runs the kernel once with a config.
        candidates: The pruned search space, given (interpreted, shared memory bytes).
    """

    kernel: str
    problem: Problem
    device: Any
    output: Any
    launch: Callable[[KernelConfig], None]
    candidates: Callable[[bool, int | None], list[KernelConfig]]
    _key: TuningKey | None = field(default=None, init=False, repr=False)

    def key(self) -> TuningKey:
        """The autotune cache key of this call (computed once: a call asks for it twice)."""
        if self._key is None:
            self._key = self._tuning_key()
        return self._key

    def _tuning_key(self) -> TuningKey:
        return TuningKey(
            kernel=self.kernel,
            source_hash=kernel_source_hash(self.kernel),
            triton=_triton_version(),
            device=device_identity(self.device, self.interpreted),
            dtype=self.problem.dtype,
            bucket=self.problem.bucket(),
        )

    @property
    def interpreted(self) -> bool:
        """Whether the kernel runs in Triton's interpreter."""
        return bool(_kernel_module(self.kernel).INTERPRETED)

    def unusable_choice(self) -> str | None:
        """The fallback reason when this call's cached config must not run, else None."""
        if autotuner().unusable(self.key()) is None:
            return None
        return UNUSABLE_CACHED_CHOICE

    def choose(self, force: bool = False) -> Choice:
        """The config to run with (tuned, cached or remembered; see the autotuner)."""
        interpreted = self.interpreted
        memory = None if interpreted else _shared_memory(self.device.index or 0)
        return autotuner().choose(
            self.key(),
            lambda: self.candidates(interpreted, memory),
            self.launch,
            timer_for(interpreted),
            force=force,
        )

    def run(self) -> Any:
        """Choose a config, launch, and return the output."""
        self.launch(self.choose().config)
        return self.output


def conv2d_launch(problem: Conv2dProblem, x: Any, weight: Any, bias: Any | None) -> KernelLaunch:
    """The launch of a supported convolution of NCHW ``x``."""
    import torch

    module = _kernel_module("conv2d")
    shape = (problem.batch, problem.out_channels, problem.out_h, problem.out_w)
    out = torch.empty(shape, dtype=x.dtype, device=x.device)
    return KernelLaunch(
        "conv2d",
        problem,
        x.device,
        out,
        lambda config: module.launch(x, weight, bias, out, problem, config),
        lambda interpreted, memory: conv2d_candidates(problem, interpreted, memory),
    )


def gemm_launch(problem: GemmProblem, a: Any, b: Any, bias: Any | None) -> KernelLaunch:
    """The launch of ``a[M, K] @ b[K, N]`` (``b`` may be a transposed view)."""
    import torch

    module = _kernel_module("gemm")
    out = torch.empty((problem.m, problem.n), dtype=a.dtype, device=a.device)
    return KernelLaunch(
        "gemm",
        problem,
        a.device,
        out,
        lambda config: module.launch(a, b, bias, out, problem, config),
        lambda interpreted, memory: gemm_candidates(problem, interpreted, memory),
    )


def norm_launch(problem: NormProblem, x: Any, weight: Any | None, bias: Any | None) -> KernelLaunch:
    """The launch of a row normalisation of contiguous ``x``."""
    import torch

    module = _kernel_module("norm")
    out = torch.empty_like(x)
    return KernelLaunch(
        "norm",
        problem,
        x.device,
        out,
        lambda config: module.launch(x, weight, bias, out, problem, config),
        lambda interpreted, memory: norm_candidates(problem, interpreted),
    )


def attention_launch(problem: AttentionProblem, q: Any, k: Any, v: Any) -> KernelLaunch:
    """The launch of attention over 3-D or 4-D ``q``, ``k``, ``v`` (any strides)."""
    import torch

    module = _kernel_module("attention")
    if q.dim() == 3:  # (batch, seq, dim): one head, as a view
        q, k, v = q.unsqueeze(1), k.unsqueeze(1), v.unsqueeze(1)
    shape = (problem.batch, problem.heads, problem.q_len, problem.head_dim)
    out = torch.empty(shape, dtype=q.dtype, device=q.device)
    return KernelLaunch(
        "attention",
        problem,
        q.device,
        out,
        lambda config: module.launch(q, k, v, out, problem, config),
        lambda interpreted, memory: attention_candidates(problem, interpreted, memory),
    )


def _kernel_module(kernel: str) -> ModuleType:
    return importlib.import_module(KERNEL_MODULES[kernel])


@cache
def _triton_version() -> str:
    return triton_version() or "unknown"


@cache
def _shared_memory(index: int) -> int | None:
    """Shared memory per block on CUDA device ``index``, as Triton's driver reports it."""
    try:
        import triton

        properties = triton.runtime.driver.active.utils.get_device_properties(index)
        return int(properties["max_shared_mem"])
    except Exception:  # an older driver API: prune nothing, failing configs are skipped
        return None


__all__ = [
    "UNUSABLE_CACHED_CHOICE",
    "KernelLaunch",
    "Problem",
    "attention_launch",
    "conv2d_launch",
    "gemm_launch",
    "norm_launch",
]
