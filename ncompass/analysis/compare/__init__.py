"""Did it get faster? Compare traces before and after a change, and gate on slowdowns."""

from ncompass.analysis.compare.comparison import compare, compare_samples
from ncompass.analysis.compare.gate import GateResult, check_slowdown, parse_threshold
from ncompass.analysis.compare.interval import RatioInterval
from ncompass.analysis.compare.kernel_names import normalize_kernel_name, short_kernel_name
from ncompass.analysis.compare.result import Change, Comparison, SideTimes

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
