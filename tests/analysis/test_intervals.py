from __future__ import annotations

from itertools import pairwise

from hypothesis import given
from hypothesis import strategies as st

from ncompass.analysis.intervals import gaps, intersection_length, total_length, union

intervals = st.lists(
    st.tuples(st.integers(0, 200), st.integers(0, 50)).map(
        lambda p: (float(p[0]), float(p[0] + p[1]))
    ),
    max_size=25,
)


def covered_units(items: list[tuple[float, float]]) -> set[int]:
    """Brute force on a unit grid: which unit cells [t, t+1) some interval covers."""
    return {t for start, end in items for t in range(int(start), int(end))}


@given(intervals)
def test_union_length_matches_a_grid_count(items: list[tuple[float, float]]) -> None:
    merged = union(items)
    assert total_length(merged) == len(covered_units(items))
    # disjoint, sorted, not touching
    assert all(a[1] < b[0] for a, b in pairwise(merged))


@given(intervals, intervals)
def test_intersection_matches_a_grid_count(first: list, second: list) -> None:
    expected = len(covered_units(first) & covered_units(second))
    assert intersection_length(union(first), union(second)) == expected


@given(intervals)
def test_gaps_are_the_uncovered_cells_inside_the_span(items: list[tuple[float, float]]) -> None:
    merged = union(items)
    covered = covered_units(items)
    if not merged:
        assert gaps(merged) == []
        return
    inside = set(range(int(merged[0][0]), int(merged[-1][1])))
    assert total_length(gaps(merged)) == len(inside - covered)


def test_touching_intervals_merge() -> None:
    assert union([(5.0, 7.0), (0.0, 5.0), (9.0, 9.5)]) == [(0.0, 7.0), (9.0, 9.5)]
