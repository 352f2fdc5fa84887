"""Marker sites of a run's manifest and the trace ranges that are theirs."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ncompass.importer import FULL_TRACE_MARKER
from ncompass.runtime.names import template_pieces, trace_safe_name
from ncompass.session.history import IterationRecord


def hot_sites(record: IterationRecord) -> list[tuple[Mapping[str, Any], float]]:
    """Marker sites of the manifest with the self time of every trace marker that is theirs."""
    by_site: dict[int, float] = {}
    # manifest records, and one pseudo-site for the whole-run range
    sites: dict[int, Mapping[str, Any]] = {}
    patterns = [(i, name_pattern(site)) for i, site in enumerate(record.manifest)]
    for name, time in record.markers.items():
        if name == FULL_TRACE_MARKER:
            sites[-1] = {"name": FULL_TRACE_MARKER, "kind": "full_trace"}
            by_site[-1] = by_site.get(-1, 0.0) + time.cpu_self_us
            continue
        for position, pattern in patterns:
            if pattern.fullmatch(name):
                sites[position] = record.manifest[position]
                by_site[position] = by_site.get(position, 0.0) + time.cpu_self_us
                break
    ranked = sorted(by_site.items(), key=lambda item: -item[1])
    return [(sites[position], self_us) for position, self_us in ranked]


def name_pattern(site: Mapping[str, Any]) -> re.Pattern[str]:
    """Matches the names a site's ranges have in a trace (cleaned like the recorder cleans them)."""
    name = trace_safe_name(str(site.get("name", "")))
    if not site.get("dynamic"):
        return re.compile(re.escape(name))
    return re.compile(
        "".join(".*?" if is_field else re.escape(text) for text, is_field in template_pieces(name))
    )


__all__ = ["FULL_TRACE_MARKER", "hot_sites", "name_pattern"]
