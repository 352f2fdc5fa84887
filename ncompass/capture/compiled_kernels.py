"""Which source lines each Inductor kernel was generated from, recorded while the program runs.

Inductor keeps, for every kernel it generates, the FX nodes the kernel computes, and each node
keeps the Python stack (file, line) of the code it was traced from. With provenance tracking on
(``torch._inductor.config.trace.provenance_tracking_level``), Inductor logs that map as a
structured-trace artefact (``inductor_provenance_tracking_kernel_stack_traces``) after every
compilation. A handler on PyTorch's structured-trace logger collects it; nothing is patched.

The recorder turns tracking on, with, on CPU, Inductor's per-kernel profiler ranges (without
which C++ kernels never appear in a trace), and turns Inductor's compile caches off (a cached
graph brings back the stacks of whatever code was first compiled into it). When Inductor is not
imported yet this goes through the environment, so a program that never compiles does not pay
for importing it. A PyTorch without these hooks records nothing, and its kernels are then shown
unattributed.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ncompass.capture.sidecar import CompiledKernelSource

PROVENANCE_ARTIFACT = "inductor_provenance_tracking_kernel_stack_traces"
"""Name of the structured-trace artefact that maps kernels to the stacks of their FX nodes."""

_TRACE_LOGGER = "torch.__trace"  # PyTorch's structured-trace logger (``trace_structured``)
_CONFIG_MODULE = "torch._inductor.config"


@dataclass(frozen=True)
class _Setting:
    """A compile setting the recorder needs: set on the config module when it is imported,
    else through the environment variable it reads when it is (``default`` is what the module
    then holds without it)."""

    module: str
    path: str  # attribute path inside the module: "trace.provenance_tracking_level"
    value: Any
    default: Any
    env: str
    env_value: str

    def location(self) -> tuple[Any, str] | None:
        """The object holding the setting and its attribute name, once the module is imported."""
        module = sys.modules.get(self.module)
        if module is None:
            return None
        *sections, name = self.path.split(".")
        owner: Any = module
        for section in sections:
            owner = getattr(owner, section, None)
        return owner, name


_SETTINGS = (
    # Level 2 ("basic") records the kernel stacks without level 1's tracking of graph passes.
    _Setting(_CONFIG_MODULE, "trace.provenance_tracking_level", 2, 0, "INDUCTOR_PROVENANCE", "2"),
    # C++ kernels record a profiler range only with this on; otherwise they are not in traces.
    _Setting(
        _CONFIG_MODULE,
        "cpp.enable_kernel_profile",
        True,
        False,
        "TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE",
        "1",
    ),
    # A graph served from a compile cache brings the stacks of the code first compiled into it,
    # which may be another file or the same file before an edit moved its lines.
    _Setting(_CONFIG_MODULE, "fx_graph_cache", False, True, "TORCHINDUCTOR_FX_GRAPH_CACHE", "0"),
    _Setting(
        "torch._functorch.config",
        "enable_autograd_cache",
        False,
        True,
        "TORCHINDUCTOR_AUTOGRAD_CACHE",
        "0",
    ),
)
_FRAME = re.compile(r'^\s*File "(?P<file>[^"\n]+)", line (?P<line>\d+)', re.MULTILINE)
_HANDLE_SUFFIX = re.compile(r":\d+$")  # provenance keys are "kernel_name:debug_handle"


@dataclass(frozen=True)
class SourceLine:
    """One frame of the stack an FX node was traced from."""

    file: str
    line: int


@dataclass
class CompiledKernel:
    """One kernel Inductor generated and the code it came from.

    Attributes:
        name: The kernel's name as Inductor generated it (``cpp_fused_add_relu_0``,
            ``triton_poi_fused_add_relu_0``).
        graph: The Inductor graph it belongs to, when known: C++ kernels show in traces as
            ``graph_{graph}_{name}``.
        stacks: One stack per FX node the kernel computes, outermost frame first.
    """

    name: str
    graph: int | None
    stacks: list[tuple[SourceLine, ...]] = field(default_factory=list)

    def to_dict(self) -> CompiledKernelSource:
        """JSON-ready dict (recorded in the run's sidecar)."""
        return {
            "name": self.name,
            "graph": self.graph,
            "stacks": [[[frame.file, frame.line] for frame in stack] for stack in self.stacks],
        }


def parse_stack_trace(text: str) -> tuple[SourceLine, ...]:
    """The frames of an FX node's ``stack_trace`` (traceback text), outermost first."""
    return tuple(SourceLine(match["file"], int(match["line"])) for match in _FRAME.finditer(text))


def kernels_from_provenance(payload: str, graph: int | None) -> list[CompiledKernel]:
    """The kernels of one provenance artefact (``{"name:handle": [stack trace, ...]}``)."""
    try:
        mapping = json.loads(payload)
    except ValueError:
        return []
    if not isinstance(mapping, dict):
        return []
    kernels: list[CompiledKernel] = []
    for key, traces in mapping.items():
        if not isinstance(traces, list):
            continue
        stacks = [parse_stack_trace(text) for text in traces if isinstance(text, str)]
        stacks = [stack for stack in stacks if stack]
        if stacks:
            kernels.append(CompiledKernel(_HANDLE_SUFFIX.sub("", str(key)), graph, stacks))
    return kernels


class KernelOriginRecorder(logging.Handler):
    """Collect the kernel → source-stacks map of every Inductor compilation while installed.

    Use :func:`start_recording` and :meth:`stop`.
    """

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.kernels: list[CompiledKernel] = []
        self._set_in_env: list[_Setting] = []
        self._saved_config: list[tuple[Any, str, Any]] = []
        self._kernels_lock = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        """Keep provenance artefacts; ignore every other structured-trace record."""
        metadata = getattr(record, "metadata", None)
        artifact = metadata.get("artifact") if isinstance(metadata, dict) else None
        if not isinstance(artifact, dict) or artifact.get("name") != PROVENANCE_ARTIFACT:
            return
        payload = getattr(record, "payload", None)
        if not isinstance(payload, str):
            return
        kernels = kernels_from_provenance(payload, _current_graph_id())
        with self._kernels_lock:
            self.kernels.extend(kernels)

    def install(self) -> None:
        """Turn provenance tracking on and start listening."""
        for setting in _SETTINGS:
            self._apply(setting)
        logger = logging.getLogger(_TRACE_LOGGER)
        logger.addHandler(self)
        if logger.level == logging.NOTSET or logger.level > logging.DEBUG:
            logger.setLevel(logging.DEBUG)

    def _apply(self, setting: _Setting) -> None:
        location = setting.location()
        if location is None:
            if setting.env not in os.environ:
                self._set_in_env.append(setting)
                os.environ[setting.env] = setting.env_value
            return
        owner, name = location
        current = getattr(owner, name, None)
        if current is None or current == setting.value:
            return  # this torch lacks the setting, or it is set already
        self._saved_config.append((owner, name, current))
        setattr(owner, name, setting.value)

    def stop(self) -> list[CompiledKernel]:
        """Stop listening, put the settings back, and return the kernels recorded."""
        logging.getLogger(_TRACE_LOGGER).removeHandler(self)
        for setting in self._set_in_env:
            os.environ.pop(setting.env, None)
            location = setting.location()  # imported while recording: it read our value
            if location is not None and getattr(*location, None) == setting.value:
                setattr(*location, setting.default)
        self._set_in_env.clear()
        for owner, name, value in reversed(self._saved_config):
            setattr(owner, name, value)
        self._saved_config.clear()
        with self._kernels_lock:
            return list(self.kernels)


def start_recording() -> KernelOriginRecorder:
    """Install a recorder for the kernels compiled from now on."""
    recorder = KernelOriginRecorder()
    recorder.install()
    return recorder


def provenance_note() -> str | None:
    """Why compiled kernels cannot be attributed in this process, or None when they can."""
    config = sys.modules.get(_CONFIG_MODULE)
    if config is None:
        return None  # nothing was compiled
    if getattr(getattr(config, "trace", None), "provenance_tracking_level", None) is None:
        torch = sys.modules.get("torch")
        version = getattr(torch, "__version__", "?")
        return (
            f"torch {version} has no Inductor provenance tracking "
            "(torch._inductor.config.trace.provenance_tracking_level); compiled kernels are "
            "shown without their markers"
        )
    return None


def compiled_in_process() -> bool:
    """Whether Dynamo compiled any frame in this process (so traces may hold compiled kernels)."""
    utils = sys.modules.get("torch._dynamo.utils")
    try:
        return bool(utils.counters["frames"]["ok"])  # type: ignore[union-attr]
    except Exception:
        return False


def _current_graph_id() -> int | None:
    """The id of the graph Inductor is compiling, when the artefact is logged during codegen
    (a graph served from the FX graph cache has none)."""
    virtualized = sys.modules.get("torch._inductor.virtualized")
    try:
        graph_id = virtualized.V.graph.graph_id  # type: ignore[union-attr]
    except Exception:
        return None
    return graph_id if isinstance(graph_id, int) else None


def merge_kernels(kernels: Iterable[CompiledKernel]) -> list[CompiledKernel]:
    """One entry per (graph, name): a graph compiled again adds nothing new."""
    merged: dict[tuple[int | None, str], CompiledKernel] = {}
    for kernel in kernels:
        entry = merged.setdefault(
            (kernel.graph, kernel.name), CompiledKernel(kernel.name, kernel.graph)
        )
        for stack in kernel.stacks:
            if stack not in entry.stacks:
                entry.stacks.append(stack)
    return list(merged.values())


__all__ = [
    "PROVENANCE_ARTIFACT",
    "CompiledKernel",
    "KernelOriginRecorder",
    "SourceLine",
    "compiled_in_process",
    "kernels_from_provenance",
    "merge_kernels",
    "parse_stack_trace",
    "provenance_note",
    "start_recording",
]
