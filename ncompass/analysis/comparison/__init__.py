"""Did it get faster? Compare traces before and after a change, and gate on slowdowns."""

from ncompass.analysis.comparison.gate import GateResult, check_slowdown, parse_threshold
from ncompass.analysis.comparison.interval import RatioInterval
from ncompass.analysis.comparison.kernel_names import normalize_kernel_name, short_kernel_name
from ncompass.analysis.comparison.matching import compare, compare_samples
from ncompass.analysis.comparison.result import Change, Comparison, SideTimes

__all__ = [
    "Change",
    "Comparison",
    "GateResult",
    "RatioInterval",
    "SideTimes",
    "check_slowdown",
    "compare",
    "compare_samples",
    "normalize_kernel_name",
    "parse_threshold",
    "short_kernel_name",
]
