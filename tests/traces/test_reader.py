from __future__ import annotations

import gzip
import json
import pickle
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ncompass.errors import TraceError
from ncompass.traces.reader import CorruptTraceError, TraceReader, TraceValueError, read_metadata
from tests.traces.builders import TraceBuilder, shared_traces


def read_all(path: Path) -> tuple[list[dict], dict]:
    reader = TraceReader(path)
    events = list(reader)
    return events, reader.metadata


@pytest.mark.parametrize("trace", shared_traces(), ids=lambda path: path.parent.name)
def test_shared_trace_reads_exactly_like_the_json_module(trace: Path) -> None:
    expected = json.loads(gzip.decompress(trace.read_bytes()))
    events, metadata = read_all(trace)
    assert events == expected.pop("traceEvents")
    assert metadata == expected  # keys before and after traceEvents, baseTimeNanoseconds included


def test_plain_and_gzip_files_read_the_same(tmp_path: Path) -> None:
    builder = TraceBuilder().marker("step", 0, 10)
    builder.metadata["baseTimeNanoseconds"] = 5
    plain = builder.write(tmp_path / "t.json")
    compressed = builder.write(tmp_path / "t.json.gz")
    assert read_all(plain) == read_all(compressed)
    assert read_metadata(compressed) == {"schemaVersion": 1, "baseTimeNanoseconds": 5}


def test_gzip_is_detected_by_content_not_name(tmp_path: Path) -> None:
    path = tmp_path / "trace.json"
    path.write_bytes(gzip.compress(b'{"traceEvents": [{"ph": "i", "ts": 1}]}'))
    assert read_all(path)[0] == [{"ph": "i", "ts": 1}]


def test_concatenated_gzip_members_are_one_stream(tmp_path: Path) -> None:
    text = json.dumps({"traceEvents": [{"ph": "X", "ts": n, "dur": 1} for n in range(100)]})
    middle = len(text) // 2
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(text[:middle].encode()) + gzip.compress(text[middle:].encode()))
    assert len(read_all(path)[0]) == 100


@pytest.mark.parametrize(
    "text",
    ['{"traceEvents": []}', "[]", '  \n{ "traceEvents" : [ ] , "x": 1 }', '{"traceEvents":[]}'],
)
def test_an_empty_trace_has_no_events(tmp_path: Path, text: str) -> None:
    path = tmp_path / "empty.json"
    path.write_text(text)
    assert read_all(path)[0] == []


def test_bare_array_format_is_read(tmp_path: Path) -> None:
    path = tmp_path / "array.json"
    path.write_text('[{"ph": "B", "ts": 1}, {"ph": "E", "ts": 2}]')
    assert read_all(path) == ([{"ph": "B", "ts": 1}, {"ph": "E", "ts": 2}], {})


def test_tricky_strings_and_nested_objects_do_not_confuse_the_scanner(tmp_path: Path) -> None:
    events = [
        {"ph": "X", "name": 'a "}, {" b', "args": {"list": [{"a": 1}, {"b": 2}], "s": "]}"}},
        {"ph": "X", "name": "traceEvents", "args": {"nested": {"deep": [{"x": "}, {"}]}}},
        {"ph": "X", "name": "ünïcødé ✓", "args": {"escaped": '\\"}, {\\"'}},
    ] * 50
    path = tmp_path / "tricky.json"
    path.write_text(json.dumps({"traceEvents": events, "after": [{"k": 1}, {"k": 2}]}))
    assert read_all(path) == (events, {"after": [{"k": 1}, {"k": 2}]})


def test_non_finite_numbers_some_exporters_write_are_accepted(tmp_path: Path) -> None:
    path = tmp_path / "nan.json"
    path.write_text('{"traceEvents": [{"ph": "X", "dur": NaN}, {"ph": "X", "dur": 1}]}')
    events, _ = read_all(path)
    assert events[1] == {"ph": "X", "dur": 1}
    assert events[0]["dur"] != events[0]["dur"]  # NaN


def test_large_trace_is_read_in_several_batches(tmp_path: Path) -> None:
    events = [
        {"ph": "X", "name": f"op{n}", "ts": n, "dur": 1.5, "args": {"n": n}} for n in range(60_000)
    ]
    path = tmp_path / "big.json.gz"
    path.write_bytes(gzip.compress(json.dumps({"traceEvents": events}).encode()))
    batches = list(TraceReader(path).batches())
    assert len(batches) > 1
    assert [event for batch in batches for event in batch] == events


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.fixed_dictionaries(
            {
                "ph": st.sampled_from(["X", "B", "E", "i", "M", "C", "s", "f"]),
                "name": st.text(max_size=8),
                "ts": st.one_of(st.integers(0, 10**15), st.floats(0, 1e15)),
                "args": st.dictionaries(
                    st.text(max_size=3),
                    st.one_of(st.text(max_size=5), st.integers(-(2**63), 2**63 - 1)),
                    max_size=3,
                ),
            }
        ),
        max_size=30,
    ),
    st.sampled_from([", ", ",\n  ", ","]),
)
def test_any_event_list_round_trips(events: list[dict], separator: str) -> None:
    import tempfile

    text = (
        '{"schemaVersion": 1, "traceEvents": ['
        + separator.join(json.dumps(e) for e in events)
        + "]}"
    )
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "t.json"
        path.write_text(text)
        assert read_all(path) == (events, {"schemaVersion": 1})


