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
    from ncompass.capture.triggers import RecordingWindowOptions

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
        windows: The run's recording windows: nsys records only them, as cudaProfilerApi
            capture ranges (:mod:`ncompass.capture.nsys_windows`).
        listing: With windows, where the child lists the windows that started a capture.
    """

    nsys: str
    report: Path
    extra_args: list[str] = field(default_factory=list)
    name: str = "nsys"
    windows: RecordingWindowOptions | None = None
    listing: Path | None = None

    @classmethod
    def create(
        cls,
        trace_path: Path,
        extra_args: list[str],
        windows: RecordingWindowOptions | None = None,
        scratch: Path | None = None,
    ) -> NsysCapture:
        """Find ``nsys``; the report is named after the trace.

        Raises:
            CaptureError: ``nsys`` is not installed (the message says how to get it, and the
                alternative without it), ``extra_args`` sets the output, or a capture range
                with windows.
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
        if windows is not None:
            from ncompass.capture.nsys_windows import sets_capture_range

            if sets_capture_range(extra_args):
                raise CaptureError(
                    "--nsys-args cannot choose a capture range with recording windows: the "
                    "windows are nsys' capture ranges (leave out --capture-range)"
                )
        listing = (scratch or trace_path.parent) / "nsys-windows.txt" if windows else None
        report = trace_path.with_suffix(".nsys-rep")
        return cls(nsys, report, list(extra_args), windows=windows, listing=listing)

    def command(self, child: list[str]) -> list[str]:
        """``nsys profile [ncompass' options] [the user's] CHILD...``."""
        options = [f"--output={self.report.with_suffix('')}"]
        if not any(_is_option(argument, _TRACE_OPTIONS) for argument in self.extra_args):
            options.append(f"--trace={DEFAULT_TRACE}")
        if not any(_is_option(argument, _OVERWRITE_OPTIONS) for argument in self.extra_args):
            options.append("--force-overwrite=true")
        if self.windows is not None:
            from ncompass.capture.nsys_windows import capture_range_options

            options += capture_range_options(self.windows)
        return [self.nsys, "profile", *options, *self.extra_args, *child]

    def environment(self) -> dict[str, str]:
        """With windows, where the child lists them; else nothing (``nsys`` attaches its own
        NVTX injection library)."""
        from ncompass.capture.nsys_windows import WINDOWS_FILE_VARIABLE

        return {WINDOWS_FILE_VARIABLE: str(self.listing)} if self.listing is not None else {}

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

    def write_window_traces(self, trace_path: Path) -> tuple[str, list[Path]]:
        """Convert each window's report into ``<trace>-wN.json`` (the report renamed
        ``<trace>-wN.nsys-rep``); returns a line saying what was captured, and the traces.

        Raises:
            TraceError: A report cannot be exported or read.
        """
        from ncompass.capture.nsys_windows import one_window, pair_reports
        from ncompass.traces.nsys import convert_report

        assert self.windows is not None and self.listing is not None
        pairs, problem = pair_reports(
            self.report, one_window(self.windows), self.listing, trace_path
        )
        written = []
        for pair in pairs:
            convert_report(pair.report, pair.trace, nsys=self.nsys)
            written.append(pair.trace)
        note = f"Nsight Systems: {len(written)} window report(s) converted"
        return (f"{note}; {problem}" if problem else note), written

    def sidecar_extras(self, trace_path: Path | None = None) -> SidecarExtras:
        """The report and how nsys was run (for a window's trace, its own report)."""
        report = self.report.name
        if trace_path is not None and trace_path.name.endswith(".json"):
            report = trace_path.name[: -len(".json")] + ".nsys-rep"
        return {"nsys": {"report": report, "args": self.extra_args}}


def _is_option(argument: str, names: tuple[str, ...]) -> bool:
    return any(argument == name or argument.startswith(f"{name}=") for name in names)


__all__ = ["DEFAULT_TRACE", "NsysCapture"]
