"""``gpu_profile``: the decorator form of ``GpuMonitor``, and ``ProfiledResult``."""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, ParamSpec, TypeAlias, TypeVar, cast, overload

from ncompass.gpu._monitor import GpuMonitor
from ncompass.gpu._sample import DeviceSpec
from ncompass.gpu._summary import GpuSummary

_P = ParamSpec("_P")
_R = TypeVar("_R")
_V = TypeVar("_V")

Report: TypeAlias = bool | Callable[[GpuSummary], None]
"""``True``: print each summary to stderr; ``False``: nothing; a callable: called per summary."""


@dataclass(frozen=True)
class ProfiledResult(Generic[_V]):
    """A wrapped function's return value together with its GPU summary.

    Attributes:
        value: What the function returned.
        gpu: The summary of the first (usually only) device.
        gpus: The summaries of every monitored device, ``gpu`` first.
    """

    value: _V
    gpu: GpuSummary
    gpus: tuple[GpuSummary, ...] = field(default=())

    def __post_init__(self) -> None:
        if not self.gpus:
            object.__setattr__(self, "gpus", (self.gpu,))


@overload
def gpu_profile(
    device: DeviceSpec = ...,
    interval_s: float = ...,
    backend: str = ...,
    strict: bool = ...,
    sync_fn: Callable[[], None] | None = ...,
    warmup_s: float = ...,
    report: Report = ...,
    return_profile: Literal[False] = ...,
) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]: ...


@overload
def gpu_profile(
    device: DeviceSpec = ...,
    interval_s: float = ...,
    backend: str = ...,
    strict: bool = ...,
    sync_fn: Callable[[], None] | None = ...,
    warmup_s: float = ...,
    report: Report = ...,
    *,
    return_profile: Literal[True],
) -> Callable[[Callable[_P, _R]], Callable[_P, ProfiledResult[_R]]]: ...


def gpu_profile(
    device: DeviceSpec = 0,
    interval_s: float = 0.2,
    backend: str = "auto",
    strict: bool = True,
    sync_fn: Callable[[], None] | None = None,
    warmup_s: float = 0.0,
    report: Report = True,
    return_profile: bool = False,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Monitors the GPU during every call of the decorated function.

    Each call runs inside its own ``GpuMonitor`` (same parameters). After a call that returns,
    the summary is reported: ``report=True`` prints ``summary.format()`` to stderr (stdout stays
    the program's), a callable receives each ``GpuSummary``. A call that raises reports nothing
    and the exception propagates. ``async def`` functions are monitored until they complete.

    Args:
        device: A GPU index, a list of indices, or ``"all"``.
        interval_s: The sampling period in seconds.
        backend: ``"auto"``, ``"nvml"``, ``"smi"``, ``"cpu"`` or ``"none"``.
        strict: Raise ``GpuBackendError`` when the backend cannot start (else fall back).
        sync_fn: Called before the region closes, e.g. ``torch.cuda.synchronize``.
        warmup_s: Leave the first seconds of each call out of the statistics.
        report: ``True``, ``False`` or a callable taking a ``GpuSummary``.
        return_profile: Return ``ProfiledResult(value, gpu)`` instead of the value.

    Returns:
        A decorator.

    Raises:
        TypeError: used without parentheses (``@gpu_profile``), or (when decorating) the
            function is a generator function: only creating the
            generator would be measured; wrap the loop that consumes it in ``GpuMonitor``.
    """
    if callable(device):  # @gpu_profile without parentheses
        raise TypeError(
            f"gpu_profile takes options, not the function: write @gpu_profile() (or "
            f"@gpu_profile(device=..., ...)) above {getattr(device, '__qualname__', device)}"
        )
    # checked now, not at the first call
    GpuMonitor(device, interval_s, backend, strict, sync_fn, warmup_s)

    def new_monitor() -> GpuMonitor:
        return GpuMonitor(device, interval_s, backend, strict, sync_fn, warmup_s)

    def finish(monitor: GpuMonitor, value: object) -> object:
        _report(monitor.summaries, report)
        if return_profile:
            assert monitor.summary is not None
            return ProfiledResult(value, monitor.summary, monitor.summaries)
        return value

    def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
        if inspect.isgeneratorfunction(function) or inspect.isasyncgenfunction(function):
            raise TypeError(
                f"gpu_profile cannot measure generator function {function.__qualname__}: "
                "the call only creates the generator; wrap the loop in GpuMonitor instead"
            )
        if inspect.iscoroutinefunction(function):
            coroutine_function = cast(Callable[..., Awaitable[Any]], function)

            @functools.wraps(function)
            async def monitored_coroutine(*args: Any, **kwargs: Any) -> Any:
                with new_monitor() as monitor:
                    value = await coroutine_function(*args, **kwargs)
                return finish(monitor, value)

            return monitored_coroutine

        @functools.wraps(function)
        def monitored(*args: Any, **kwargs: Any) -> Any:
            with new_monitor() as monitor:
                value = function(*args, **kwargs)
            return finish(monitor, value)

        return monitored

    return decorate


def _report(summaries: tuple[GpuSummary, ...], report: Report) -> None:
    if report is True:
        for summary in summaries:
            print(summary.format(), file=sys.stderr)
    elif callable(report):
        for summary in summaries:
            report(summary)
