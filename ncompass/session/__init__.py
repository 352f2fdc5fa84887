"""The iterative profiling loop: run, analyse, take feedback, refine the spec, run again."""

from ncompass.session.session import ProfilingSession

__all__ = ["ProfilingSession"]
