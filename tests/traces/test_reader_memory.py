"""The reader's memory by kind of trace, measured as the peak RSS of a fresh process that
summarizes the trace, less that of the same kind at 50 KB (the interpreter, the imports), over the
trace's size: a huge header value at most 4 times its size, marker-only traces at most 3 times
(kernel-heavy traces: tests/analysis/test_memory.py, half their size)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from ncompass.traces import _scanner
from ncompass.traces.filter import filter_trace
from ncompass.traces.raw_json import RAW_VALUE_BYTES, RawJson
from ncompass.traces.reader import TraceReader
from tests.traces.trace_kinds import write_trace

_PEAK = """
import sys
from ncompass.analysis.summary import summarize_trace
summarize_trace(sys.argv[1])
print(next(int(line.split()[1]) for line in open("/proc/self/status")
           if line.startswith("VmHWM:")) << 10)
"""


def peak_bytes(path: Path) -> int:
    done = subprocess.run(
        [sys.executable, "-c", _PEAK, str(path)],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    return int(done.stdout)


def grown_per_byte(kind: str, megabytes: float, folder: Path) -> float:
    small = peak_bytes(write_trace(folder / "small.json", kind, 0.05))
    trace = write_trace(folder / f"{kind}.json", kind, megabytes)
    return (peak_bytes(trace) - small) / trace.stat().st_size


def test_a_huge_header_value_costs_a_few_times_its_size(tmp_path: Path) -> None:
    # found by trying it: a 63 MB object of short keys before traceEvents peaked at 916 MB
    # (14.5 times; 100 MB: 1.6 GB), decoded into a dict; 3 times now, kept as its text
    assert grown_per_byte("header", 60, tmp_path) <= 4.0


def test_a_marker_only_trace_costs_at_most_3_times_its_size(tmp_path: Path) -> None:
    # one Marker object a marker: 3.9 times the size before (no slots, a tuple sort key a
    # marker when linking), 2.5 now (see docs/performance.md: a 1 GB trace of 12.5 M markers
    # still takes gigabytes)
    assert grown_per_byte("markers", 50, tmp_path) <= 3.0


def header_trace(path: Path, value: object) -> Path:
    event = {"ph": "X", "cat": "user_annotation", "name": "m", "pid": 1, "tid": 1, "ts": 0}
    document = {"deviceProperties": value, "traceEvents": [{**event, "dur": 5}], "tail": value}
    path.write_bytes(orjson.dumps(document))
    return path


LARGE_VALUES = {
    "an object": {f"key {i}": [i, "é", None, True] for i in range(60_000)},
    "a string": 'x\\"y' * (RAW_VALUE_BYTES // 3),
    "a list": list(range(300_000)),
}


@pytest.mark.parametrize("shape", LARGE_VALUES)
def test_a_large_header_value_is_kept_as_its_text_and_written_back(
    shape: str, tmp_path: Path
) -> None:
    value = LARGE_VALUES[shape]
    source = header_trace(tmp_path / "t.json", value)
    reader = TraceReader(source)
    assert [event["name"] for event in reader] == ["m"]
    for key in ("deviceProperties", "tail"):  # before and after the events
        kept = reader.metadata[key]
        assert isinstance(kept, RawJson) and orjson.loads(bytes(kept)) == value
    filtered = orjson.loads(filter_trace(source, tmp_path / "f.json").read_bytes())
    assert filtered["deviceProperties"] == value


def test_a_small_header_value_is_decoded_as_before(tmp_path: Path) -> None:
    source = header_trace(tmp_path / "t.json", {"name": "V100", "totalGlobalMem": 2**34})
    reader = TraceReader(source)
    list(reader)
    assert reader.metadata["deviceProperties"] == {"name": "V100", "totalGlobalMem": 2**34}


def test_a_large_header_the_strict_reader_declines_is_decoded_whole(tmp_path: Path) -> None:
    deep: object = 1
    for _ in range(80):  # deeper than the C reader's 64 levels
        deep = [deep]
    value = {"deep": deep, "padding": "x" * (RAW_VALUE_BYTES + 10)}
    reader = TraceReader(header_trace(tmp_path / "t.json", value))
    list(reader)
    assert reader.metadata["deviceProperties"] == value


def test_without_the_c_extension_a_large_header_is_decoded_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_scanner, "_fold", None)
    value = LARGE_VALUES["a list"]
    reader = TraceReader(header_trace(tmp_path / "t.json", value))
    list(reader)
    assert reader.metadata["deviceProperties"] == value
