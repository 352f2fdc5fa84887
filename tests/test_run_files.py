"""The names of a run's files, spelled once, and the tolerant sidecar reader."""

from __future__ import annotations

from pathlib import Path

import pytest

from ncompass.run_files import (
    read_sidecar_document,
    sidecar_path,
    trace_stem,
    window_number,
    window_stem,
    window_trace,
)


@pytest.mark.parametrize(
    ("trace", "sidecar"),
    [("t.json", "t.ncompass.json"), ("t.json.gz", "t.ncompass.json"), ("t", "t.ncompass.json")],
)
def test_a_trace_and_its_sidecar_share_the_run_name(
    tmp_path: Path, trace: str, sidecar: str
) -> None:
    assert sidecar_path(tmp_path / trace) == tmp_path / sidecar
    assert trace_stem(tmp_path / trace) == "t"


def test_window_traces_are_named_once() -> None:
    assert window_stem("run", 2) == "run-w2"
    assert window_trace(Path("/x/run.json"), 3) == Path("/x/run-w3.json")
    assert window_number("run", Path("/x/run-w12.json")) == 12
    for other in ("run-w.json", "run-wx.json", "run-w1.ncompass.json", "run-1.json", "r-w1.json"):
        assert window_number("run", Path("/x") / other) is None


def test_the_sidecar_reader_tolerates_what_is_not_a_sidecar(tmp_path: Path) -> None:
    trace = tmp_path / "t.json"
    assert read_sidecar_document(trace) is None  # none at all
    sidecar_path(trace).write_text("{not json")
    assert read_sidecar_document(trace) is None
    sidecar_path(trace).write_text("[1, 2]")
    assert read_sidecar_document(trace) is None
    sidecar_path(trace).write_text('{"markers": []}')
    assert read_sidecar_document(trace) == {"markers": []}


def test_the_processes_folder_is_named_after_the_run() -> None:
    from ncompass.run_files import processes_folder

    assert processes_folder(Path("/x/run.json")) == Path("/x/run.processes")
    assert processes_folder(Path("/x/run.json.gz")) == Path("/x/run.processes")
