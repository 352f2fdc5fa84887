"""Keep the marker ranges of a trace and what they launched; drop the rest (the seed's filter).

The input is streamed twice (three times with direct children): once to link GPU events to the
markers that launched them, then to write what is kept. Metadata events (process and thread
names) are always kept, so Perfetto labels the tracks as in the original.
"""

from __future__ import annotations

from array import array
from collections import defaultdict
from collections.abc import Iterator, Sequence
from functools import partial
from pathlib import Path

from ncompass.errors import TraceError
from ncompass.overwrite_guard import (
    refuse_overwriting_inputs,
    refuse_replacing,
    unwritable_reason,
)
from ncompass.traces.events import (
    FLOW_PHASES,
    GPU_CATEGORIES,
    LAUNCH_FLOW_CATEGORIES,
    MARKER_CATEGORY,
    Event,
    microseconds,
)
from ncompass.traces.link import NO_LINK, LinkedTrace, encloses, link_trace
from ncompass.traces.parallel import map_traces
from ncompass.traces.reader import TraceReader
from ncompass.traces.writer import TraceWriter

_GPU_MARKER_CATEGORY = "gpu_user_annotation"


def filter_trace(
    path: str | Path,
    output_path: str | Path | None = None,
    *,
    include_cuda_kernels: bool = True,
    include_direct_children: bool = False,
    min_duration_us: float = 0.0,
    progress: bool | None = None,
    replace: bool = True,
) -> Path:
    """Write a smaller trace with only the markers and, optionally, what ran inside them.

    Args:
        path: The trace to filter (``.json`` or ``.json.gz``).
        output_path: Where to write; default ``<name>.filtered.json`` (``.json.gz`` for a gzip
            input) next to the input.
        include_cuda_kernels: Keep the GPU events launched inside a marker (and their launch
            flows, and the GPU-side copies of the markers).
        include_direct_children: Keep the CPU events directly nested in a marker.
        min_duration_us: Drop complete events shorter than this (metadata is always kept).
        progress: Progress bar on stderr (None: only on a terminal, for large files).
        replace: Replace a file already at the output path (False: refuse, before reading).

    Returns:
        The path written.

    Raises:
        TraceError: The input is missing or corrupt, or the output cannot be written.
        OutputIsInputError: ``output_path`` is the input itself.
        OutputExistsError: The output exists and ``replace`` is false (left unchanged).
    """
    source = Path(path)
    target = Path(output_path) if output_path is not None else _default_output(source)
    refuse_overwriting_inputs(target, [source])
    refuse_replacing(target, replace=replace)
    trace = link_trace(source, progress=progress)
    launched_in_markers = (
        _correlations_launched_in_markers(trace) if include_cuda_kernels else set()
    )
    children = _direct_children(source, trace) if include_direct_children else bytearray()
    with TraceWriter(target, metadata=trace.metadata) as writer:
        for batch in _kept_batches(
            source,
            launched_in_markers,
            children,
            include_cuda_kernels=include_cuda_kernels,
            min_duration_us=min_duration_us,
        ):
            writer.write_many(batch)
    return target


def filter_traces(
    paths: Sequence[str | Path],
    output_dir: str | Path,
    *,
    include_cuda_kernels: bool = True,
    include_direct_children: bool = False,
    min_duration_us: float = 0.0,
    jobs: int | None = 1,
    progress: bool | None = None,
    replace: bool = True,
) -> list[Path]:
    """Filter several traces into one directory, as :func:`filter_trace` filters one.

    Each input ``NAME.json[.gz]`` becomes ``output_dir/NAME.filtered.json[.gz]``. Every output
    is checked against every input before anything is read, so no input is ever written over.

    Args:
        paths: The traces to filter.
        output_dir: The directory to write into (created if missing).
        include_cuda_kernels, include_direct_children, min_duration_us: As for
            :func:`filter_trace`.
        jobs: Files filtered at once in worker processes; None for one per core, 1 for one by
            one in this process. The files written are the same either way.
        progress: Progress bar on stderr (None: only on a terminal, for large inputs).
        replace: Replace files already in ``output_dir`` (False: refuse, before reading any).

    Returns:
        The paths written, in the order of ``paths``.

    Raises:
        TraceError: An input is missing or corrupt, two inputs would be written to one file,
            or the directory cannot be created.
        OutputIsInputError: An output would be one of the inputs.
        OutputExistsError: An output exists and ``replace`` is false (nothing was written).
    """
    directory = Path(output_dir)
    targets = [directory / _default_output(Path(path)).name for path in paths]
    written_by: dict[Path, str | Path] = {}
    for path, target in zip(paths, targets, strict=True):
        if target in written_by:
            raise TraceError(
                f"{written_by[target]} and {path} would both be written to {target}: "
                "filter traces of the same name into different directories"
            )
        written_by[target] = path
        refuse_overwriting_inputs(target, paths)
        refuse_replacing(target, replace=replace)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        reason = unwritable_reason(directory, error)
        raise TraceError(f"{directory}: cannot create the directory ({reason})") from None
    filter_one = partial(
        _filter_into,
        output_dir=directory,
        include_cuda_kernels=include_cuda_kernels,
        include_direct_children=include_direct_children,
        min_duration_us=min_duration_us,
    )
    return list(map_traces(filter_one, paths, jobs=jobs, progress=progress))


