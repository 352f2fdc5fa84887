"""Environment variables set for the duration of a profiled run, then restored."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def scoped_environment(values: dict[str, str]) -> Iterator[None]:
    """Set ``values`` in ``os.environ`` inside the block; restore what was there after it."""
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


__all__ = ["scoped_environment"]
