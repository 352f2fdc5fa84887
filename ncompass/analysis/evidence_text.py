"""A finding's evidence in words with units: ``marker CPU total 135.57 ms``, not
``marker_cpu_total_us=135566.4``.

The JSON keeps the raw numbers (stable keys, microseconds); the reports read them out: a key
ending in ``_us`` is a duration, one naming a share or fraction a percentage, ``bytes`` a size,
and the key itself becomes words (``us`` and ``cpu``/``gpu`` spelled as readers write them).
"""

from __future__ import annotations

from collections.abc import Mapping

from ncompass._format import format_duration

# Keys whose value is a share of something (0.25 -> 25.0%).
_SHARE_WORDS = ("share", "fraction", "unexplained")
_UPPER = {"cpu": "CPU", "gpu": "GPU", "us": "", "sync": "sync"}


def evidence_sentence(evidence: Mapping[str, object]) -> str:
    """The evidence as one line: ``marker CPU total 344.39 ms; share 93.9%; calls 20``."""
    return "; ".join(
        f"{_words(key)} {_value(key, value)}"
        for key, value in evidence.items()
        if not (key.startswith("gpu_") and value == 0)  # no GPU work: nothing to say of it
    )


def _words(key: str) -> str:
    words = [_UPPER.get(word, word) for word in key.split("_")]
    return " ".join(word for word in words if word)


def _value(key: str, value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if key.endswith("_us") or "_us_" in key:
        return format_duration(float(value))
    if any(word in key for word in _SHARE_WORDS):
        return f"{value:.1%}"
    if key == "bytes" or key.endswith("_bytes"):
        return _size(float(value))
    if isinstance(value, float) and not value.is_integer():
        return f"{value:.3g}"
    return str(int(value))


def _size(value: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"  # unreachable: the loop returns at GiB
