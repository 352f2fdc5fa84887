"""Where the time went: breakdowns, bottleneck rules, recommendations and summaries."""

from ncompass.analysis.breakdown import Breakdown, RankBreakdown, breakdown
from ncompass.analysis.html_page import render_html
from ncompass.analysis.markers import MarkerStats, marker_stats
from ncompass.analysis.rules import Bottleneck
from ncompass.analysis.summary import summarize_trace

__all__ = [
    "Bottleneck",
    "Breakdown",
    "MarkerStats",
    "RankBreakdown",
    "breakdown",
    "marker_stats",
    "render_html",
    "summarize_trace",
]
