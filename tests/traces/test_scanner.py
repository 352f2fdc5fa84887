"""The chunked scanner gives the same events however the text is split into chunks."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from ncompass.traces import _scanner
from ncompass.traces._scanner import EventScanner, ScanError
from ncompass.traces.reader import TraceReader

# Unfinished events are scanned on as open events past this size; 0 scans every unfinished event
# so, to test that way of cutting with the same properties.
OPEN_AFTER = [_scanner.OPEN_EVENT_BYTES, 0]


@contextmanager
def open_events_after(size: int) -> Iterator[None]:
    kept = _scanner.OPEN_EVENT_BYTES
    _scanner.OPEN_EVENT_BYTES = size
    try:
        yield
    finally:
        _scanner.OPEN_EVENT_BYTES = kept


TRICKY_EVENTS = [
    {"ph": "X", "name": 'a "}, {" b', "args": {"list": [{"a": 1}, {"b": 2}], "s": "]}"}},
    {"ph": "X", "name": "traceEvents", "args": {"nested": {"deep": [{"x": "}, {"}]}}},
    {"ph": "i", "name": 'ünïcødé ✓ \\ " }, {', "ts": 1.5},
    {"ph": "M", "name": "process_name", "args": {"name": "python"}},
]


def scan(text: bytes, cuts: list[int]) -> tuple[list[dict], dict]:
    scanner = EventScanner()
    events: list[dict] = []
    previous = 0
    for cut in sorted(set(cuts)):
        events += scanner.feed(text[previous:cut])
        previous = cut
    events += scanner.feed(text[previous:])
    events += scanner.close()
    return events, scanner.metadata


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.sampled_from(TRICKY_EVENTS), max_size=12),
    st.lists(st.integers(min_value=0, max_value=2000), max_size=12),
    st.sampled_from([", ", ",\n  ", ","]),
    st.booleans(),
)
@pytest.mark.parametrize("open_after", OPEN_AFTER)
def test_any_chunking_gives_the_json_modules_answer(
    open_after: int, events: list[dict], cuts: list[int], separator: str, keys_after: bool
) -> None:
    with open_events_after(open_after):
        chunking_gives_the_json_modules_answer(events, cuts, separator, keys_after)


def chunking_gives_the_json_modules_answer(
    events: list[dict], cuts: list[int], separator: str, keys_after: bool
) -> None:
    body = separator.join(json.dumps(event, ensure_ascii=False) for event in events)
    before = '{"schemaVersion": 1, "deviceProperties": [{"id": 0}, {"id": 1}], '
    after = ', "baseTimeNanoseconds": 17, "pg": [{"a": "}, {"}]}' if keys_after else "}"
    text = (before + '"traceEvents": [' + body + "]" + after).encode()
    expected = json.loads(text)
    assert scan(text, [cut % (len(text) + 1) for cut in cuts]) == (
        expected.pop("traceEvents"),
        expected,
    )


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=1, max_value=200))
@pytest.mark.parametrize("open_after", OPEN_AFTER)
def test_truncation_anywhere_is_an_error_at_or_before_the_cut(open_after: int, length: int) -> None:
    with open_events_after(open_after):
        truncation_is_an_error_at_or_before_the_cut(length)


def truncation_is_an_error_at_or_before_the_cut(length: int) -> None:
    text = json.dumps({"traceEvents": TRICKY_EVENTS * 3, "k": 1}).encode()
    cut = min(length * 3, len(text) - 1)
    with pytest.raises(ScanError) as caught:
        scan(text[:cut], [cut // 2])
    assert 0 <= caught.value.offset <= cut


CORRUPTIONS = {
    "stray character for a quote": (b'"', b"@"),
    "bracket for a brace": (b"}", b"]"),
    "semicolon for a colon": (b":", b";"),
}


@settings(max_examples=120, deadline=None)
@given(
    st.sampled_from(sorted(CORRUPTIONS)),
    st.integers(min_value=0, max_value=10**6),
    st.sampled_from([97, 4096, 1 << 16]),
)
@pytest.mark.parametrize("open_after", OPEN_AFTER)
def test_a_damaged_byte_is_reported_where_a_json_parser_finds_it(
    open_after: int, corruption: str, where: int, chunk: int
) -> None:
    with open_events_after(open_after):
        damaged_byte_is_reported_where_a_json_parser_finds_it(corruption, where, chunk)


def damaged_byte_is_reported_where_a_json_parser_finds_it(
    corruption: str, where: int, chunk: int
) -> None:
    events = [
        {"ph": "X", "name": f"k{n} <a, {{b}}>", "ts": n * 1.5, "args": {"grid": [1, 2]}}
        for n in range(400)
    ]
    text = json.dumps({"traceEvents": events, "baseTimeNanoseconds": 5}).encode()
    old, new = CORRUPTIONS[corruption]
    first_event = text.index(b"[") + 1
    position = text.index(old, first_event + where % (len(text) - first_event - 40))
    damaged = text[:position] + new + text[position + 1 :]
    try:
        json.loads(damaged)
    except json.JSONDecodeError as error:
        expected = error.pos
    else:
        assume(False)  # the byte sat inside a string: still valid JSON
    with pytest.raises(ScanError) as caught:
        scan(damaged, list(range(chunk, len(damaged), chunk)))
    assert caught.value.offset == expected


def long_name_trace(path: Path, length: int, escapes: bool = False) -> Path:
    """A launch and its kernel, whose name is ``length`` bytes of JSON text."""
    name = "\\n" * (length // 2) if escapes else "k" * length
    events = [
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
         "ts": 10, "dur": 2, "args": {"correlation": 1}},
        {"ph": "X", "cat": "kernel", "name": "NAME", "pid": 0, "tid": 7, "ts": 20, "dur": 5,
         "args": {"correlation": 1}},
    ]  # fmt: skip
    text = json.dumps({"traceEvents": events * 3})
    path.write_text(text.replace('"NAME"', '"' + name + '"', 1))
    return path


def cpu_seconds_to_read(path: Path) -> float:
    """The least CPU time of three reads (CPU time: other processes on the machine do not
    count; the least: what the reading costs, without the disturbances)."""
    times = []
    for _ in range(3):
        start = time.process_time()
        events = list(TraceReader(path, progress=False))
        times.append(time.process_time() - start)
    assert len(events) == 6
    return min(times)


@pytest.mark.parametrize("escapes", [False, True], ids=["plain", "escapes"])
def test_reading_a_long_value_takes_time_linear_in_its_length(
    escapes: bool, tmp_path: Path
) -> None:
    # found by trying it: a 1, 2, 4, 8 MiB name took 0.6, 1.7, 6.1, 22 CPU s (the unfinished
    # event was cut again from its start on every chunk)
    short = cpu_seconds_to_read(long_name_trace(tmp_path / "1.json", 1 << 20, escapes))
    long = cpu_seconds_to_read(long_name_trace(tmp_path / "4.json", 4 << 20, escapes))
    assert long / max(short, 1e-3) < 7, (short, long)  # linear: 4; it was 10 and more


_PEAK_OF_READING = """
import sys
from ncompass.traces.reader import TraceReader
events = sum(1 for _ in TraceReader(sys.argv[1], progress=False))
peak_kb = next(int(line.split()[1]) for line in open("/proc/self/status")
               if line.startswith("VmHWM:"))
