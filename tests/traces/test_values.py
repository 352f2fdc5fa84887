"""Values of the wrong type or range in the fields linking reads (a pid that is a list, a
correlation id beyond 64 bits, a name that is an object, ...): every decode path links such a
trace alike, or refuses it alike with one TraceValueError naming the file, the event and the
field, never another exception."""

from __future__ import annotations

import math
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from ncompass.errors import TraceError
from ncompass.traces import _collector, _decode, _split, link, reader
from ncompass.traces.link import link_trace
from ncompass.traces.reader import EventsLeftOutWarning, TraceValueError
from tests.traces.builders import CPU_PID, GPU_PID, TraceBuilder
from tests.traces.test_decode import everything_linked

pytest.importorskip("msgspec")


def every_kind() -> TraceBuilder:
    """One event of each kind linking tells apart, in the order of KINDS."""
    builder = TraceBuilder().marker("outer", 0, 100).cpu_op("op", 1, 2)
    builder.launch("k", 10, 2, 30, 5)
    builder.gpu("Memcpy HtoD", 40, 2, category="gpu_memcpy", correlation=1, bytes=64)
    builder.gpu("Memset", 43, 1, category="gpu_memset", bytes=8)
    builder.add(ph="X", cat="gpu_user_annotation", name="ga", pid=GPU_PID, tid=7, ts=30, dur=10)
    builder.add(ph="B", cat="user_annotation", name="paired", pid=CPU_PID, tid=1, ts=50)
    builder.add(ph="E", pid=CPU_PID, tid=1, ts=60)
    builder.add(ph="M", name="thread_name", pid=CPU_PID, tid=1, args={"name": "main"})
    builder.add(ph="M", name="thread_name", pid=CPU_PID, tid=5,
                args={"name": "overlap", "overlap_of_tid": 1})  # fmt: skip
    builder.add(ph="s", id=1, pid=CPU_PID, tid=1, ts=10, cat="ac2g", name="ac2g")
    builder.add(ph="f", id=1, pid=GPU_PID, tid=7, ts=30, cat="ac2g", name="ac2g", bp="e")
    return builder


KINDS = ("marker", "cpu_op", "cuda_runtime", "kernel", "gpu_memcpy", "gpu_memset")
KINDS += ("gpu_user_annotation", "B", "E", "M", "M overlap", "ac2g s", "ac2g f")
FIELDS = ("ph", "cat", "name", "pid", "tid", "ts", "dur", "args")
FIELDS += ("args.correlation", "args.bytes", "args.name", "args.overlap_of_tid")
VALUES: dict[str, Any] = {
    "2**63": 2**63,
    "2**64": 2**64,
    "2**64 + 1": 2**64 + 1,
    "-(2**63) - 1": -(2**63) - 1,
    "10**400": 10**400,
    "-5": -5,
    "1.5": 1.5,
    "9.3e18": 9.3e18,
    "1e308": 1e308,
    "NaN": math.nan,
    "Infinity": math.inf,
    "a string": "abc",
    "a quoted number": "12",
    "a quoted huge number": "1e400",
    "true": True,
    "null": None,
    "a list": [1],
    "a nested list": [[1, [2]]],
    "an object": {"a": 1},
}

X_KINDS = {"marker", "cpu_op", "cuda_runtime", "kernel", "gpu_memcpy", "gpu_memset"}
X_KINDS |= {"gpu_user_annotation"}
GPU_KINDS = {"kernel", "gpu_memcpy", "gpu_memset"}
# the kinds whose (pid, tid) linking keeps: markers, launches, GPU streams, ranges, thread names
THREAD_KINDS = {"marker", "cuda_runtime", *GPU_KINDS, "B", "E", "M", "M overlap"}


