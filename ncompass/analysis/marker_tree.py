"""The markers as a tree: each marker under the marker that encloses it, with self and total.

The marker table lists names side by side, so a parent and its children (whose time is in the
parent's too) read as separate costs. The tree keeps each marker under its enclosing one (the
innermost marker around it on the same thread): one row per path from a top-level marker, with
its calls, total (inclusive) time and self time (less the markers nested directly inside),
children right under their parent, the most expensive first.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from typing_extensions import TypedDict

from ncompass.traces.link import NO_LINK, LinkedTrace, marker_group

MAX_ROWS = 200  # the page stays small whatever the trace: deeper or cheaper paths are cut


class MarkerTreeRow(TypedDict):
    """One path of the marker tree: its marker, depth, calls and times (µs)."""

    name: str
    depth: int
    path: list[str]
    calls: int
    total_us: float
    self_us: float


@dataclass
class _Node:
    calls: int = 0
    total_us: float = 0.0
    self_us: float = 0.0
    children: dict[str, _Node] = field(default_factory=dict)


def marker_tree(trace: LinkedTrace, *, max_rows: int = MAX_ROWS) -> list[MarkerTreeRow]:
    """The tree's rows, depth first, each level's most expensive path first."""
    markers = trace.markers
    root = _Node()
    nodes: dict[int, _Node] = {}  # each marker's node, by index

    def node_of(index: int) -> _Node:
        chain = []  # the marker and its enclosing ones whose node is not known yet
        while index != NO_LINK and index not in nodes:
            chain.append(index)
            index = markers[index].parent
        parent = root if index == NO_LINK else nodes[index]
        for link in reversed(chain):
            name = marker_group(markers[link].name)
            child = parent.children.get(name)
            if child is None:
                child = parent.children[name] = _Node()
            nodes[link] = parent = child
        return parent

    for index, marker in enumerate(markers):
        node = node_of(index)
        node.calls += 1
        node.total_us += marker.duration
        node.self_us += max(marker.duration - marker.nested_us, 0.0)
    rows: list[MarkerTreeRow] = []
    stack: list[tuple[list[str], _Node]] = [([], root)]
    while stack and len(rows) < max_rows:
        path, node = stack.pop()
        if path:
            rows.append(
                {
                    "name": path[-1],
                    "depth": len(path) - 1,
                    "path": path,
                    "calls": node.calls,
                    "total_us": node.total_us,
                    "self_us": node.self_us,
                }
            )
        ordered = sorted(node.children.items(), key=lambda item: (-item[1].total_us, item[0]))
        stack.extend(([*path, name], child) for name, child in reversed(ordered))
    return rows
