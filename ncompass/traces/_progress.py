"""A progress bar on stderr for long reads, shown only when stderr is a terminal."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

# Files smaller than this read in about a second or less: a bar would only flicker.
_MIN_BYTES_FOR_BAR = 64 << 20
_MIN_COMPRESSED_BYTES_FOR_BAR = 5 << 20  # gzip'd traces expand 10-20x


@contextmanager
def byte_progress(
    label: str, total_bytes: int, enabled: bool | None, *, compressed: bool = False
) -> Iterator[Callable[[int], None]]:
    """Yield a callback that advances a transient progress bar by a number of bytes.

    Args:
        label: What is being read, shown left of the bar.
        total_bytes: The size the bar fills up to.
        compressed: Whether those bytes are gzip-compressed (a smaller file is then worth a bar).
        enabled: True/False to force; None shows it only on a terminal and for large files.

    Yields:
        ``advance(n)``, a no-op when no bar is shown.
    """
    threshold = _MIN_COMPRESSED_BYTES_FOR_BAR if compressed else _MIN_BYTES_FOR_BAR
    show = enabled if enabled is not None else (sys.stderr.isatty() and total_bytes >= threshold)
    if not show:
        yield _ignore
        return
    # Imported only when a bar is shown: rich costs tens of milliseconds to import.
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as progress:
        task = progress.add_task(label, total=total_bytes)

        def advance(count: int) -> None:
            progress.advance(task, count)

        yield advance


def _ignore(count: int) -> None:
    del count
