from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from ncompass.errors import TraceError
from ncompass.traces.reader import TraceReader
from ncompass.traces.writer import TraceWriter


@pytest.mark.parametrize("name", ["out.json", "out.json.gz"])
def test_written_trace_is_valid_json_with_metadata_around_events(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    events = [{"ph": "X", "name": "a", "ts": 1.5, "dur": 2}, {"ph": "M", "name": "process_name"}]
    with TraceWriter(path, metadata={"schemaVersion": 1, "traceEvents": "ignored"}) as writer:
        writer.write(events[0])
        writer.write_many(events[1:])
        writer.close(trailer={"baseTimeNanoseconds": 10})
    raw = path.read_bytes()
    document = json.loads(gzip.decompress(raw) if name.endswith(".gz") else raw)
    assert document == {"schemaVersion": 1, "traceEvents": events, "baseTimeNanoseconds": 10}
    reader = TraceReader(path)
    assert list(reader) == events


def test_empty_trace_is_valid(tmp_path: Path) -> None:
    path = tmp_path / "empty.json"
    with TraceWriter(path):
        pass
    assert json.loads(path.read_text()) == {"traceEvents": []}


def test_failed_write_leaves_nothing_behind(tmp_path: Path) -> None:
    path = tmp_path / "out.json"
    with pytest.raises(RuntimeError), TraceWriter(path) as writer:
        writer.write({"ph": "X"})
        raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []


def test_unwritable_destination_is_a_trace_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(TraceError, match="cannot write the trace"):
        TraceWriter(blocker / "out.json")


def test_the_same_events_give_the_same_gzip_bytes_however_they_are_written(
    tmp_path: Path,
) -> None:
    events = [
        {"ph": "X", "name": f"op{index % 97}", "pid": 1, "tid": index % 3, "ts": index, "dur": 2}
        for index in range(20_000)
    ]  # about 1.5 MB of JSON: many compressor blocks
    encoded = b",\n".join(json.dumps(event, separators=(",", ":")).encode() for event in events)

    with TraceWriter(tmp_path / "whole.json.gz") as writer:
        writer.write_many(events)
    with TraceWriter(tmp_path / "one_by_one.json.gz") as writer:
        for event in events:
            writer.write(event)
    with TraceWriter(tmp_path / "encoded.json.gz") as writer:
        writer.write_many(events[:7])
        rest = b",\n".join(encoded.split(b",\n")[7:])
        writer.write_encoded((rest[i : i + 100_003] for i in range(0, len(rest), 100_003)), 19_993)

    files = [tmp_path / name for name in ("whole", "one_by_one", "encoded")]
    contents = [path.with_suffix(".json.gz").read_bytes() for path in files]
    assert json.loads(gzip.decompress(contents[0]))["traceEvents"] == events
    assert contents[1] == contents[0]
    assert contents[2] == contents[0]
