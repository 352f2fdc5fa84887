"""The chunked scanner gives the same events however the text is split into chunks."""

from __future__ import annotations

import json

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from ncompass.traces._scanner import EventScanner, ScanError

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
def test_any_chunking_gives_the_json_modules_answer(
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
def test_truncation_anywhere_is_an_error_at_or_before_the_cut(length: int) -> None:
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
def test_a_damaged_byte_is_reported_where_a_json_parser_finds_it(
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
