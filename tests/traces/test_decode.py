"""The fast paths link traces exactly as the dict path does: the C fold of events read from the
text and of compact structs (when the extension is built), the Python fold of the structs, and
one dict per event."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from ncompass.traces import _collector, _decode, link, reader
from ncompass.traces._scanner import EventScanner
from ncompass.traces.link import LinkedTrace, link_trace
from ncompass.traces.reader import TraceValueError
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


def linked_every_way(path: Path, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The trace linked by the C fold of its text and of structs (when built), by the Python
    fold of structs, and of dicts."""
    linked = [everything_linked(link_trace(path, progress=False))]
    with monkeypatch.context() as patch:
        patch.setattr(reader, "decode_link_events", _decode.decode_link_structs)
        linked.append(everything_linked(link_trace(path, progress=False)))
        patch.setattr(_collector, "_fold", None)  # as built without a C compiler
        patch.setattr(link, "_fold", None)
        linked.append(everything_linked(link_trace(path, progress=False)))
        patch.setattr(reader, "decode_link_events", None)  # as without msgspec installed
        linked.append(everything_linked(link_trace(path, progress=False)))
    return linked


def assert_identical(linked: list[dict[str, Any]]) -> None:
    """Every way linked the trace alike, to each operator's ``max_us`` type."""
    reference = linked[-1]  # one dict per event, the reference
    for other in linked[:-1]:
        assert other == reference
        assert max_types(other) == max_types(reference)
        assert list(other["event_counts"]) == list(reference["event_counts"])


