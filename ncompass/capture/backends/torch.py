"""``--profiler torch``: the PyTorch profiler, writing a Chrome/Perfetto trace.

At most one torch profiler records in a process. While one is active, ``capture_trace`` calls
inside it add *windows*: after the trace is written, each window's slice of it is written to a
trace file of its own. Inductor kernels compiled while it records have their events annotated
with the markers their source lines are in (``ncompass.capture.kernel_markers``). When the
profiled code starts a torch profiler of its own, ``room_for_code_profiler`` makes this one
step aside.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from ncompass.capture.backends.backend import ProfilerBackend
from ncompass.capture.compiled_kernels import (
    CompiledKernel,
    KernelOriginRecorder,
    compiled_in_process,
    merge_kernels,
    provenance_note,
    start_recording,
)
from ncompass.capture.kineto_log import quiet_kineto_log
from ncompass.capture.trace_files import write_trace
from ncompass.errors import CaptureError, ProfilerTakenOverError, TraceError


@dataclass(frozen=True)
class TraceWindow:
    """A slice of the active trace to write on its own: the span of the range named ``marker``."""

    marker: str
    title: str
    output_path: Path


class TorchProfiler(ProfilerBackend):
    """One Kineto profiler session (what ``torch.profiler.profile`` runs) that writes one Chrome
    trace.

    Args:
        output_path: Where the trace goes (``.json``; ``.json.gz`` is compressed).
        record_shapes: Record input shapes of ops.
        profile_memory: Record allocations.
        with_stack: Record Python stacks of ops.

    Attributes:
        compiled_kernels: Once stopped, the Inductor kernels compiled while recording and the
            source lines each came from; their events in the trace name their markers.
    """

    name = "torch"
    marker_context = "torch"

    _active: ClassVar[TorchProfiler | None] = None
    _lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(
        self,
        output_path: Path,
        *,
        record_shapes: bool = False,
        profile_memory: bool = False,
        with_stack: bool = False,
    ) -> None:
        self.output_path = output_path
        self.record_shapes = record_shapes
        self.profile_memory = profile_memory
        self.with_stack = with_stack
        self.windows: list[TraceWindow] = []
        self.compiled_kernels: list[CompiledKernel] = []
        self._profile: Any = None
        self._kernel_origins: KernelOriginRecorder | None = None

    @classmethod
    def active(cls) -> TorchProfiler | None:
        """The torch profiler recording in this process, if one is."""
        return cls._active

    def start(self) -> None:
        """Start recording (CPU, and CUDA when a device is present).

        Raises:
            CaptureError: torch is not installed, or another torch profiler is recording.
        """
        if self._profile is None:  # not prepared by a window: start up now
            self.prepare()
        import torch

        with self._lock:
            if TorchProfiler._active is not None or torch._C._autograd._profiler_enabled():
                raise CaptureError("a torch profiler is already recording in this process")
            with quiet_kineto_log():
                self._profile._start_trace()
            _add_trace_metadata(torch, self)
            TorchProfiler._active = self
        self._kernel_origins = start_recording()

    def prepare(self) -> None:
        """Start the profiler up without recording; :meth:`start` then only begins recording.

        A recording window prepares before it opens, so the window's first call is measured
        like the others. This uses Kineto through ``torch.autograd.profiler.profile``, for the
        whole run too: ``torch.profiler.profile`` starts by asking ``hasattr(torch,
        "_inductor")``, which imports Inductor, Dynamo, sympy and Triton (about 170 MB and a
        second or more, in every followed process that imports torch) in a program that may
        never compile anything. What it adds to the trace is added by :meth:`start`.

        Raises:
            CaptureError: torch is not installed, or another torch profiler is recording
                (preparing would reset it).
        """
        try:
            import torch
            from torch.autograd.profiler import profile
        except ImportError:
            raise CaptureError(
                "--profiler torch needs PyTorch: pip install torch (or use --profiler nvtx/none)"
            ) from None
        if TorchProfiler._active is not None or torch._C._autograd._profiler_enabled():
            raise CaptureError("a torch profiler is already recording in this process")
        self._profile = profile(
            use_kineto=True,
            use_device="cuda" if torch.cuda.is_available() else None,
            record_shapes=self.record_shapes,
            profile_memory=self.profile_memory,
            with_stack=self.with_stack,
        )
        with quiet_kineto_log():
            self._profile._prepare_trace()

    def add_window(self, title: str, output_path: Path) -> str:
        """Register a window; returns the unique range name to record around it."""
        marker = f"ncompass.window#{len(self.windows) + 1}:{title}"
        self.windows.append(TraceWindow(marker, title, output_path))
        return marker

    def add_metadata(self, key: str, value: object) -> None:
        """Write ``key: value`` (JSON) at the top level of the trace; call while recording."""
        if self._profile is not None:
            import torch

            torch.autograd._add_metadata_json(key, json.dumps(value))

    def stop_and_discard(self) -> None:
        """Stop recording without writing anything (another profiler takes over)."""
        profile, self._profile = self._profile, None
        with self._lock:
            TorchProfiler._active = None
        self._stop_recording_kernels()
        if profile is not None:
            with quiet_kineto_log():
                profile.__exit__(None, None, None)

    @contextmanager
    def room_for_code_profiler(self, before_stepping_aside: Callable[[], object]) -> Iterator[None]:
        """Room, inside the block, for the profiled code's own torch profiler.

        Kineto allows one profiler, so when the code starts its own, this one stops first and
        discards what it recorded. ``before_stepping_aside`` runs just before: it must close
        every range opened under this profiler, since a range ended under another profiler
        session crashes Kineto.
        """
        import torch.profiler.profiler as torch_profiler

        original = torch_profiler._KinetoProfile.prepare_trace
        stepped_aside = False

        def prepare(profile: Any) -> Any:
            nonlocal stepped_aside
            if not stepped_aside and self.active() is self and profile is not self._profile:
                stepped_aside = True
                before_stepping_aside()
                self.stop_and_discard()
            return original(profile)

        torch_profiler._KinetoProfile.prepare_trace = prepare  # type: ignore[method-assign]
        try:
            yield
        finally:
            torch_profiler._KinetoProfile.prepare_trace = original  # type: ignore[method-assign]

    def stop(self) -> Path:
        """Stop recording and write the trace (and the windows' traces).

        Raises:
            CaptureError: the trace cannot be written.
        """
        profile, self._profile = self._profile, None
        with self._lock:
            TorchProfiler._active = None
        self._stop_recording_kernels()
        if profile is None:
            raise CaptureError("the torch profiler was not started")
        import torch

        if not torch._C._autograd._profiler_enabled():
            # Another profiler started (and stopped) in between and took Kineto's one session
            # with it; exporting now would read freed state and crash the process.
            raise ProfilerTakenOverError(
                "the profiled code ran a torch profiler of its own, which ended ncompass's; "
                "no ncompass trace was written (use the code's own trace)"
            )
        with quiet_kineto_log():
            profile.__exit__(None, None, None)
        write_trace(self.output_path, profile.export_chrome_trace)
        self._annotate_compiled_kernels()
        if self.windows:
            from ncompass.capture.windows import write_windows

            write_windows(self.output_path, self.windows)
        return self.output_path

    def _stop_recording_kernels(self) -> None:
        recorder, self._kernel_origins = self._kernel_origins, None
        if recorder is not None:
            self.compiled_kernels = merge_kernels(recorder.stop())

    def _annotate_compiled_kernels(self) -> None:
        """Name, in each compiled kernel's events, the markers its source lines are in."""
        note = provenance_note()
        if note is not None:  # this torch compiled code but cannot say where kernels came from
            warnings.warn(note, stacklevel=3)
        if not self.compiled_kernels and not compiled_in_process():
            return
        from ncompass.capture.kernel_markers import annotate_kernel_events, attribute_kernels
        from ncompass.importer.registry import REGISTRY

        attribution = attribute_kernels(self.compiled_kernels, REGISTRY.manifest())
        try:
            annotate_kernel_events(self.output_path, attribution)
        except TraceError as error:  # the trace itself is written: keep it as it is
            warnings.warn(
                f"compiled kernels are not attributed to their markers: {error}", stacklevel=3
            )
            return
        if attribution.unrecorded and note is None:
            warnings.warn(
                f"{len(attribution.unrecorded)} compiled kernels in {self.output_path} were "
                "compiled before the profiler started, so their events name no markers; "
                "profile their first call too (or the whole program, with `ncompass run`)",
                stacklevel=3,
            )


def _add_trace_metadata(torch: Any, profiler: TorchProfiler) -> None:
    """The trace metadata ``torch.profiler.profile`` adds when it starts: the options recorded,
    the rank (rank merging reads it), and its CUDA-graph workaround."""
    for option in ("profile_memory", "with_stack", "record_shapes"):
        if getattr(profiler, option):
            torch.autograd._add_metadata_json(option, "1")
    distributed = sys.modules.get("torch.distributed")
    if distributed is not None and distributed.is_available() and distributed.is_initialized():
        from torch.profiler.profiler import _KinetoProfile

        info = _KinetoProfile._get_distributed_info(None)  # type: ignore[arg-type]  # no self used
        if info:
            torch.autograd._add_metadata_json("distributedInfo", json.dumps(info, default=str))
    if _inductor_uses_cuda_graphs() and torch.cuda.is_available():
        # torch.profiler.profile's workaround: CUPTI's teardown crashes after CUDA graphs ran
        # (asked only of an Inductor already imported: importing it costs what prepare avoids)
        os.environ["DISABLE_CUPTI_LAZY_REINIT"] = "1"
        os.environ["TEARDOWN_CUPTI"] = "0"
        torch.autograd._add_metadata_json("DISABLE_CUPTI_LAZY_REINIT", "1")


def _inductor_uses_cuda_graphs() -> bool:
    config = sys.modules.get("torch._inductor.config")
    return bool(config is not None and getattr(config.triton, "cudagraphs", False))


__all__ = ["TorchProfiler", "TraceWindow"]