def _filter_into(
    path: str | Path,
    position: int,
    progress: bool | None,
    *,
    output_dir: Path,
    include_cuda_kernels: bool,
    include_direct_children: bool,
    min_duration_us: float,
) -> Path:
    """Filter one trace into ``output_dir`` (runs in a worker process when ``jobs`` > 1)."""
    del position
    return filter_trace(
        path,
        output_dir / _default_output(Path(path)).name,
        include_cuda_kernels=include_cuda_kernels,
        include_direct_children=include_direct_children,
        min_duration_us=min_duration_us,
        progress=progress,
    )


def _default_output(source: Path) -> Path:
    name = source.name
    for suffix in (".json.gz", ".json", ".gz"):
        if name.endswith(suffix):
            stem, ending = name[: -len(suffix)], suffix
            break
    else:
        stem, ending = name, ".json"
    return source.with_name(f"{stem}.filtered{ending}")


def _correlations_launched_in_markers(trace: LinkedTrace) -> set[int]:
    launches = trace.launches
    return {
        launches.correlation[index]
        for index, marker in enumerate(launches.marker)
        if marker != NO_LINK
    }


def _kept_batches(
    source: Path,
    launched_in_markers: set[int],
    children: bytearray,
    *,
    include_cuda_kernels: bool,
    min_duration_us: float,
) -> Iterator[list[Event]]:
    ordinal = 0
    # For B/E pairs: whether each open B on a thread was kept, so its E follows it.
    open_ranges: dict[tuple[object, object], list[bool]] = defaultdict(list)
    for batch in TraceReader(source, progress=False).batches():
        kept: list[Event] = []
        for event in batch:
            phase = event.get("ph")
            if phase == "M":
                kept.append(event)
            elif phase == "X":
                if microseconds(event.get("dur")) < min_duration_us:
                    pass
                elif (ordinal < len(children) and children[ordinal]) or _keeps_complete(
                    event, launched_in_markers, include_cuda_kernels
                ):
                    kept.append(event)
            elif phase == "B":
                keep = _category(event) == MARKER_CATEGORY
                open_ranges[(event.get("pid"), event.get("tid"))].append(keep)
                if keep:
                    kept.append(event)
            elif phase == "E":
                stack = open_ranges.get((event.get("pid"), event.get("tid")))
                if stack and stack.pop():
                    kept.append(event)
            elif phase in FLOW_PHASES and include_cuda_kernels:
                kept_flow = _category(event) in LAUNCH_FLOW_CATEGORIES
                if kept_flow and event.get("id") in launched_in_markers:
                    kept.append(event)
            ordinal += 1
        if kept:
            yield kept


def _keeps_complete(
    event: Event, launched_in_markers: set[int], include_cuda_kernels: bool
) -> bool:
    category = _category(event)
    if category == MARKER_CATEGORY:
        return True
    if not include_cuda_kernels:
        return False
    if category == _GPU_MARKER_CATEGORY:
        return True
    if category in GPU_CATEGORIES:
        args = event.get("args")
        correlation = args.get("correlation") if isinstance(args, dict) else None
        return correlation in launched_in_markers
    return False


def _category(event: Event) -> str:
    category = event.get("cat")
    return category.lower() if isinstance(category, str) else ""


def _direct_children(source: Path, trace: LinkedTrace) -> bytearray:
    """Mark (by position in the file) the CPU events whose innermost enclosing range is a marker."""
    marker_threads = {trace.threads[marker.thread] for marker in trace.markers}
    starts: array[float] = array("d")
    ends: array[float] = array("d")
    ordinals: array[int] = array("q")
    threads: list[tuple[object, object]] = []
    ordinal = 0
    for batch in TraceReader(source, progress=False).batches():
        for event in batch:
            if event.get("ph") == "X":
                thread = (event.get("pid"), event.get("tid"))
                category = _category(event)
                if (
                    thread in marker_threads
                    and category != MARKER_CATEGORY
                    and category not in GPU_CATEGORIES
                ):
                    start = microseconds(event.get("ts")) - trace.origin_us
                    starts.append(start)
                    ends.append(start + microseconds(event.get("dur")))
                    ordinals.append(ordinal)
                    threads.append(thread)
            ordinal += 1
    flags = bytearray(ordinal)
    # One time-ordered sweep per thread over markers and candidates together.
    ranges: dict[tuple[object, object], list[tuple[float, float, int]]] = defaultdict(list)
    for marker in trace.markers:
        ranges[trace.threads[marker.thread]].append((marker.start, marker.end, NO_LINK))
    for index, thread in enumerate(threads):
        ranges[thread].append((starts[index], ends[index], ordinals[index]))
    for items in ranges.values():
        items.sort(key=lambda item: (item[0], -item[1], item[2] != NO_LINK))
        stack: list[tuple[float, float, int]] = []
        for start, end, position in items:
            while stack and not encloses(stack[-1][0], stack[-1][1], start, end):
                stack.pop()
            if position != NO_LINK and stack and stack[-1][2] == NO_LINK:
                flags[position] = 1
            stack.append((start, end, position))
    return flags