print(events, peak_kb << 10)
"""


def peak_bytes_to_read(path: Path) -> int:
    """Peak resident memory of a fresh process reading the trace, over that of one reading a
    trace of one event (what the interpreter and ncompass take)."""

    def peak_of(trace: Path) -> int:
        done = subprocess.run(
            [sys.executable, "-c", _PEAK_OF_READING, str(trace)],
            capture_output=True,
            text=True,
            timeout=600,
            check=True,
        )
        events, peak = map(int, done.stdout.split())
        assert events
        return peak

    tiny = path.with_name("tiny.json")
    tiny.write_text('{"traceEvents": [{"ph": "X", "name": "op", "ts": 1, "dur": 1}]}')
    return peak_of(path) - peak_of(tiny)


def test_a_long_name_is_read_in_memory_of_a_few_times_its_length(tmp_path: Path) -> None:
    # found by trying it: an 8 MiB name took 1,070 MB
    length = 8 << 20
    peak = peak_bytes_to_read(long_name_trace(tmp_path / "t.json", length))
    assert peak < 3 * length + (16 << 20), peak / length


@pytest.mark.parametrize("where", ["before", "after"])
def test_a_long_top_level_key_is_read_in_memory_of_a_few_times_its_length(
    where: str, tmp_path: Path
) -> None:
    # found by trying it: a 50 MB deviceProperties took 480 MB (the buffer grew by copying)
    length = 32 << 20
    key = '"deviceProperties": [{"name": "' + "p" * length + '"}]'
    events = json.dumps([{"ph": "X", "name": "op", "ts": 1, "dur": 1}])
    text = (
        f'{{{key}, "traceEvents": {events}}}'
        if where == "before"
        else f'{{"traceEvents": {events}, {key}}}'
    )
    path = tmp_path / "t.json"
    path.write_text(text)
    peak = peak_bytes_to_read(path)
    assert peak < 3 * length + (16 << 20), peak / length
