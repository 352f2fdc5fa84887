"""Summaries cached by trace content, so asking twice about one trace costs nothing."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any, cast

import orjson

from ncompass._files import sha256_file, write_atomic
from ncompass._version import __version__
from ncompass.analysis.summary_types import Summary


class SummaryCache:
    """Summaries stored in ``folder`` by (trace content, feedback context, provider, version)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder / "summaries"

    def key(self, trace: Path, feedback_context: dict[str, Any] | None, provider: str) -> str:
        """The cache key of a summary request."""
        context = json.dumps(feedback_context or {}, sort_keys=True, default=str)
        parts = f"{sha256_file(trace)}|{context}|{provider}|{__version__}"
        return hashlib.sha256(parts.encode()).hexdigest()[:32]

    def path(self, key: str) -> Path:
        """The file of a cache entry."""
        return self.folder / f"{key}.json"

    def get(self, key: str, *, fallback_ok: bool = False) -> Summary | None:
        """The cached summary, or None.

        A corrupt entry counts as missing and is removed; a fallback entry (the provider could
        not answer and another one did) counts as missing so the next request asks again,
        unless ``fallback_ok``.
        """
        path = self.path(key)
        try:
            entry = orjson.loads(path.read_bytes())
            summary = entry["summary"]
            if not isinstance(summary, dict) or "markdown" not in summary:
                raise ValueError("not a summary")
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError, orjson.JSONDecodeError):
            path.unlink(missing_ok=True)
            return None
        if entry.get("fallback") and not fallback_ok:
            return None
        return cast(Summary, summary)  # a summary this cache stored

    def put(self, key: str, trace: Path, summary: Summary, *, fallback: str | None = None) -> Path:
        """Store a summary; returns the entry's file.

        ``fallback`` is why the provider asked fell back to another one: :meth:`find` still
        returns such an entry, :meth:`get` does not serve it.
        """
        entry = {
            "trace": trace.name,
            "trace_path": str(trace),
            "created": time.time(),
            "summary": summary,
            "fallback": fallback,
        }
        path = self.path(key)
        write_atomic(path, orjson.dumps(entry))
        return path

    def find(self, trace_name_filter: str | None = None) -> Summary | None:
        """The newest cached summary whose trace name contains ``trace_name_filter``."""
        if not self.folder.is_dir():
            return None
        best: tuple[float, Summary] | None = None
        for path in self.folder.glob("*.json"):
            try:
                entry = orjson.loads(path.read_bytes())
            except (OSError, orjson.JSONDecodeError):
                continue
            name = str(entry.get("trace", ""))
            if trace_name_filter and trace_name_filter not in name:
                continue
            created = float(entry.get("created", 0.0))
            if best is None or created > best[0]:
                best = (created, entry["summary"])
        return best[1] if best else None


__all__ = ["SummaryCache"]
