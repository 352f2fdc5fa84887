"""Event names made printable: a lone UTF-16 surrogate becomes U+FFFD (the replacement mark).

JSON may spell a lone surrogate (``"a\\ud800b"``) and Python decodes it into a string that no
UTF-8 writer accepts: the terminal, ``--json`` (orjson), an HTML file and the service's response
all refuse it. Reports name events, they do not copy them, so the analysis replaces each lone
surrogate in the names of a linked trace once, right after reading; the trace file itself is
untouched (``filter`` and ``merge`` copy such names exactly, as JSON escapes).
"""

from __future__ import annotations

import re
from pathlib import Path

from ncompass.traces.link import LinkedTrace, OperatorTotals, link_trace

# A pair is decoded into one code point, so a surrogate left in a str is always a lone one.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
REPLACEMENT = "\ufffd"


def printable(name: str) -> str:
    """``name`` with every lone surrogate replaced by U+FFFD."""
    return _LONE_SURROGATE.sub(REPLACEMENT, name)


def make_names_printable(trace: LinkedTrace) -> LinkedTrace:
    """Replace lone surrogates in every name of ``trace`` (in place) and return it.

    Costs one regular-expression scan of the interned names, of each marker name and of the
    operator names; nothing more when none holds a surrogate (the usual case).
    """
    names = trace.names
    for index, name in enumerate(names):
        if _LONE_SURROGATE.search(name):
            names[index] = printable(name)
    fixed: dict[str, str] = {}
    for marker in trace.markers:
        name = marker.name
        clean = fixed.get(name)
        if clean is None:
            clean = fixed[name] = printable(name)
        if clean != name:
            marker.name = clean
    for totals in (trace.cpu_operators, trace.compile_phases):
        for name in [name for name in totals if _LONE_SURROGATE.search(name)]:
            _merge_into(totals, printable(name), totals.pop(name))
    for key, name in list(trace.thread_names.items()):
        if _LONE_SURROGATE.search(name):
            trace.thread_names[key] = printable(name)
    return trace


def _merge_into(totals: dict[str, OperatorTotals], name: str, more: OperatorTotals) -> None:
    """Add ``more`` under ``name``: two names may differ only in their lone surrogates."""
    known = totals.get(name)
    if known is None:
        totals[name] = more
        return
    known.calls += more.calls
    known.total_us += more.total_us
    known.max_us = max(known.max_us, more.max_us)
    known.durations.extend(more.durations)


def read_printable(
    path: str | Path, *, progress: bool | None = None, jobs: int | None = 1
) -> LinkedTrace:
    """:func:`~ncompass.traces.link.link_trace` with its names made printable (see above)."""
    return make_names_printable(link_trace(path, progress=progress, jobs=jobs))
