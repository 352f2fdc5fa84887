"""Whether a marker's time is its typical call's or a few outlier calls'.

A share of the run says where the time went, not why: 61 % of the run in one marker means
"drill into it" when every call is slow, and "look at that one call" when one 102 ms call among
calls of 1.6 ms carries it (a warm-up, a first-call compilation, the machine taking the CPU).
A finding built on a share therefore says how the calls are spread: their count, median and
longest, and how many of the longest calls carry half of the time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ncompass._format import format_duration
from ncompass.analysis.distribution import Distribution

# Calls a marker needs before "a few calls carry it" can be said at all.
MIN_CALLS = 5
# At most this share of the calls (and at least one) carrying half of the time is "a few".
FEW_CALLS_SHARE = 0.1


@dataclass(frozen=True)
class CallSpread:
    """How a marker's calls share its time.

    Attributes:
        calls: Number of calls.
        median_us: The median call.
        max_us: The longest call.
        carriers: The fewest longest calls that together hold half of the total or more.
        carried_share: The share of the total those calls hold.
    """

    calls: int
    median_us: float
    max_us: float
    carriers: int
    carried_share: float

    @property
    def few_carry_it(self) -> bool:
        """Whether a few outlier calls, not the typical call, carry the time."""
        few = max(1, int(self.calls * FEW_CALLS_SHARE))
        return self.calls >= MIN_CALLS and self.carriers <= few and self.max_us > 3 * self.median_us

    def sentence(self) -> str:
        """The spread in words: ``40 calls, median 1.6 ms, longest 102 ms``."""
        return (
            f"{self.calls} calls, median {format_duration(self.median_us)}, longest "
            f"{format_duration(self.max_us)}"
        )

    def carriers_sentence(self) -> str:
        """Who carries the time: ``1 of its 40 calls holds 64% of it (the longest 102 ms, ...)``."""
        hold = "holds" if self.carriers == 1 else "hold"
        return (
            f"{self.carriers} of its {self.calls} calls {hold} {self.carried_share:.0%} of it "
            f"(the longest {format_duration(self.max_us)}, the median call "
            f"{format_duration(self.median_us)})"
        )


def call_spread(durations: Sequence[float]) -> CallSpread | None:
    """The spread of one marker's calls (None without calls or time)."""
    total = sum(durations)
    if not durations or total <= 0:
        return None
    ordered = sorted(durations, reverse=True)
    held = 0.0
    carriers = 0
    for duration in ordered:
        held += duration
        carriers += 1
        if held >= total / 2:
            break
    stats = Distribution.of(durations)
    return CallSpread(
        calls=len(durations),
        median_us=stats.median,
        max_us=stats.max,
        carriers=carriers,
        carried_share=held / total,
    )
