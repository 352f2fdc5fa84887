"""Build a large Kineto trace reproducibly by repeating a real one end to end.

    python benchmarks/traces/make_trace.py SOURCE.json.gz OUT.json.gz --size-mb 54

Copy k of the source's events is shifted by k times the source's time span (plus a 1 ms gap);
correlation ids, flow ids and External ids get fresh, non-overlapping values per copy, and
``ProfilerStep#N`` markers keep counting, so the result is a valid trace of a longer run.
Metadata events (``M``) appear once. The last copy is cut after as many events as reach the
requested uncompressed size.
"""

from __future__ import annotations

import argparse
import gzip
import re
from pathlib import Path
from typing import Any

import orjson

_STEP = re.compile(r"^ProfilerStep#(\d+)$")
_GAP_US = 1000.0


def build(source: Path, output: Path, size_bytes: int, level: int = 6) -> int:
    """Write ``output`` with about ``size_bytes`` of JSON; return the uncompressed size."""
    document = orjson.loads(gzip.decompress(source.read_bytes()))
    events: list[dict[str, Any]] = document.pop("traceEvents")
    timed = [e for e in events if isinstance(e.get("ts"), (int, float)) and e.get("ph") != "M"]
    start = min(e["ts"] for e in timed)
    end = max(e["ts"] + (e.get("dur") or 0) for e in timed)
    period = end - start + _GAP_US
    id_stride = 1 + max(
        [_int(e.get("id")) for e in events]
        + [
            _int((e.get("args") or {}).get(key))
            for e in events
            for key in ("correlation", "External id")
        ]
    )
    steps = [int(m.group(1)) for e in events if (m := _STEP.match(str(e.get("name", ""))))]
    step_stride = (max(steps) - min(steps) + 1) if steps else 0
    header = orjson.dumps(document)[:-1] + b', "traceEvents": [\n'
    written = len(header) + 4
    copy = 0
    with gzip.open(output, "wb", compresslevel=level) as out:
        out.write(header)
        first = True
        while written < size_bytes:
            for event in events:
                if event.get("ph") == "M" and copy:
                    continue
                line = orjson.dumps(_shifted(event, copy, period, id_stride, step_stride))
                out.write(line if first else b",\n" + line)
                first = False
                written += len(line) + 2
                if written >= size_bytes:
                    break
            copy += 1
        out.write(b"\n]}\n")
    return written


def _shifted(
    event: dict[str, Any], copy: int, period: float, id_stride: int, step_stride: int
) -> dict[str, Any]:
    if not copy:
        return event
    event = dict(event)
    if isinstance(event.get("ts"), (int, float)):
        event["ts"] = event["ts"] + copy * period
    if isinstance(event.get("id"), int):
        event["id"] += copy * id_stride
    args = event.get("args")
    if isinstance(args, dict):
        args = dict(args)
        for key in ("correlation", "External id"):
            if isinstance(args.get(key), int):
                args[key] += copy * id_stride
        event["args"] = args
    match = _STEP.match(str(event.get("name", "")))
    if match:
        event["name"] = f"ProfilerStep#{int(match.group(1)) + copy * step_stride}"
    return event


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("source", type=Path)
    parser.add_argument("output", type=Path)
    parser.add_argument("--size-mb", type=float, default=54.0, help="uncompressed size to reach")
    parser.add_argument("--level", type=int, default=6, help="gzip compression level")
    arguments = parser.parse_args()
    size = build(arguments.source, arguments.output, int(arguments.size_mb * 1e6), arguments.level)
    print(f"wrote {arguments.output}: {size / 1e6:.1f} MB of JSON")


if __name__ == "__main__":
    main()
