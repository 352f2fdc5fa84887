"""The iterative profiling loop: run, analyse, take feedback, refine the spec, run again.

``ProfilingSession`` loads on first use: a worker process of a discovery run imports only the
stack sampler (:mod:`ncompass.session.child_sampling`), not the session and its analysis.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ncompass._lazy import lazy_exports

if TYPE_CHECKING:
    from ncompass.session.session import ProfilingSession

__getattr__, __dir__ = lazy_exports(
    __name__, {"ProfilingSession": "ncompass.session.session"}, globals()
)

__all__ = ["ProfilingSession"]
