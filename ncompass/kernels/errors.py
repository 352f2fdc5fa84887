"""Errors of the kernels package (all :class:`ncompass.NcompassError`, so the CLI exits 2)."""

from __future__ import annotations

from ncompass.errors import NcompassError


class KernelError(NcompassError):
    """A kernel request the user can fix: an unknown op, a malformed shape, no device to tune."""


__all__ = ["KernelError"]
