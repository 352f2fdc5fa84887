"""``ncompass run --nsys``: the run under ``nsys profile``, its report converted to a Chrome trace.

The run is executed again as a child of ``nsys profile`` (see :mod:`ncompass.capture.child_run`)
with CUDA, NVTX and OS-runtime tracing; markers are NVTX ranges. Next to the trace the user gets
the report itself (``NAME.nsys-rep``, for the Nsight Systems GUI), and the trace has every NVTX
range linked to the kernels it launched (:mod:`ncompass.traces.nsys`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ncompass.errors import CaptureError

if TYPE_CHECKING:
    from ncompass.capture.sidecar import SidecarExtras

DEFAULT_TRACE = "cuda,nvtx,osrt"
"""What ``nsys profile --trace`` records unless ``--nsys-args`` chooses."""

# nsys options ncompass sets itself; the user may not (output) or may replace (the others).
_OUTPUT_OPTIONS = ("-o", "--output")
_TRACE_OPTIONS = ("-t", "--trace")
_OVERWRITE_OPTIONS = ("-f", "--force-overwrite")


@dataclass
class NsysCapture:
    """The parent's side of an ``--nsys`` run.

    Attributes:
        nsys: The ``nsys`` executable.
        report: The report ``nsys profile`` writes (``NAME.nsys-rep`` beside the trace).
        extra_args: The user's ``--nsys-args``, passed to ``nsys profile``.
    """

    nsys: str
    report: Path
    extra_args: list[str] = field(default_factory=list)
    name: str = "nsys"

    @classmethod
    def create(cls, trace_path: Path, extra_args: list[str]) -> NsysCapture:
        """Find ``nsys``; the report is named after the trace.

        Raises:
            CaptureError: ``nsys`` is not installed (the message says how to get it, and the
                alternative without it), or ``extra_args`` sets the output.
        """
        from ncompass.traces.nsys import INSTALL_HINT, find_nsys

        nsys = find_nsys()
        if nsys is None:
            raise CaptureError(
                f"--nsys needs Nsight Systems' `nsys` command: {INSTALL_HINT}. Without it, "
                "`--profiler nvtx-trace` records the NVTX ranges (no CUDA activity) with "
                "ncompass' own recorder"
            )
        if any(_is_option(argument, _OUTPUT_OPTIONS) for argument in extra_args):
            raise CaptureError(
                "--nsys-args cannot set nsys' --output: the report is named after the trace "
                "(use --output-dir and --trace-name)"
            )
        return cls(nsys, trace_path.with_suffix(".nsys-rep"), list(extra_args))

    def command(self, child: list[str]) -> list[str]:
        """``nsys profile [ncompass' options] [the user's] CHILD...``."""
        options = [f"--output={self.report.with_suffix('')}"]
        if not any(_is_option(argument, _TRACE_OPTIONS) for argument in self.extra_args):
            options.append(f"--trace={DEFAULT_TRACE}")
        if not any(_is_option(argument, _OVERWRITE_OPTIONS) for argument in self.extra_args):
            options.append("--force-overwrite=true")
        return [self.nsys, "profile", *options, *self.extra_args, *child]

    def environment(self) -> dict[str, str]:
        """Nothing: ``nsys`` attaches its own NVTX injection library."""
        return {}

    def write_trace(self, trace_path: Path) -> str:
        """Convert the report into the trace; returns a line saying what it holds.

        Raises:
            CaptureError: ``nsys`` wrote no report.
            TraceError: The report cannot be exported or read.
        """
        from ncompass.traces.nsys import convert_report

        if not self.report.is_file():
            raise CaptureError(f"nsys wrote no report at {self.report}; see its messages above")
        result = convert_report(self.report, trace_path, nsys=self.nsys)
        return f"Nsight Systems report {self.report}: {result.describe()}"

    def sidecar_extras(self) -> SidecarExtras:
        """The report and how nsys was run."""
        return {"nsys": {"report": self.report.name, "args": self.extra_args}}


def _is_option(argument: str, names: tuple[str, ...]) -> bool:
    return any(argument == name or argument.startswith(f"{name}=") for name in names)


__all__ = ["DEFAULT_TRACE", "NsysCapture"]
