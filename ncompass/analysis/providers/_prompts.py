"""What the LLM provider tells the model: a compact digest of the numbers, and the rules."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from ncompass.analysis.providers.base import MarkerRequest

DIGEST_TOP = 12
SOURCE_BUDGET_CHARS = 40_000
_WHOLE_FILE_LINES = 400
_WINDOW_MARGIN = 25
_MARKER_KEYS = (
    "name",
    "calls",
    "cpu_total_us",
    "cpu_self_us",
    "gpu_total_us",
    "share_of_cpu_time",
    "share_of_gpu_time",
)
_GPU_KEYS = (
    "kernel_span_us",
    "idle_us",
    "compute_us",
    "non_compute_us",
    "computation_us",
    "communication_us",
    "memory_us",
)

NARRATIVE_SYSTEM = """\
You are a performance engineer reading the summary of a PyTorch profiler trace. The summary \
was computed by a deterministic engine and is given as JSON. Write a short narrative in \
markdown (3 to 8 sentences, no headings, no tables) that explains where the time goes and what \
to look at next; when the user asked a question, answer it first.

Rules, which are checked; an answer that breaks one is thrown away:
1. Every number you write must be copied from the data. Durations are in microseconds (keys \
ending in _us); you may write them in µs, ms or s. Fractions (keys with share or fraction) may \
be written as percentages. Do not compute new numbers (no sums, differences or ratios).
2. Write every marker, kernel and operator name in backticks, exactly as in the data. Do not \
put anything else in backticks. Do not mention names that are not in the data.

Answer with one JSON object: {"narrative": "<the markdown text>"}"""

MARKERS_SYSTEM = """\
You choose the next profiling markers for an iterative profiling session. You are given the \
current target spec, the hottest markers with their times, where each marker is in the source \
(module, qualname, start_line, end_line), the user's question if any, and source excerpts with \
line numbers. Propose markers one level finer inside the slowest code or the code the user asked \
about: runs of whole statements, call sites, or functions it calls.

Answer with one JSON object:
{"targets": [{"module": "<a module shown below>",
              "ranges": [{"in": "<function qualname>", "lines": [<first>, <last>], \
"name": "<short name>"}],
              "calls": [{"in": "<function qualname>", "call": "<callee as written>", \
"name": "<short name>"}],
              "functions": [{"qualname": "<function qualname>", "name": "<short name>"}]}],
 "reason": "<one sentence>"}
