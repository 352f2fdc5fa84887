"""Where the time went: breakdowns, bottleneck rules, recommendations and summaries."""
