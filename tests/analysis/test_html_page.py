from __future__ import annotations

import re
from pathlib import Path

from ncompass.analysis import summarize_trace
from ncompass.analysis.html_page import render_html
from tests.traces.builders import TraceBuilder, shared_trace


def test_page_is_self_contained_with_two_charts() -> None:
    page = render_html(summarize_trace(shared_trace("nccl_parser_config"), top=8), top=8)
    assert page.startswith("<!DOCTYPE html>")
    assert page.count("<svg") == 2
    assert 'aria-label="GPU time breakdown"' in page and 'aria-label="Time per marker"' in page
    assert not re.search(r"(src|href)=|https?://|@import", page)  # nothing loaded from outside


def test_names_are_escaped(tmp_path: Path) -> None:
    path = TraceBuilder().marker("<script>alert(1)</script>", 0, 10).write(tmp_path / "t.json")
    page = render_html(summarize_trace(path))
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert "No GPU events in this trace." in page