Rules: use only the modules and line numbers shown; a range covers whole statements of one \
block; names are plain text (no braces); no "replace", "context" or "values" keys. Answer \
{"targets": []} when nothing finer is worth measuring."""


def summary_digest(structured: Mapping[str, Any], top: int = DIGEST_TOP) -> dict[str, Any]:
    """The numbers a narrative may cite: totals, the GPU breakdown, findings, top rows."""
    trace = structured.get("trace") or {}
    operations = [op for op in structured.get("operations") or [] if isinstance(op, dict)]

    def rows(kind: str, keys: tuple[str, ...]) -> list[dict[str, Any]]:
        chosen = [op for op in operations if op.get("kind") == kind][:top]
        return [{key: op[key] for key in keys if key in op} for op in chosen]

    digest: dict[str, Any] = {
        "trace": {
            key: trace.get(key) for key in ("cpu_wall_us", "gpu_events", "markers", "launches")
        },
        "bottlenecks": [
            {key: finding.get(key) for key in ("rule", "severity", "subject", "title", "evidence")}
            for finding in structured.get("bottlenecks") or []
            if isinstance(finding, dict)
        ],
        "recommendations": structured.get("recommendations") or [],
        "markers": rows("marker", _MARKER_KEYS),
        "kernels": rows("kernel", ("name", "class", "calls", "total_us", "share_of_gpu_time")),
        "cpu_operators": rows("cpu_op", ("name", "calls", "total_us", "share_of_cpu_time")),
    }
    breakdown = structured.get("breakdown") or {}
    span = breakdown.get("kernel_span_us") or 0
    if trace.get("gpu_events") and span:
        gpu = {key: breakdown.get(key) for key in _GPU_KEYS}
        for key in ("idle_us", "compute_us", "non_compute_us"):
            gpu[key.removesuffix("_us") + "_fraction_of_span"] = (gpu[key] or 0) / span
        digest["gpu"] = gpu
    focus = structured.get("focus")
    if focus:
        digest["focus"] = focus
    return digest


def narrative_prompt(digest: dict[str, Any], feedback_context: dict[str, Any] | None) -> str:
    """The user message asking for the narrative."""
    question = (feedback_context or {}).get("feedback_text")
    parts = [f"The user asks: {question}"] if question else []
    parts.append("Summary:\n" + _json(digest))
    return "\n\n".join(parts)


def markers_prompt(request: MarkerRequest, budget: int = SOURCE_BUDGET_CHARS) -> str:
    """The user message asking for the next markers, with source excerpts within ``budget``."""
    operations = request.summary.get("operations") or []
    hottest = [op for op in operations if isinstance(op, dict) and op.get("kind") == "marker"]
    hottest.sort(key=lambda op: -float(op.get("cpu_self_us") or 0))
    parts = []
    if request.feedback:
        parts.append("The user asks:\n" + _json(request.feedback))
    parts.append("Current spec:\n" + _json(request.spec))
    keys = ("name", "calls", "cpu_total_us", "cpu_self_us", "gpu_total_us")
    parts.append(
        "Hottest markers (by self time):\n"
        + _json([{k: op.get(k) for k in keys} for op in hottest[:DIGEST_TOP]])
    )
    places = ("name", "module", "qualname", "start_line", "end_line")
    parts.append(
        "Where the markers are:\n"
        + _json([{k: m.get(k) for k in places if k in m} for m in request.markers])
    )
    hot_names = [str(op.get("name")) for op in hottest[:5]]
    for module, source in request.sources.items():
        excerpt = _excerpt(module, source.get("text", ""), request, hot_names)
        if len(excerpt) > budget:
            excerpt = excerpt[:budget] + "\n... (cut)"
        budget -= len(excerpt)
        parts.append(f"Source of {module} (line numbers on the left):\n{excerpt}")
        if budget <= 0:
            break
    return "\n\n".join(parts)


def _excerpt(module: str, text: str, request: MarkerRequest, hot_names: list[str]) -> str:
    """The whole file when short; otherwise windows around the question and the hot markers."""
    lines = text.splitlines()
    if len(lines) <= _WHOLE_FILE_LINES:
        return _numbered(lines, [(1, len(lines))])
    spans = []
    feedback = request.feedback or {}
    if feedback.get("target_module") == module and feedback.get("start_line"):
        spans.append((int(feedback["start_line"]), int(feedback.get("end_line") or 0)))
    for marker in request.markers:
        if marker.get("module") == module and marker.get("name") in hot_names:
            spans.append((int(marker.get("start_line") or 1), int(marker.get("end_line") or 1)))
    if not spans:
        spans.append((1, _WHOLE_FILE_LINES))
    windows = sorted(
        (max(1, start - _WINDOW_MARGIN), min(len(lines), max(start, end) + _WINDOW_MARGIN))
        for start, end in spans
    )
    return _numbered(lines, windows)


def _numbered(lines: list[str], windows: list[tuple[int, int]]) -> str:
    out: list[str] = []
    shown_until = 0
    for start, end in windows:
        start = max(start, shown_until + 1)
        if start > end:
            continue
        if out:
            out.append("   ...")
        out += [f"{number:5d}| {lines[number - 1]}" for number in range(start, end + 1)]
        shown_until = end
    return "\n".join(out)


def _json(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_INDENT_2, default=str).decode()


__all__ = [
    "MARKERS_SYSTEM",
    "NARRATIVE_SYSTEM",
    "markers_prompt",
    "narrative_prompt",
    "summary_digest",
]