def max_types(linked: dict[str, Any]) -> dict[str, type]:
    """The type of each operator's ``max_us``: the duration as the trace wrote it (int or float)."""
    return {name: type(totals.max_us) for name, totals in linked["cpu_operators"].items()}


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
def test_shared_traces_link_identically_on_every_path(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert_identical(linked_every_way(path, monkeypatch))


def test_a_real_torch_trace_links_identically_on_every_path(
    torch_trace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    linked = linked_every_way(torch_trace, monkeypatch)
    assert_identical(linked)
    assert linked[-1]["markers"] and linked[-1]["cpu_operators"]


def test_awkward_events_link_identically_on_every_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = awkward_trace(tmp_path / "awkward.json")
    scanner = EventScanner(_decode.decode_link_structs)
    events = scanner.feed(path.read_bytes()) + scanner.close()
    # all but the last event, which the exact tokenizer cuts (nothing follows it to guess by)
    assert [type(event) for event in events[:-1]] == [_decode.link_event_type] * 14
    linked = linked_every_way(path, monkeypatch)
    assert_identical(linked)
    assert linked[-1]["event_counts"] == {"X": 9, "B": 2, "E": 1, "M": 1, "i": 1, "f": 1}


def test_batches_the_structs_cannot_hold_fall_back_to_dicts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    builder = TraceBuilder()
    builder.add(ph="X", cat="cpu_op", name="list-args", pid=CPU_PID, tid=1, ts=1, dur=1, args=[1])
    builder.marker("m", 0, 10).cpu_op("op", 2, 1)
    path = builder.write(tmp_path / "t.json")
    for decode in (_decode.decode_link_events, _decode.decode_link_structs):
        scanner = EventScanner(decode)
        events = scanner.feed(path.read_bytes()) + scanner.close()
        assert all(type(event) is dict for event in events)
    linked = linked_every_way(path, monkeypatch)
    assert_identical(linked)
    assert linked[0]["cpu_operators"]["list-args"].calls == 1


def test_the_scanner_hands_out_structs_when_given_the_decoder() -> None:
    text = shared_trace("amd_trace").read_bytes()
    scanner = EventScanner(_decode.decode_link_structs)
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


def edge_numbers_trace(path: Path) -> Path:
    """Values the C fold must leave to Python or store exactly as Python does."""
    builder = TraceBuilder().marker("outer", 0, 1000)
    builder.cpu_op("int-durations", 1, 3).cpu_op("int-durations", 5, 7).cpu_op(
        "int-durations", 9, 2
    )
    builder.add(ph="X", cat="cpu_op", name="float-then-int", pid=CPU_PID, tid=1, ts=20, dur=1.5)
    builder.add(ph="X", cat="cpu_op", name="float-then-int", pid=CPU_PID, tid=1, ts=22, dur=4)
    builder.add(ph="X", cat="cpu_op", name="quoted-duration", pid=CPU_PID, tid=1, ts=30, dur="2")
    builder.add(ph="X", cat="cpu_op", name="huge-start", pid=CPU_PID, tid=1, ts=2**53, dur=1)
    builder.add(ph="X", cat="cuda_driver", name="cuLaunchKernel", pid=CPU_PID, tid=2, ts=40,
                dur=1, args={"correlation": 77})  # fmt: skip
    builder.add(
        ph="X",
        cat="cuda_runtime",
        name="cudaGetDevice",
        pid=CPU_PID,
        tid=1,
        ts=41,
        dur=1,
        args={"correlation": True},
    )  # fmt: skip  (a bool is no correlation here)
    builder.add(ph="X", cat="cuda_runtime", name="cudaStreamSync", pid=CPU_PID, tid=1, ts=42,
                dur=1)  # fmt: skip
    builder.add(
        ph="X",
        cat="kernel",
        name="k-bool",
        pid=GPU_PID,
        tid=7,
        ts=50,
        dur=2,
        args={"correlation": True, "bytes": True},
    )  # fmt: skip  (isinstance: a 1)
    builder.add(ph="X", cat="gpu_memcpy", name="Memcpy HtoD", pid=GPU_PID, tid=7, ts=53, dur=2,
                args={"correlation": -(2**70), "bytes": -5})  # fmt: skip
    builder.add(ph="X", cat="kernel", name="k-77", pid=GPU_PID, tid=8, ts=56, dur=2.25,
                args={"correlation": 77, "bytes": 2**40})  # fmt: skip
    builder.add(
        ph="X",
        cat="kernel",
        name="k-77-graph",
        pid=GPU_PID,
        tid=8,
        ts=59,
        dur=1,
        args={"correlation": 77},
    )  # fmt: skip  (two GPU events, one launch id)
    builder.add(
        ph="X",
        cat="cuda_runtime",
        name="cudaGraphLaunch",
        pid=CPU_PID,
        tid=1,
        ts=43,
        dur=1,
        args={"correlation": 77},
    )  # fmt: skip  (the later launch wins)
    builder.add(
        ph="X", cat="gpu_user_annotation", name="gpu-range", pid=GPU_PID, tid=7, ts=60, dur=2000
    )  # fmt: skip  (moves the end of the trace, nothing else)
    builder.add(ph="X", cat="cuda_sync", name="sync", pid=GPU_PID, tid=7, ts=61, dur=1)
    builder.add(ph="X", cat="python_function", name="f", pid=CPU_PID, tid="main", ts=70, dur=1,
                args={"correlation": 78})  # fmt: skip
    builder.add(ph="B", cat="cpu_op", name="never-closed", pid=CPU_PID, tid=1, ts=80)
    builder.add(ph="s", id=1, pid=CPU_PID, tid=1, ts=80, cat="ac2g", name="ac2g")
    builder.add(ph=5, pid=CPU_PID, tid=1, ts=81)
    return builder.write(path)


def test_edge_numbers_link_identically_on_every_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    linked = linked_every_way(edge_numbers_trace(tmp_path / "t.json"), monkeypatch)
    assert_identical(linked)
    native = linked[0]
    assert max_types(native)["int-durations"] is int
    graph = native["names"].index("cudaGraphLaunch")
    launches = [native["launches"][0].index(graph)] * 2
    assert native["gpu"][6][-2:] == launches  # both GPU events with id 77 on the later launch
    assert native["event_counts"] == {"X": 19, "B": 1, "s": 1, "?": 1}


def test_the_c_fold_is_used_when_built(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if _collector._fold is None:
        # CI installs with `pip install -e .`, which builds it: there, a missing build is a bug.
        assert not os.environ.get("CI"), "the C extension ncompass.traces._fold was not built"
        pytest.skip("ncompass.traces._fold is not built here (pip install -e . builds it)")
    assert link.fold_path() == "C"
    handed_to_python: list[Any] = []
    fold_in_python = _collector.Collector._add_in_python

    def counting(collector: Any, events: Any) -> None:
        handed_to_python.extend(events)
        fold_in_python(collector, events)

    monkeypatch.setattr(_collector.Collector, "_add_in_python", counting)
    trace = link_trace(shared_trace("ns_resolution_trace"), progress=False)
    folded = sum(trace.event_counts.values())
    # Python sees only the markers, metadata and the first event (which sets the origin)
    assert 0 < len(handed_to_python) < folded / 10
    monkeypatch.setattr(_collector, "_fold", None)
    assert link.fold_path() == "Python, structs"
    monkeypatch.setattr(_collector, "link_event_type", None)
    assert link.fold_path() == "Python, dicts"


def test_launches_at_nan_times_are_refused_alike_on_every_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    builder = TraceBuilder().marker("outer", 0, 100).marker("inner", 10, 20)
    for ts in (50, float("nan"), 15, 15, float("nan"), 5):
        builder.launch("k", ts, 1, 200, 1)
    path = builder.write(tmp_path / "t.json")
    refusals = []
    for way in range(4):
        with monkeypatch.context() as patch:
            if way >= 1:
                patch.setattr(reader, "decode_link_events", _decode.decode_link_structs)
            if way >= 2:
                patch.setattr(_collector, "_fold", None)
                patch.setattr(link, "_fold", None)
            if way >= 3:
                patch.setattr(reader, "decode_link_events", None)
            with pytest.raises(TraceValueError) as caught:
                link_trace(path, progress=False)
            refusals.append(str(caught.value))
    assert len(set(refusals)) == 1
    assert 'the 5th event (ph "X", name "cudaLaunchKernel") has a ts of NaN' in refusals[0]


def test_integers_beyond_64_bits_are_read_as_orjson_reads_them() -> None:
    # msgspec keeps them exact, orjson makes them floats: which one reads an event depends on
    # where the reader cut its batch, so the structs hold what orjson reads
    text = b'[{"pid": 18446744073709551616, "tid": -9223372036854775809, "ts": 2, "dur": %s}]'
    for dur in (b"1", b"9223372036854775808", b"1" + b"0" * 400):
        (event,) = _decode.decode_link_structs(text % dur)
        reference = orjson.loads(text % b"1")[0]
        assert (event.pid, event.tid) == (reference["pid"], reference["tid"])
        assert type(event.pid) is float and type(event.tid) is float
        assert type(event.dur) is int  # within 64 bits (unsigned), or too large for a float
    # the standard library's decoder (of the events orjson refuses, NaN here) reads them so too
    scanner = EventScanner()
    (event,) = scanner.feed(text % b"NaN") + scanner.close()
    assert type(event["pid"]) is float and event["pid"] == reference["pid"]
    # a list or an object where linking reads a value: the dicts of the general decoder
    assert _decode.decode_link_structs(b'[{"pid": [1], "ts": 1}]') is None
    assert _decode.decode_link_structs(b'[{"args": {"bytes": {"a": 1}}}]') is None


def test_more_distinct_names_than_the_token_table_keeps_link_alike_on_every_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the C fold empties its table of event-text tokens past 32K (what points into it too: the
    # counted phases, the recent threads); every name stays, as in the Python folds
    builder = TraceBuilder().marker("outer", 0, 10**7)
    for index in range(40_000):
        builder.cpu_op(f"op-{index % 7}", 1 + 10 * index, 2)
        correlation = builder.runtime("cudaLaunchKernel", 3 + 10 * index, 1)
        builder.gpu(f"kernel-{index}", 5 + 10 * index, 1, correlation=correlation)
        if index % 1000 == 0:
            builder.add(ph="s", id=index, pid=CPU_PID, tid=1, ts=3 + 10 * index, cat="ac2g")
    linked = linked_every_way(builder.write(tmp_path / "t.json"), monkeypatch)
    assert_identical(linked)
    assert len(linked[0]["names"]) == 40_000 + 7 + 1 + 1
    assert linked[0]["event_counts"] == {"X": 120_001, "s": 40}
