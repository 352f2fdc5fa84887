"""Reading converted traces back, and checking them the way a trace viewer reads them."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

Event = dict[str, Any]


def load_trace(path: Path) -> dict[str, Any]:
    """The whole trace document (``.json`` or gzip)."""
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    document: dict[str, Any] = json.loads(raw)
    return document


def complete_events(events: list[Event], category: str) -> list[Event]:
    """The ``X`` events of one category."""
    return [e for e in events if e.get("ph") == "X" and e.get("cat") == category]


def only(events: list[Event], name: str, category: str | None = None) -> Event:
    """The one complete event called ``name`` (of ``category``)."""
    found = [
        e
        for e in events
        if e.get("ph") == "X" and e["name"] == name and category in (None, e.get("cat"))
    ]
    assert len(found) == 1, f"{len(found)} events named {name!r}"
    return found[0]


def track_names(events: list[Event]) -> dict[tuple[int, int], str]:
    """``(pid, tid)`` -> thread name."""
    return {
        (e["pid"], e["tid"]): e["args"]["name"]
        for e in events
        if e.get("ph") == "M" and e["name"] == "thread_name"
    }


def process_names(events: list[Event]) -> dict[int, str]:
    """pid -> process name."""
    return {
        e["pid"]: e["args"]["name"]
        for e in events
        if e.get("ph") == "M" and e["name"] == "process_name"
    }


def assert_viewer_nesting(events: list[Event]) -> None:
    """Every track's complete events nest, as Perfetto needs to draw all of them.

    Viewers sort a track's slices by start time, the longer first among equal starts, and
    stack them: a slice that starts inside another must end inside it too.
    """
    tracks: dict[tuple[Any, Any], list[tuple[float, float]]] = defaultdict(list)
    for event in events:
        if event.get("ph") == "X":
            tracks[(event["pid"], event["tid"])].append((event["ts"], event["dur"]))
    for track, slices in tracks.items():
        open_ends: list[float] = []
        for start, duration in sorted(slices, key=lambda s: (s[0], -s[1])):
            end = start + duration
            while open_ends and open_ends[-1] <= start + 1e-9:
                open_ends.pop()
            assert not open_ends or end <= open_ends[-1] + 1e-9, (
                f"slice [{start}, {end}] overlaps its parent on track {track} without nesting"
            )
            open_ends.append(end)
