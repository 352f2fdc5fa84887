"""Lanes: slices that overlap without nesting go to extra tracks, at any depth."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ncompass.traces.nsys.layout import LaneLayout, spread_overlapping_slices
from tests.nsys.trace_checks import assert_viewer_nesting

intervals = st.lists(
    st.tuples(st.integers(0, 1_000), st.integers(0, 300)).map(lambda s: (s[0], s[0] + s[1])),
    max_size=60,
)


def test_nested_slices_stay_on_the_track_and_partial_overlaps_move() -> None:
    layout = LaneLayout()
    placed = [
        layout.place(0, 100),  # outer
        layout.place(10, 50),  # nested
        layout.place(20, 30),  # nested deeper
        layout.place(40, 70),  # starts inside "nested", ends after it: overlap lane
        layout.place(45, 60),  # nests inside the previous one, on its lane
        layout.place(60, 100),  # ends with outer: nested
        layout.place(100, 120),  # after outer: back on the track
    ]
    assert placed == [0, 0, 0, 1, 1, 0, 0]
    assert layout.lane_count == 2


@given(intervals)
def test_every_lane_nests_whatever_the_slices(slices: list[tuple[int, int]]) -> None:
    layout = LaneLayout()
    lanes: dict[int, list[tuple[int, int]]] = {}
    for start, end in sorted(slices, key=lambda s: (s[0], -s[1])):
        lanes.setdefault(layout.place(start, end), []).append((start, end))
    events = [
        {"ph": "X", "pid": 1, "tid": lane, "ts": start, "dur": end - start}
        for lane, placed in lanes.items()
        for start, end in placed
    ]
    assert_viewer_nesting(events)
    assert sum(len(placed) for placed in lanes.values()) == len(slices)


@given(intervals)
def test_spreading_a_trace_in_memory_keeps_every_slice(slices: list[tuple[int, int]]) -> None:
    events = [
        {"ph": "X", "name": f"s{i}", "pid": 7, "tid": 7, "ts": s / 1000, "dur": (e - s) / 1000}
        for i, (s, e) in enumerate(slices)
    ]
    events.append({"ph": "M", "name": "thread_name", "pid": 7, "tid": 7, "args": {"name": "main"}})
    added = spread_overlapping_slices(events)
    assert_viewer_nesting(events)
    assert len([e for e in events if e["ph"] == "X"]) == len(slices)
    names = [e["args"]["name"] for e in events if e["ph"] == "M"][1:]
    assert names == [f"main · overlap {lane}" for lane in range(1, added + 1)]
