"""Where the time went: breakdowns, bottleneck rules, recommendations and summaries."""

from ncompass.analysis.breakdown import Breakdown, RankBreakdown, breakdown
from ncompass.analysis.comparison import Change, Comparison, check_slowdown, compare
from ncompass.analysis.html_page import render_html
from ncompass.analysis.markers import MarkerStats, marker_stats
from ncompass.analysis.rules import Bottleneck
from ncompass.analysis.summary import summarize_trace
from ncompass.analysis.summary_types import (
    BottleneckRow,
    BreakdownRow,
    MarkerRow,
    Operation,
    StructuredSummary,
    Summary,
    TraceInfo,
)

__all__ = [
    "Bottleneck",
    "BottleneckRow",
    "Breakdown",
    "BreakdownRow",
    "Change",
    "Comparison",
    "MarkerRow",
    "MarkerStats",
    "Operation",
    "RankBreakdown",
    "StructuredSummary",
    "Summary",
    "TraceInfo",
    "breakdown",
    "check_slowdown",
    "compare",
    "marker_stats",
    "render_html",
    "summarize_trace",
]
