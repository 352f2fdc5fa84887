"""The ``nvtx`` context: NVTX ranges in the ``ncompass`` domain, through the ``nvtx`` package.

Never through ``torch.cuda.nvtx``, which CPU builds of torch lack. Names are registered strings
and every site's event attributes (message, colour) are built once at bind time, so a range
costs one call into NVTX at each end.

Whether a tool (Nsight Systems, the ncompass recorder) is attached is fixed when NVTX first
initialises in the process, so it is decided at bind time: without a tool a marker is the idle
range of :mod:`ncompass.runtime.noop`. A tool can only attach through ``NVTX_INJECTION64_PATH``,
so without that variable the ``nvtx`` package (whose import costs ~0.1 s, mostly numpy) is not
even imported.

Under ``--profiler nvtx-trace`` with recording windows (``NCOMPASS_NVTX_WINDOWS`` set) markers
skip NVTX outside a window (:func:`record_markers`, flipped as windows open and close), so they
cost what an idle marker costs plus one flag check; a range entered outside a window is not
ended in NVTX either.

Plain sites push and pop, which NVTX keeps as a stack per thread; async-safe sites use
start/end ranges, whose handle is the range id, because interleaved tasks on one thread would
pop each other's ranges, and an end may run on another thread.
"""

from __future__ import annotations

import os
import sys
import warnings
from sys import _getframe as _caller  # the frame that opened the range
from typing import Any

from ncompass import environment_variables
from ncompass.runtime.base import BoundRange, MarkerSite, RangeContextWarning
from ncompass.runtime.cuda_graphs import skipped_in_capture
from ncompass.runtime.noop import idle_range

DOMAIN_NAME = "ncompass"
"""The NVTX domain every ncompass marker is recorded in."""

# Dynamic names may be unbounded (a step number in the name); the cache is cleared when full so
# memory stays bounded. A tool keeps its own copy of every string it was given.
_MAX_CACHED_NAMES = 10_000


class NvtxDomain:
    """The ``ncompass`` domain of an attached NVTX tool, with its cached event attributes."""

    def __init__(self, nvtx_lib: Any, domain: Any) -> None:
        self._lib = nvtx_lib
        self._domain = domain
        self.handle: Any = domain.handle
        self.push: Any = nvtx_lib.push_range
        self.pop: Any = nvtx_lib.pop_range
        self.start: Any = nvtx_lib.start_range
        self.end: Any = nvtx_lib.end_range
        self._attributes_by_color: dict[int, dict[str, Any]] = {}

    def attributes_cache(self, color: int) -> dict[str, Any]:
        """The cached event attributes of colour ``color``, by name (filled by ``attributes``)."""
        return self._attributes_by_color.setdefault(color, {})

    def attributes(self, name: str, color: int) -> Any:
        """Returns the event attributes for a range named ``name`` in colour ``color``."""
        cache = self.attributes_cache(color)
        attributes = cache.get(name)
        if attributes is None:
            if len(cache) >= _MAX_CACHED_NAMES:
                cache.clear()
            message = self._lib.RegisteredString(self.handle, name)
            attributes = self._lib.EventAttributes(self._domain, message, color, None, None)
            cache[name] = attributes
        return attributes


_domain: NvtxDomain | None = None
_domain_resolved = False

_recording = [environment_variables.NCOMPASS_NVTX_WINDOWS not in os.environ]
"""Whether markers reach NVTX now: False outside the recording windows of an NVTX recorder."""


def record_markers(on: bool) -> None:
    """Let markers reach NVTX (a recording window opened) or not (it closed)."""
    _recording[0] = on


def attached_domain() -> NvtxDomain | None:
    """Returns the ``ncompass`` domain when an NVTX tool is attached to this process, else None."""
    global _domain, _domain_resolved
    if _domain_resolved:
        return _domain
    if environment_variables.NVTX_INJECTION64_PATH not in os.environ and "nvtx" not in sys.modules:
        return None  # no tool can attach; not cached, in case the variable is set later
    try:
        import nvtx
        from nvtx._lib import lib as nvtx_lib
    except ImportError as error:
        warnings.warn(
            f"the nvtx package cannot be imported ({error}): markers with the 'nvtx' context "
            "record nothing (pip install nvtx)",
            RangeContextWarning,
            stacklevel=4,
        )
        _domain_resolved = True
        return None
    domain = nvtx.get_domain(DOMAIN_NAME)
    _domain = None if domain is nvtx_lib.dummy_domain else NvtxDomain(nvtx_lib, domain)
    _domain_resolved = True
    return _domain


class NvtxBackend:
    """The ``nvtx`` context (see the module docstring)."""

    def bind(self, site: MarkerSite, *, async_safe: bool) -> BoundRange:
        """Binds ``site`` (see :class:`ncompass.runtime.base.RangeBackend`)."""
        domain = attached_domain()
        if domain is None:
            return idle_range(site)
        if async_safe:
            return _bind_start_end(domain, site)
        return _bind_push_pop(domain, site)


def _bind_push_pop(domain: NvtxDomain, site: MarkerSite) -> BoundRange:
    push, pop, handle, color = domain.push, domain.pop, domain.handle, site.color
    cached = domain.attributes_cache(color)
    recording = _recording

    # The handle says whether a range was pushed (not while a CUDA graph is captured, nor
    # outside a recording window).
    def exit_range(pushed: object) -> None:
        if pushed:
            pop(handle)

    def enter_named(name: str) -> object:
        if not recording[0] or skipped_in_capture(name):
            return False
        push(cached.get(name) or domain.attributes(name, color), handle)
        return True

    if site.dynamic:
        resolve_name = site.resolve_name

        def enter_dynamic(name_fn: Any) -> object:
            if not recording[0]:
                return False
            name = resolve_name(name_fn, _caller(1))
            if skipped_in_capture(name):
                return False
            push(cached.get(name) or domain.attributes(name, color), handle)
            return True

        return BoundRange(enter=enter_dynamic, exit=exit_range, enter_named=enter_named)
    name, attributes = site.name, domain.attributes(site.name, color)

    def enter() -> object:
        if not recording[0] or skipped_in_capture(name):
            return False
        push(attributes, handle)
        return True

    return BoundRange(enter=enter, exit=exit_range, enter_named=enter_named)


def _bind_start_end(domain: NvtxDomain, site: MarkerSite) -> BoundRange:
    start, end, handle, color = domain.start, domain.end, domain.handle, site.color
    cached = domain.attributes_cache(color)
    recording = _recording

    # end_range(range_id, domain): the handle is the range id, valid on any thread; None when
    # nothing was started (a CUDA graph capture).
    def exit_range(range_id: object) -> None:
        if range_id is not None:
            end(range_id, domain=handle)

    def enter_named(name: str) -> object:
        if not recording[0] or skipped_in_capture(name):
            return None
        return start(cached.get(name) or domain.attributes(name, color), handle)[0]

    if site.dynamic:
        resolve_name = site.resolve_name

        def enter_dynamic(name_fn: Any) -> object:
            if not recording[0]:
                return None
            name = resolve_name(name_fn, _caller(1))
            if skipped_in_capture(name):
                return None
            return start(cached.get(name) or domain.attributes(name, color), handle)[0]

        return BoundRange(enter=enter_dynamic, exit=exit_range, enter_named=enter_named)
    name, attributes = site.name, domain.attributes(site.name, color)

    def enter() -> object:
        if not recording[0] or skipped_in_capture(name):
            return None
        return start(attributes, handle)[0]

    return BoundRange(enter=enter, exit=exit_range, enter_named=enter_named)
