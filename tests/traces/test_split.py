"""One large trace folded by several processes gives exactly what one pass gives."""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ncompass.cli import ncompass_cli
from ncompass.traces import _split
from ncompass.traces.link import link_trace
from ncompass.traces.parallel import default_jobs
from ncompass.traces.reader import CorruptTraceError
from tests.traces.builders import CPU_PID, TraceBuilder, shared_traces
from tests.traces.test_decode import everything_linked


@contextmanager
def threads_for_processes(workers: int) -> Iterator[ThreadPoolExecutor]:
    """The parts folded in threads of this process: the same code, without starting Pythons."""
    with ThreadPoolExecutor(max_workers=workers) as pool:
        yield pool


@pytest.fixture
def split_in_process(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Split every trace, however small, in threads; returns the ranges each split folded."""
    monkeypatch.setattr(_split, "SPLIT_MIN_BYTES", 0)
    monkeypatch.setattr(_split, "worker_pool", threads_for_processes)
    folded: list[Any] = []
    fold_range = _split._fold_range

    def recording(path: str, begin: int, end: int | None, origin: float, bare: bool) -> Any:
        part = fold_range(path, begin, end, origin, bare)
        folded.append((begin, end, part is not None))
        return part

    monkeypatch.setattr(_split, "_fold_range", recording)
    return folded


def plain_copy(path: Path, tmp_path: Path) -> Path:
    copy = tmp_path / path.name.removesuffix(".gz")
    copy.write_bytes(gzip.decompress(path.read_bytes()))
    return copy


def linked_in_one_pass_and_split(path: Path, jobs: int) -> tuple[Any, Any]:
    return (
        everything_linked(link_trace(path, progress=False, jobs=1)),
        everything_linked(link_trace(path, progress=False, jobs=jobs)),
    )


@pytest.mark.parametrize("path", shared_traces(), ids=lambda path: path.parent.name)
def test_shared_traces_split_anywhere_link_as_in_one_pass(
    path: Path, tmp_path: Path, split_in_process: list[Any]
) -> None:
    plain = plain_copy(path, tmp_path)
    for jobs in (2, 3, 7):
        split_in_process.clear()
        one_pass, split = linked_in_one_pass_and_split(plain, jobs)
        assert split == one_pass
        assert len(split_in_process) >= 2 and all(ok for _, _, ok in split_in_process)


def markers_across_cuts(path: Path) -> Path:
    """Two threads whose markers span the cuts, launches on both sides of each cut."""
    builder = TraceBuilder().marker("step", 0, 10_000, tid=1).marker("step", 0, 10_000, tid=2)
    for index in range(400):
        tid = 1 + index % 2
        ts = 10 + 20 * index
        if index % 50 == 0:
            builder.marker(f"inner-{index}", ts, 30 * 20, tid=tid)
        builder.cpu_op("aten::mm", ts, 5 + index % 7, tid=tid)
        builder.launch("gemm", ts + 1, 2, ts + 5, 3 + index % 3, tid=tid)
    builder.add(ph="M", name="thread_name", pid=CPU_PID, tid=2, args={"name": "worker"})
    builder.metadata["deviceProperties"] = [{"name": "V100"}]
    document = builder.document()
    text = path.with_suffix(".tmp")
    builder.write(text)
    # keys after the events too, as some exporters write them
    path.write_bytes(text.read_bytes()[:-1] + b', "baseTimeNanoseconds": 1700000000}')
    assert "traceEvents" in document
    return path


def test_markers_and_threads_across_cuts_link_as_in_one_pass(
    tmp_path: Path, split_in_process: list[Any]
) -> None:
    path = markers_across_cuts(tmp_path / "t.json")
    for jobs in (2, 3, 5, 9):
        split_in_process.clear()
        one_pass, split = linked_in_one_pass_and_split(path, jobs)
        assert split == one_pass
        assert len(split_in_process) == jobs
    assert one_pass["metadata"]["baseTimeNanoseconds"] == 1700000000
    assert list(split["metadata"]) == list(one_pass["metadata"])


def test_a_bare_event_array_is_split_too(tmp_path: Path, split_in_process: list[Any]) -> None:
    source = markers_across_cuts(tmp_path / "t.json")
    events = source.read_bytes()
    start = events.index(b"[", events.index(b'"traceEvents"'))
    path = tmp_path / "bare.json"
    path.write_bytes(events[start : events.rindex(b"]") + 1])
    one_pass, split = linked_in_one_pass_and_split(path, 3)
    assert split == one_pass and len(split_in_process) == 3


def test_a_cut_inside_an_event_falls_back_to_one_pass(
    tmp_path: Path, split_in_process: list[Any]
) -> None:
    # every event holds a long list of objects and strings with "}, {" in them: most guessed
    # cuts land inside an event
    builder = TraceBuilder()
    for index in range(200):
        builder.add(ph="X", cat="cpu_op", name="}, {" * 3, pid=CPU_PID, tid=1, ts=index, dur=1,
                    args={"shapes": [{"dim": n} for n in range(30)]})  # fmt: skip
    path = builder.write(tmp_path / "t.json")
    one_pass, split = linked_in_one_pass_and_split(path, 4)
    assert split == one_pass
    assert not all(ok for _, _, ok in split_in_process)  # a part failed: one pass did it


def test_begin_end_pairs_across_a_cut_fall_back_to_one_pass(
    tmp_path: Path, split_in_process: list[Any]
) -> None:
    builder = TraceBuilder()
    builder.add(ph="B", cat="user_annotation", name="long", pid=CPU_PID, tid=1, ts=0)
    for index in range(100):
        builder.cpu_op("op", 1 + index, 1)
    builder.add(ph="E", pid=CPU_PID, tid=1, ts=500)
    path = builder.write(tmp_path / "pairs.json")
    one_pass, split = linked_in_one_pass_and_split(path, 2)
    assert split == one_pass
    assert [marker.name for marker in split["markers"]] == ["long"]


def test_gzip_traces_and_one_job_are_not_split(tmp_path: Path, split_in_process: list[Any]) -> None:
    path = shared_traces()[0]
    link_trace(path, progress=False, jobs=2)
    link_trace(plain_copy(path, tmp_path), progress=False, jobs=1)
    assert split_in_process == []


def test_a_corrupt_trace_is_reported_as_in_one_pass(
    tmp_path: Path, split_in_process: list[Any]
) -> None:
    path = markers_across_cuts(tmp_path / "t.json")
    text = path.read_bytes()
    middle = text.index(b'"ts"', len(text) // 2)
    path.write_bytes(text[:middle] + b'"ts" ::' + text[middle + 5 :])
    with pytest.raises(CorruptTraceError) as one_pass:
        link_trace(path, progress=False, jobs=1)
    with pytest.raises(CorruptTraceError) as split:
        link_trace(path, progress=False, jobs=3)
    assert str(split.value) == str(one_pass.value)
    assert split.value.offset == one_pass.value.offset


def test_worker_processes_fold_the_parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_split, "SPLIT_MIN_BYTES", 0)
    path = markers_across_cuts(tmp_path / "t.json")
    folded = _split.fold_in_parts(path, 3, progress=False)
    assert folded is not None
    one_pass, split = linked_in_one_pass_and_split(path, 3)
    assert split == one_pass


@pytest.mark.parametrize("command", ["breakdown", "summarize"])
def test_one_trace_on_the_command_line_is_split_by_default(
    command: str, tmp_path: Path, split_in_process: list[Any]
) -> None:
    path = markers_across_cuts(tmp_path / "t.json")
    by_default = default_jobs() if default_jobs() > 1 else 0
    outputs = []
    for jobs, parts in ((["--jobs", "1"], 0), ([], by_default), (["--jobs", "3"], 3)):
        split_in_process.clear()
        result = CliRunner().invoke(ncompass_cli, [command, "--json", *jobs, str(path)])
        assert result.exit_code == 0, result.output
        outputs.append(result.output)
        assert len(split_in_process) == parts
    assert outputs[0] == outputs[1] == outputs[2]
