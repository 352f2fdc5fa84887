"""Read several trace files at once, one process per core, results back in input order.

Commands that take one trace per rank map a function over the files with :func:`map_traces`.
The function runs in ``spawn``-started worker processes (safe with threads, CUDA and macOS), so
it must be a module-level function and should return a compact result (numbers, a small
dataclass, a path), never the events themselves: moving those between processes would cost
more than reading them. Results and errors come back in input order, so the first failing file
raises the same error, with the same one-line message, as reading the files one by one would.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ncompass.traces._progress import byte_progress

if TYPE_CHECKING:  # imported where workers start: 4 MB that reading in one process never needs
    import multiprocessing
    from concurrent.futures import Future, ProcessPoolExecutor

Result = TypeVar("Result")

# Starting workers (spawn, imports) costs about 0.3-0.5 s of wall time: inputs of less JSON
# than this in all read about as fast in this process, unless jobs are asked for explicitly.
MIN_JSON_BYTES_FOR_WORKERS = 32 << 20
_GZIP_EXPANSION = 10  # gzip'd traces expand 10-20x; the low end


def default_jobs() -> int:
    """One job per core this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # macOS and Windows have no affinity masks
        return max(1, os.cpu_count() or 1)


def worker_count(jobs: int | None, files: int | Sequence[str | Path]) -> int:
    """How many processes :func:`map_traces` uses for some files (1: this process only).

    Args:
        jobs: As asked for; None for one per core.
        files: How many files, or the files themselves: then, with ``jobs`` None, inputs too
            small to repay starting workers are read in this process.
    """
    if isinstance(files, int):
        count = files
    else:
        count = len(files)
        if jobs is None and count > 1 and _too_small_for_workers(files):
            return 1
    return max(1, min(jobs if jobs is not None else default_jobs(), count))


def map_traces(
    read: Callable[[str | Path, int, bool | None], Result],
    paths: Sequence[str | Path],
    *,
    jobs: int | None = None,
    progress: bool | None = None,
) -> Iterator[Result]:
    """Yield ``read(path, position, progress)`` for each trace file, in order, ``jobs`` at once.

    Args:
        read: A module-level function (workers import it by name) of a file, its position on
            the command line and whether it may show a progress bar of its own.
        paths: The trace files, passed to ``read`` as given.
        jobs: Worker processes; None for one per core (but none for inputs that read in well
            under a second in all), 1 to read in this process, one by one (each file then
            shows its own bar, as a single read does).
        progress: A bar on stderr (None: only on a terminal, for large inputs). With workers,
            one bar over all the files' bytes; workers never show bars of their own.

    Yields:
        Each file's result, in the order of ``paths``.

    Raises:
        Whatever ``read`` raised for the first file (in order) that failed; the files after it
        are not waited for.
    """
    workers = worker_count(jobs, paths)
    if workers <= 1:
        for position, path in enumerate(paths):
            yield read(path, position, progress)
        return
    sizes = [_size(Path(path)) for path in paths]
    compressed = any(str(path).endswith(".gz") for path in paths)
    label = f"reading {len(paths)} traces on {workers} cores"
    with (
        byte_progress(label, sum(sizes), progress, compressed=compressed) as advance,
        worker_pool(workers) as pool,
    ):
        futures: list[Future[Result]] = []
        for position, (path, size) in enumerate(zip(paths, sizes, strict=True)):
            future = pool.submit(read, path, position, False)
            # The bar moves as each file is done, in whatever order they finish.
            future.add_done_callback(partial(_advance_when_read, advance, size))
            futures.append(future)
        # An error, Ctrl-C or a consumer that stopped early ends the files in flight too.
        for future in futures:
            yield future.result()


@contextmanager
def worker_pool(workers: int) -> Iterator[ProcessPoolExecutor]:
    """``workers`` spawn-started processes that leave Ctrl-C to this one; an error (or a caller
    that stops early) inside the block ends them instead of waiting for their work."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(
        max_workers=workers, mp_context=context, initializer=_leave_ctrl_c_to_the_parent
    ) as pool:
        try:
            yield pool
        except BaseException:
            _stop_workers(pool)
            raise


def _advance_when_read(advance: Callable[[int], None], size: int, future: Future[Any]) -> None:
    if not future.cancelled() and future.exception() is None:
        advance(size)


def _stop_workers(pool: ProcessPoolExecutor) -> None:
    # Waiting for the files in flight could take minutes on large traces. Python 3.14 can end
    # them (terminate_workers); before it, the pool's own process table is the only handle,
    # and shutdown() clears it, so it is read first.
    terminate: Callable[[], None] | None = getattr(pool, "terminate_workers", None)
    if terminate is not None:
        terminate()
        return
    processes: dict[int, multiprocessing.Process] = getattr(pool, "_processes", None) or {}
    running = list(processes.values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in running:
        process.terminate()
    for process in running:
        process.join()


def _leave_ctrl_c_to_the_parent() -> None:
    # Ctrl-C reaches the whole process group: only the parent should stop (and say so once),
    # not every worker with a traceback of its own.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _too_small_for_workers(paths: Sequence[str | Path]) -> bool:
    json_bytes = sum(
        _size(Path(path)) * (_GZIP_EXPANSION if str(path).endswith(".gz") else 1) for path in paths
    )
    return json_bytes < MIN_JSON_BYTES_FOR_WORKERS


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0  # the reader reports the missing file, with its usual message
