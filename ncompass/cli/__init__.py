"""The ``ncompass`` command line: thin click commands over the library.

Subcommands live in their own modules and are imported only when invoked, so ``ncompass --help``
and quick commands never pay for torch, libcst or the trace reader.
"""

from __future__ import annotations

from ncompass.cli._group import main, ncompass_cli

__all__ = ["main", "ncompass_cli"]
