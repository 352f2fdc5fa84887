"""The compact-struct fast path links traces exactly as the dict path does."""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ncompass.traces import _decode, reader
from ncompass.traces._scanner import EventScanner
from ncompass.traces.link import LinkedTrace, link_trace
from tests.traces.builders import CPU_PID, GPU_PID, TraceBuilder, shared_trace, shared_traces

pytest.importorskip("msgspec")
REPO = Path(__file__).resolve().parents[2]


def everything_linked(trace: LinkedTrace) -> dict[str, Any]:
    """Every field of a linked trace, in comparable form."""
    launches, gpu = trace.launches, trace.gpu
    return {
        "metadata": trace.metadata,
        "names": trace.names,
        "threads": trace.threads,
        "thread_names": trace.thread_names,
        "markers": trace.markers,
        "launches": [
            list(column)
            for column in (
                launches.name,
                launches.thread,
                launches.start,
                launches.duration,
                launches.correlation,
                launches.marker,
            )
        ],
        "also_inside": launches.also_inside,
        "gpu": [
            list(column)
            for column in (
                gpu.name,
                gpu.kernel_class,
                gpu.stream,
                gpu.start,
                gpu.duration,
                gpu.correlation,
                gpu.launch,
                gpu.bytes,
            )
        ],
        "cpu_operators": trace.cpu_operators,
        "compile_phases": trace.compile_phases,
        "span": (trace.origin_us, trace.cpu_start, trace.cpu_end),
        "event_counts": trace.event_counts,
    }


def linked_both_ways(path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    fast = everything_linked(link_trace(path, progress=False))
    with monkeypatch.context() as patch:
        patch.setattr(reader, "decode_link_events", None)  # as without msgspec installed
        plain = everything_linked(link_trace(path, progress=False))
    return fast, plain


def awkward_trace(path: Path) -> Path:
    """Begin/end pairs with args on the end, overlap tracks, quoted numbers, odd types."""
    builder = TraceBuilder().marker("outer", 0, 100).cpu_op("op", 1, 2).cpu_op("op", 3, 1)
    builder.add(ph="B", cat="user_annotation", name="paired", pid=CPU_PID, tid=1, ts=10)
    correlation = builder.runtime("cudaLaunchKernel", 12, 2)
    builder.gpu("kernel_a", 30, 5, correlation=correlation)
    builder.add(ph="E", pid=CPU_PID, tid=1, ts=20, args={"note": 1})
    builder.add(ph="B", cat="cpu_op", name="open", pid=CPU_PID, tid=1, ts=40)
    builder.add(ph="X", cat="CPU_OP", name="quoted", pid=CPU_PID, tid=1, ts="41.5", dur="1.5")
    builder.add(ph="X", cat="cpu_op", name=7, pid=CPU_PID, tid=1, ts=42, dur=1, args=None)
    builder.add(ph="X", cat="Kernel", name="memcpy", pid=GPU_PID, tid=9, ts=50, dur=2,
                args={"correlation": -1, "bytes": 64})  # fmt: skip
    builder.add(ph="M", name="thread_name", pid=CPU_PID, tid=5,
                args={"name": "overlap", "overlap_of_tid": 1})  # fmt: skip
    builder.add(ph="X", cat="user_annotation", name="on-overlap", pid=CPU_PID, tid=5, ts=5, dur=3)
    builder.add(ph="i", name="mark", pid=CPU_PID, tid=1, ts=1, s="t")
    builder.add(ph="f", id=4, pid=CPU_PID, tid=1, ts=4, cat="ac2g", name="ac2g", bp="e")
    return builder.write(path)


@pytest.mark.parametrize("path", shared_traces(), ids=lambda path: path.parent.name)
def test_shared_traces_link_identically_with_and_without_structs(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast, plain = linked_both_ways(path, monkeypatch)
    assert fast == plain


def test_a_real_torch_trace_links_identically_with_and_without_structs(
    torch_trace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast, plain = linked_both_ways(torch_trace, monkeypatch)
    assert fast == plain
    assert plain["markers"] and plain["cpu_operators"]


def test_awkward_events_link_identically_with_and_without_structs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = awkward_trace(tmp_path / "awkward.json")
    events = [event for batch in reader.TraceReader(path).link_batches() for event in batch]
    # all but the last event, which the exact tokenizer cuts (nothing follows it to guess by)
    assert [type(event) for event in events[:-1]] == [_decode.link_event_type] * 14
    fast, plain = linked_both_ways(path, monkeypatch)
    assert fast == plain
    assert plain["event_counts"] == {"X": 9, "B": 2, "E": 1, "M": 1, "i": 1, "f": 1}


def test_batches_the_structs_cannot_hold_fall_back_to_dicts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    builder = TraceBuilder()
    builder.add(ph="X", cat="cpu_op", name="list-args", pid=CPU_PID, tid=1, ts=1, dur=1, args=[1])
    builder.marker("m", 0, 10).cpu_op("op", 2, 1)
    path = builder.write(tmp_path / "t.json")
    batches = list(reader.TraceReader(path).link_batches())
    assert all(type(event) is dict for batch in batches for event in batch)
    fast, plain = linked_both_ways(path, monkeypatch)
    assert fast == plain
    assert fast["cpu_operators"]["list-args"].calls == 1


def test_the_scanner_hands_out_structs_when_given_the_decoder() -> None:
    text = shared_trace("amd_trace").read_bytes()
    scanner = EventScanner(_decode.decode_link_events)
    events = scanner.feed(gzip.decompress(text)) + scanner.close()
    assert sum(type(event) is _decode.link_event_type for event in events) == len(events) - 1
    plain_scanner = EventScanner()
    plain = plain_scanner.feed(gzip.decompress(text)) + plain_scanner.close()
    as_dicts = [event if type(event) is dict else _decode.as_event(event) for event in events]
    keys = ("ph", "cat", "name", "pid", "tid", "ts", "dur")
    assert [[event.get(key) for key in keys] for event in as_dicts] == [
        [event.get(key) for key in keys] for event in plain
    ]


def test_without_msgspec_traces_still_link(tmp_path: Path) -> None:
    path = awkward_trace(tmp_path / "awkward.json")
    script = (
        "import sys; sys.modules['msgspec'] = None\n"  # makes `import msgspec` fail
        "from ncompass.traces import _decode\n"
        "from ncompass.traces.link import link_trace\n"
        "assert _decode.decode_link_events is None\n"
        f"print(sorted(link_trace({str(path)!r}).event_counts.items()))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=REPO
    )
    assert done.stdout.strip() == str(
        sorted({"X": 9, "B": 2, "E": 1, "M": 1, "i": 1, "f": 1}.items())
    )