def test_missing_file_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match=r"nope\.json: no such trace file"):
        read_all(tmp_path / "nope.json")


def test_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="is a directory"):
        read_all(tmp_path)


def test_truncated_json_names_file_and_byte_offset(tmp_path: Path) -> None:
    text = json.dumps({"traceEvents": [{"ph": "X", "ts": n, "dur": 1} for n in range(10)]})
    cut = text.index('{"ph": "X", "ts": 7')
    path = tmp_path / "cut.json"
    path.write_text(text[: cut + 10])
    with pytest.raises(CorruptTraceError) as caught:
        read_all(path)
    assert caught.value.path == str(path)
    assert caught.value.offset == cut
    assert f"{path}: cannot read the trace at byte {cut}" in str(caught.value)
    assert "truncated" in str(caught.value)


def test_truncated_gzip_names_the_compressed_offset(tmp_path: Path) -> None:
    events = [{"ph": "X", "name": f"e{n}", "ts": n} for n in range(20_000)]
    data = gzip.compress(json.dumps({"traceEvents": events}).encode())
    path = tmp_path / "cut.json.gz"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(
        TraceError, match=r"cut.json.gz: the gzip data is truncated at compressed byte \d+"
    ):
        read_all(path)


def test_corrupt_event_names_the_byte_offset(tmp_path: Path) -> None:
    good = '{"ph": "X", "ts": 1}'
    text = (
        '{"traceEvents": [' + ", ".join([good] * 5 + ['{"ph": "X", "ts": 1x}'] + [good] * 5) + "]}"
    )
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(CorruptTraceError) as caught:
        read_all(path)
    assert caught.value.offset == text.index("1x") + 1


def test_missing_closing_brace_is_truncation(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text('{"traceEvents": [{"ph": "X"}]')
    with pytest.raises(CorruptTraceError, match="truncated"):
        read_all(path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "is empty"),
        ("   ", "is empty"),
        ("hello", "not JSON"),
        ('{"events": []}', "no traceEvents array"),
        ('{"traceEvents": 5}', "not an array"),
    ],
)
def test_files_that_are_not_traces_get_a_clear_error(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "x.json"
    path.write_text(text)
    with pytest.raises(TraceError, match=message):
        read_all(path)


def test_progress_bar_goes_to_stderr_only_when_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = TraceBuilder().marker("m", 0, 1).write(tmp_path / "t.json")
    assert len(list(TraceReader(path, progress=True))) == 1
    assert len(list(TraceReader(path))) == 1  # not a terminal: no bar
    captured = capsys.readouterr()
    assert captured.out == ""


def test_a_stray_quote_in_a_real_trace_is_reported_at_its_byte(tmp_path: Path) -> None:
    # Replacing the opening quote of a key flips which text is inside strings for the rest of
    # the file: no event ends until the end of the file, yet the error names the damaged byte.
    source = next(t for t in shared_traces() if t.name == "nccl_data.json.gz")
    text = gzip.decompress(source.read_bytes())
    damaged_at = text.index(b'"name"', len(text) // 10)
    path = tmp_path / "damaged.json"
    path.write_bytes(text[:damaged_at] + b"@" + text[damaged_at + 1 :])
    with pytest.raises(CorruptTraceError) as caught:
        read_all(path)
    assert caught.value.offset == damaged_at
    assert f"{path}: cannot read the trace at byte {damaged_at}: malformed JSON" in str(
        caught.value
    )


def test_an_integer_too_long_for_python_is_a_corrupt_trace(tmp_path: Path) -> None:
    # found alongside: the standard library's decoder raised ValueError, not a TraceError
    path = tmp_path / "t.json"
    head = '{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur": 1}, '
    path.write_text(head + '{"ph": "X", "ts": 1' + "0" * 5000 + ', "dur": 1}]}')
    with pytest.raises(CorruptTraceError, match=r"at byte \d+: an event holds an integer of more"):
        read_all(path)


def test_trace_errors_survive_the_trip_from_a_worker_process(tmp_path: Path) -> None:
    for error in (
        CorruptTraceError(tmp_path / "t.json", 12, "truncated", compressed=True),
        TraceValueError(tmp_path / "t.json", 3, 'ph "X"', "has a pid that is a list"),
    ):
        copy = pickle.loads(pickle.dumps(error))
        assert type(copy) is type(error) and str(copy) == str(error)
        assert copy.__dict__ == error.__dict__