def refusal(kind: str, field: str, value: Any) -> tuple[str, int] | None:
    """What the refusal of ``value`` in ``field`` of the ``kind`` event names (the words about
    the field, and which event: counting from 1), or None when linking takes it."""
    position = KINDS.index(kind) + 1
    container = isinstance(value, (list, dict))
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    too_large_for_a_float = type(value) is int and abs(value) > 1e308
    if field in ("pid", "tid") and container and kind in THREAD_KINDS:
        return f"has a {field} that is a", position
    if field == "name" and container and kind in X_KINDS:
        return "has a name that is a", position
    if field == "name" and container and kind == "B":  # read when the E completes it
        return 'begun by the event (ph "B"), which has a name that is a', position + 1
    if field == "ts" and too_large_for_a_float and kind == "B":
        return "which has a ts of 1000", position + 1
    if field == "ts" and too_large_for_a_float and kind in X_KINDS | {"E"}:
        return "has a ts of 1000", position
    if field == "dur" and too_large_for_a_float and kind in X_KINDS:
        return "has a dur of 1000", position
    if field == "ts" and is_no_time(value) and kind == "B":
        return "which has a ts of", position + 1
    if field == "ts" and is_no_time(value) and kind in X_KINDS | {"E"}:
        return "has a ts of", position
    if field == "dur" and is_no_time(value) and kind in X_KINDS:
        return "has a dur of", position
    beyond_64_bits = number and value >= 2**63
    if field == "args.correlation" and beyond_64_bits and kind in {"cuda_runtime", *GPU_KINDS}:
        return "has args.correlation", position
    if field == "args.bytes" and beyond_64_bits and kind in GPU_KINDS:
        return "has args.bytes", position
    if field == "args.overlap_of_tid" and container and kind in {"M", "M overlap"}:
        return "has args.overlap_of_tid that is a", position
    return None


def is_no_time(value: Any) -> bool:
    """Whether a ts or dur is refused as no time: not a number (nor a quoted one), NaN,
    infinite or beyond 2^53 µs in magnitude; a missing (null) one reads as 0, an integer too
    large for a float has its own words."""
    if value is None or (type(value) is int and abs(value) > 1e308):
        return False
    if not isinstance(value, (int, float, str)) or isinstance(value, bool):
        return True
    try:
        number = float(value)
    except ValueError:
        return True
    return not math.isfinite(number) or abs(number) > 2**53


def with_value(kind: str, field: str, value: Any) -> TraceBuilder:
    """The trace of every kind with ``value`` in ``field`` of the ``kind`` event."""
    builder = every_kind()
    event = builder.events[KINDS.index(kind)]
    if field.startswith("args."):
        args = event.get("args")
        event["args"] = {**(args if isinstance(args, dict) else {}), field[5:]: value}
    else:
        event[field] = value
    return builder


