"""Load spec files and dicts into :class:`RewriteConfig`, with every error at a file and line.

The function form of ``RewriteConfig.from_yaml`` / ``from_dict`` / ``to_yaml``; the file format
(lines, errors, YAML) is :mod:`ncompass.spec.file_format`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ncompass.spec.models import RewriteConfig


def load_spec(path: str | Path) -> RewriteConfig:
    """Load a spec file (YAML or JSON; version 0 or 1).

    Args:
        path: The spec file.

    Returns:
        The validated config; it and its markers remember the file and their lines.

    Raises:
        SpecError: naming the file and the line of the first problem, and what to do.
    """
    return RewriteConfig.from_yaml(path)


def spec_from_dict(data: dict[str, Any]) -> RewriteConfig:
    """Validate a spec given as a dict (version 0 or 1).

    Raises:
        SpecError: describing the first problem and its location inside the dict.
    """
    return RewriteConfig.from_dict(data)


def dump_yaml(config: RewriteConfig) -> str:
    """The config as version 1 YAML, keys in the order of the spec reference."""
    return config.to_yaml()


__all__ = ["dump_yaml", "load_spec", "spec_from_dict"]
