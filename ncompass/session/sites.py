"""Marker sites of a run's manifest and the trace ranges that are theirs."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from ncompass.importer import FULL_TRACE_MARKER
from ncompass.importer.registry import MarkerRecord
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


def sites_ran(
    manifest: list[MarkerRecord], sampled: Mapping[tuple[str, int], float]
) -> dict[str, list[int]]:
    """Per marker name placed at several sites, the lines of the site with the most sampled
    time (``sampled``: time per (real file, line), callees included); names no sample tells
    apart are left out."""
    by_name: dict[str, list[MarkerRecord]] = {}
    for site in manifest:
        if site.get("kind") in ("range", "call"):
            by_name.setdefault(str(site.get("name")), []).append(site)
    chosen: dict[str, list[int]] = {}
    for name, sites in by_name.items():
        if len(sites) < 2:
            continue
        weights = [_sampled_time(site, sampled) for site in sites]
        best = max(range(len(sites)), key=lambda i: weights[i])
        if weights[best] > 0:
            chosen[name] = [int(sites[best]["start_line"]), int(sites[best]["end_line"])]
    return chosen


def site_of(sites: list[MarkerRecord], name: str, record: IterationRecord) -> MarkerRecord | None:
    """Of the sites named ``name``, the one that ran (see :func:`sites_ran`), else the first."""
    if not sites:
        return None
    lines = record.sites_ran.get(name)
    if lines is not None:
        for site in sites:
            if [site.get("start_line"), site.get("end_line")] == lines:
                return site
    return sites[0]


def _sampled_time(site: MarkerRecord, sampled: Mapping[tuple[str, int], float]) -> float:
    file = site.get("file")
    if not file:
        return 0.0
    real = os.path.realpath(file)
    start, end = int(site.get("start_line", 0)), int(site.get("end_line", 0))
    return sum(sampled.get((real, line), 0.0) for line in range(start, end + 1))


def name_pattern(site: Mapping[str, Any]) -> re.Pattern[str]:
    """Matches the names a site's ranges have in a trace (cleaned like the recorder cleans them)."""
    name = trace_safe_name(str(site.get("name", "")))
    if not site.get("dynamic"):
        return re.compile(re.escape(name))
    return re.compile(
        "".join(".*?" if is_field else re.escape(text) for text, is_field in template_pieces(name))
    )


__all__ = ["FULL_TRACE_MARKER", "hot_sites", "name_pattern", "site_of", "sites_ran"]
