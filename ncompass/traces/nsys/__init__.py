"""Nsight Systems reports → Chrome/Perfetto traces, with NVTX ranges linked to their kernels.

``convert_report("run.nsys-rep", "run.json.gz")`` reads a report (through ``nsys export --type
sqlite``) or an already exported ``.sqlite`` and writes a trace that ``ncompass summarize``,
``breakdown`` and ``filter`` read like a PyTorch profiler trace. See ``docs/nsight.md``.
"""

from ncompass.traces.nsys.convert import REPORT_SUFFIX, ConversionResult, convert_report
from ncompass.traces.nsys.converter import ConversionStats
from ncompass.traces.nsys.export import INSTALL_HINT, NSYS_ENV, export_sqlite, find_nsys

__all__ = [
    "INSTALL_HINT",
    "NSYS_ENV",
    "REPORT_SUFFIX",
    "ConversionResult",
    "ConversionStats",
    "convert_report",
    "export_sqlite",
    "find_nsys",
]
