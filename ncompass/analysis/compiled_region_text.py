"""The summary's lines on the ``torch.compile``d regions: their time and what no marker holds."""

from __future__ import annotations

from ncompass._format import format_duration
from ncompass.analysis.summary_types import CompiledRegionRow


def compiled_region_lines(row: CompiledRegionRow | None, *, heading: bool) -> list[str]:
    """One paragraph (and a blank line), or nothing without compiled regions.

    Args:
        row: The summary's ``compiled_code``.
        heading: Start a ``## Compiled code`` section (none was started for the markers).
    """
    if row is None or row["total_us"] <= 0:
        return []
    total = row["total_us"]
    plural = "" if row["regions"] == 1 else "s"
    clock = "GPU time launched from them" if row["source"] == "gpu" else "CPU time"
    text = (
        f"Compiled regions: {row['regions']} call{plural}, {format_duration(total)} "
        f"({clock}); the markers' Inductor kernels hold {format_duration(row['credited_us'])} "
        f"({row['credited_us'] / total:.1%}), no marker is credited with "
        f"{format_duration(row['uncredited_us'])} ({row['uncredited_us'] / total:.1%})"
    )
    named = ", ".join(
        f"`{item['name']}` {format_duration(item['total_us'])}" for item in row["uncredited"]
    )
    if named:
        text += f": {named}"
    text += (
        ". Extern kernels Inductor calls into ATen (mm, addmm, convolution) do not trace back "
        "to a source line"
        + (
            ", and the compiled wrapper's own time counts here too."
            if row["source"] == "cpu"
            else "."
        )
    )
    return [*(["## Compiled code", ""] if heading else []), text, ""]


__all__ = ["compiled_region_lines"]
