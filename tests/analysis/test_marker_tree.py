"""The summary page has the markers as a tree: each under its enclosing marker, self and total.

On HTA's real sampled rank: ``## forward ##`` sits under ``ProfilerStep#*`` and holds
``DistributedDataParallel.forward``; a parent's self time is its total less its children's.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ncompass.analysis.html_page import render_html
from ncompass.analysis.summary import summarize_trace

RANK0 = Path(__file__).resolve().parents[1] / "data/traces/hta/trace_filter/sampled_rank-0.json.gz"


def test_the_tree_nests_markers_under_their_enclosing_one() -> None:
    summary = summarize_trace(RANK0)
    rows = summary["structured"]["marker_tree"]
    by_path = {tuple(row["path"]): row for row in rows}
    step = by_path[("ProfilerStep#*",)]
    forward = by_path[("ProfilerStep#*", "## forward ##")]
    ddp = by_path[("ProfilerStep#*", "## forward ##", "DistributedDataParallel.forward")]
    assert (step["depth"], forward["depth"], ddp["depth"]) == (0, 1, 2)
    children = [row for path, row in by_path.items() if path[:-1] == ("ProfilerStep#*",)]
    assert step["self_us"] == pytest.approx(
        step["total_us"] - sum(row["total_us"] for row in children), abs=1.0
    )
    markers = {row["name"]: row for row in summary["structured"]["markers"]}
    assert step["total_us"] == pytest.approx(markers["ProfilerStep#*"]["cpu_total_us"])
    # depth first: a child comes right after its parent, before the parent's next sibling
    order = [tuple(row["path"]) for row in rows]
    assert (
        order.index(ddp["path"] and tuple(ddp["path"])) == order.index(tuple(forward["path"])) + 1
    )


def test_the_page_has_a_sortable_tree_table_with_self_and_total() -> None:
    html = render_html(summarize_trace(RANK0))
    table = re.search(r'<table class="sortable marker-tree">.*?</table>', html, re.S)
    assert table is not None
    assert "<th>marker</th><th>calls</th><th>self</th><th>total</th>" in table.group(0)
    assert re.search(r'padding-left:2\.8em">DistributedDataParallel\.forward</td>', table.group(0))