def outcomes_every_way(path: Path, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """What linking the trace gives (the repr of everything linked, or the TraceError raised)
    on every path: the C fold of the text, of msgspec's structs, the Python fold of the
    structs, of dicts."""

    def outcome() -> Any:
        try:
            # repr: nan != nan, and an int is not its float (an operator's max_us keeps it)
            return repr(everything_linked(link_trace(path, progress=False)))
        except TraceError as error:
            return (type(error).__name__, str(error))

    outcomes = [outcome()]
    with monkeypatch.context() as patch:
        patch.setattr(reader, "decode_link_events", _decode.decode_link_structs)
        outcomes.append(outcome())
        patch.setattr(_collector, "_fold", None)  # as built without a C compiler
        patch.setattr(link, "_fold", None)
        outcomes.append(outcome())
        patch.setattr(reader, "decode_link_events", None)  # as without msgspec installed
        outcomes.append(outcome())
    return outcomes


def ordinal(number: int) -> str:
    """``1st``, ``2nd``, ... up to ``19th``."""
    return f"{number}{ {1: 'st', 2: 'nd', 3: 'rd'}.get(number, 'th') }"


@pytest.mark.parametrize("kind", KINDS)
def test_odd_values_link_alike_or_are_refused_alike_on_every_path(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for field in FIELDS:
        for label, value in VALUES.items():
            path = with_value(kind, field, value).write(tmp_path / "t.json")
            case = f"{kind} {field} {label}"
            outcomes = outcomes_every_way(path, monkeypatch)
            assert all(other == outcomes[-1] for other in outcomes), case
            expected = refusal(kind, field, value)
            if expected is None:
                assert isinstance(outcomes[0], str), (case, outcomes[0])
                continue
            words, position = expected
            assert outcomes[0][0] == "TraceValueError", (case, outcomes[0])
            message = outcomes[0][1]
            assert message.startswith(f"{path}: cannot link the trace: "), case
            assert f"the {ordinal(position)} event (" in message, (case, message)
            assert words in message, (case, message)
            assert message.endswith("Fix or remove that event, or export the trace again."), case


def test_a_correlation_id_beyond_64_bits_is_one_clear_line(tmp_path: Path) -> None:
    # found by fuzzing: OverflowError on every path
    path = with_value("kernel", "args.correlation", 2**63).write(tmp_path / "t.json")
    with pytest.raises(TraceValueError) as caught:
        link_trace(path, progress=False)
    assert str(caught.value) == (
        f'{path}: cannot link the trace: the 4th event (ph "X", name "k") has args.correlation '
        "9223372036854775808, which does not fit in 64 bits. Fix or remove that event, or export "
        "the trace again."
    )
    assert caught.value.path == str(path) and caught.value.event == 4


def test_a_pid_that_is_a_list_is_one_clear_line(tmp_path: Path) -> None:
    # found by fuzzing: TypeError: unhashable type: 'list'
    path = with_value("cuda_runtime", "pid", [1]).write(tmp_path / "t.json")
    with pytest.raises(TraceValueError, match=r'the 3rd event \(ph "X", name "cudaLaunchKernel"\) '
                       "has a pid that is a list, not a number or a string"):  # fmt: skip
        link_trace(path, progress=False)


def test_a_range_never_ended_is_named_by_its_begin(tmp_path: Path) -> None:
    builder = TraceBuilder().marker("outer", 0, 100)
    builder.add(ph="B", cat="cuda_runtime", name="open", pid=CPU_PID, tid=1, ts=50,
                args={"correlation": 2**64})  # fmt: skip
    with pytest.raises(TraceValueError) as caught:
        link_trace(builder.write(tmp_path / "t.json"), progress=False)
    assert caught.value.event is None
    assert 'the range begun by the event (ph "B", name "open") and never ended has ' in str(
        caught.value
    )


ODD_EVENTS = {
    "kernel pid 2**64 + 1": ({"pid": 2**64 + 1}, None),
    "cpu_op name 2**70": ({"cat": "cpu_op", "name": 2**70}, None),
    "cpu_op dur 2**64": ({"cat": "cpu_op", "dur": 2**64}, "has a dur of 1.8446744"),
    "marker name 2**65": ({"cat": "user_annotation", "name": 2**65}, None),
    "kernel correlation 2**63": ({"args": {"correlation": 2**63}}, "has args.correlation"),
    "kernel correlation 2**64": ({"args": {"correlation": 2**64}}, "has args.correlation"),
    "kernel tid list": ({"tid": [7]}, "has a tid that is a list"),
}


@pytest.mark.parametrize("odd", ODD_EVENTS, ids=list(ODD_EVENTS))
def test_where_the_reader_cuts_its_batches_changes_nothing(
    odd: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    changes, refused = ODD_EVENTS[odd]
    builder = TraceBuilder().marker("outer", 0, 10_000)
    for index in range(150):
        builder.cpu_op("op", 1 + 10 * index, 2)
        builder.launch("k", 3 + 10 * index, 1, 5 + 10 * index, 1)
    odd_event = {"ph": "X", "cat": "kernel", "name": "odd", "pid": GPU_PID, "tid": 7, "ts": 9,
                 "dur": 1, "args": {"correlation": 1}}  # fmt: skip
    builder.events.insert(200, {**odd_event, **changes})
    path = builder.write(tmp_path / "t.json")
    outcomes = []
    for read_size in (97, 1031, 4099, 128 << 10):
        monkeypatch.setattr(reader, "READ_SIZE", read_size)
        outcomes += outcomes_every_way(path, monkeypatch)
    assert all(other == outcomes[0] for other in outcomes)
    if refused is None:
        assert isinstance(outcomes[0], str)
    else:
        assert outcomes[0][0] == "TraceValueError" and "the 201st event" in outcomes[0][1]
        assert refused in outcomes[0][1]


@contextmanager
def threads_for_processes(workers: int) -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(max_workers=workers) as pool:
        yield pool


def test_a_split_trace_names_the_event_as_one_pass_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    builder = TraceBuilder().marker("outer", 0, 100_000)
    for index in range(3000):
        builder.launch("k", 3 + 10 * index, 1, 5 + 10 * index, 1)
    builder.events[5000]["args"]["correlation"] = 2**63  # in the second part
    path = builder.write(tmp_path / "t.json")
    with pytest.raises(TraceValueError) as one_pass:
        link_trace(path, progress=False, jobs=1)
    monkeypatch.setattr(_split, "SPLIT_MIN_BYTES", 0)
    monkeypatch.setattr(_split, "worker_pool", threads_for_processes)
    with pytest.raises(TraceValueError) as split:
        link_trace(path, progress=False, jobs=3)
    assert str(split.value) == str(one_pass.value)
    assert "the 5,001st event" in str(one_pass.value)


def with_times(times: dict[int, dict[str, Any]]) -> TraceBuilder:
    """A marker, four launched kernels, and ``times`` (event index -> fields) written over."""
    builder = TraceBuilder().marker("outer", 0, 100)
    for index in range(4):
        builder.launch("k", 10 + 20 * index, 2, 12 + 20 * index, 10)
    for index, fields in times.items():
        builder.events[index].update(fields)
    return builder


@pytest.mark.parametrize(
    ("field", "text", "words"),
    [
        ("dur", "NaN", "has a dur of NaN, which is not a finite number"),
        ("dur", "1e309", "has a dur of Infinity, which is not a finite number"),
        ("ts", "-1e309", "has a ts of -Infinity, which is not a finite number"),
        ("ts", '"abc"', 'has a ts of "abc", which is not a number'),
        ("ts", '"1e400"', 'has a ts of "1e400", which is not a finite number'),
        ("dur", "true", "has a dur of true, which is not a number"),
    ],
)
def test_a_time_that_is_no_number_is_refused_alike_on_every_path(
    field: str, text: str, words: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # found by trying it: NaN and 1e309 went into every sum, a string ts was read as 0
    path = with_times({4: {field: "PLACEHOLDER"}}).write(tmp_path / "t.json")
    path.write_text(path.read_text().replace('"PLACEHOLDER"', text))
    outcomes = outcomes_every_way(path, monkeypatch)
    assert all(other == outcomes[0] for other in outcomes)
    kind, message = outcomes[0]
    assert kind == "TraceValueError"
    assert f'the 5th event (ph "X", name "k") {words}. Fix or remove' in message


def test_negative_durations_are_left_out_with_one_warning_on_every_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # found by trying it: a kernel of dur -40 made compute -57 % and idle 157 %
    negative = {4: {"dur": -40}, 6: {"dur": "-3"}, 8: {"dur": -0.5}}
    path = with_times(negative).write(tmp_path / "t.json")
    with pytest.warns(EventsLeftOutWarning) as warned:
        outcomes = outcomes_every_way(path, monkeypatch)
    assert all(other == outcomes[0] for other in outcomes)
    assert [str(warning.message) for warning in warned] == [
        f"{path}: left out 3 events with a negative duration, which no time can be given (the "
        'first: the 5th event (ph "X", name "k") has a dur of -40); the numbers are of the '
        "other events"
    ] * 4  # one per way
    with pytest.warns(EventsLeftOutWarning):
        trace = link_trace(path, progress=False)
    assert list(trace.gpu.duration) == [10.0]  # the one kernel left
    assert min(trace.launches.duration) >= 0


def test_a_range_that_ends_before_it_begins_is_left_out(tmp_path: Path) -> None:
    builder = TraceBuilder().marker("outer", 0, 100)
    builder.add(ph="B", cat="user_annotation", name="backwards", pid=CPU_PID, tid=1, ts=50)
    builder.add(ph="E", pid=CPU_PID, tid=1, ts=40)
    with pytest.warns(EventsLeftOutWarning, match=r'the 3rd event \(ph "E"\) ends before'):
        trace = link_trace(builder.write(tmp_path / "t.json"), progress=False)
    assert [marker.name for marker in trace.markers] == ["outer"]


def test_a_split_trace_warns_as_one_pass_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    builder = TraceBuilder().marker("outer", 0, 100_000)
    for index in range(3000):
        builder.launch("k", 3 + 10 * index, 1, 5 + 10 * index, 1)
    builder.events[5000]["dur"] = -1  # in the second part
    path = builder.write(tmp_path / "t.json")
    with pytest.warns(EventsLeftOutWarning) as one_pass:
        link_trace(path, progress=False, jobs=1)
    monkeypatch.setattr(_split, "SPLIT_MIN_BYTES", 0)
    monkeypatch.setattr(_split, "worker_pool", threads_for_processes)
    with pytest.warns(EventsLeftOutWarning) as split:
        link_trace(path, progress=False, jobs=3)
    assert [str(w.message) for w in split] == [str(w.message) for w in one_pass]
    assert "the 5,001st event" in str(one_pass[0].message)


def test_summarize_refuses_a_nan_duration_in_one_line(tmp_path: Path) -> None:
    path = with_times({4: {"dur": "PLACEHOLDER"}}).write(tmp_path / "t.json")
    path.write_text(path.read_text().replace('"PLACEHOLDER"', "NaN"))
    done = subprocess.run(
        [sys.executable, "-m", "ncompass", "summarize", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f'error: {path}: cannot link the trace: the 5th event (ph "X", name "k") has a dur of '
        "NaN, which is not a finite number. Fix or remove that event, or export the trace again."
    ]


@pytest.mark.parametrize(
    ("field", "text", "shown"),
    [("dur", "1e300", "1e+300"), ("ts", "1e18", "1e+18"), ("ts", "-1e18", "-1e+18")],
)
def test_a_time_beyond_285_years_is_refused_alike_on_every_path(
    field: str, text: str, shown: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # found by trying it: a dur of 1e300 was summed and printed as 300-digit seconds
    path = with_times({4: {field: "PLACEHOLDER"}}).write(tmp_path / "t.json")
    path.write_text(path.read_text().replace('"PLACEHOLDER"', text))
    outcomes = outcomes_every_way(path, monkeypatch)
    assert all(other == outcomes[0] for other in outcomes)
    kind, message = outcomes[0]
    assert kind == "TraceValueError"
    assert (
        f'the 5th event (ph "X", name "k") has a {field} of {shown}, which is not a time in '
        "microseconds: beyond ±2^53 µs (285 years), no clock gets there. Fix or remove"
    ) in message


def test_a_time_of_2_to_the_53_microseconds_is_still_a_time(tmp_path: Path) -> None:
    path = with_times({4: {"ts": 2**53, "dur": 1}}).write(tmp_path / "t.json")
    trace = link_trace(path, progress=False)
    starts = [*trace.gpu.start, *trace.launches.start]
    assert 2**53 - trace.origin_us in starts


def test_summarize_refuses_a_300_digit_duration_in_one_line(tmp_path: Path) -> None:
    path = with_times({4: {"dur": 1e300}}).write(tmp_path / "t.json")
    done = subprocess.run(
        [sys.executable, "-m", "ncompass", "summarize", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stdout[-2000:]
    assert len(done.stderr.strip().splitlines()) == 1
    assert "has a dur of 1e+300, which is not a time in microseconds" in done.stderr
