"""The noop context: C builtins that never call the name function."""

from __future__ import annotations

from ncompass.runtime.sites import bind


def test_noop_markers_are_builtins_that_never_compute_names() -> None:
    enter, exit_range = bind("noop", "x")
    dynamic_enter, _ = bind("noop", "x[{i}]", dynamic=True)
    calls: list[int] = []

    exit_range(enter())
    exit_range(dynamic_enter(lambda: calls.append(1)))

    assert calls == []
    assert enter is bool and exit_range is type
