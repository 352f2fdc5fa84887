"""Compiled code in the session's answer: the source lines whose Inductor kernels hold the time.

Inside a region ``torch.compile`` compiled, markers do not record and the stack sampler sees one
frame of the compiled function (its ``def`` line), so both runs stop at the statement that calls
the compiled code. The run's sidecar records, for every Inductor kernel, the source lines it was
generated from (see :mod:`ncompass.capture.compiled_kernels`), and the trace holds each kernel's
time. When most of the answer's time is in compiled kernels, the answer moves down to the source
line whose kernels hold the most of it, names those kernels, and keeps the calling statement as
``compiled_from``.

A kernel fused from several statements is answered as their span: which statement of a fused
kernel costs what cannot be measured from outside it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ncompass.capture.sidecar import Sidecar
from ncompass.errors import TraceError
from ncompass.session.answer import Answer, Contender, WorkTime
from ncompass.session.callstacks import CodeLine, framework_dirs
from ncompass.session.hotpath import key_of, statement_at
from ncompass.session.planner import MarkerPlanner
from ncompass.traces.events import GPU_CATEGORIES, category_of, microseconds
from ncompass.traces.reader import TraceReader

# the answer moves into compiled code when its kernels hold at least this share of its time
_COMPILED_SHARE = 0.5
# the runner-up line is a tie when this close to the top one (share of its time)
_TIE_SHARE = 0.10
_TOP_KERNELS = 5
_COMPILED_REGION = "Torch-Compiled Region"  # the range Dynamo records around compiled code
# ops Inductor calls as extern kernels rather than generating code for them
_EXTERN_OPS = frozenset(
    {
        "aten::mm",
        "aten::addmm",
        "aten::bmm",
        "aten::baddbmm",
        "aten::convolution",
        "aten::_convolution",
        "aten::_scaled_dot_product_flash_attention_for_cpu",
        "aten::_scaled_dot_product_efficient_attention",
        "aten::_scaled_dot_product_flash_attention",
    }
)


@dataclass
class CompiledKernelTime:
    """One Inductor kernel of the run: its time and the source lines it was generated from."""

    name: str
    lines: list[tuple[str, int]]
    us: float = 0.0
    calls: int = 0


def compiled_kernel_times(
    trace_path: str | Path, sidecar: Sidecar | None
) -> list[CompiledKernelTime]:
    """The run's compiled kernels with their time and source lines, slowest first.

    A kernel's lines are the innermost frame of your code in each of its source stacks (frames
    of torch and the standard library are skipped: ``F.linear`` inside ``nn.Linear`` stands for
    ``self.proj(x)``). GPU time when the kernels ran on a GPU, else their CPU time.
    """
    record = sidecar.get("compiled_kernels") if sidecar is not None else None
    kernels = record.get("kernels") if record is not None else None
    if not kernels:
        return []
    framework = framework_dirs()
    origins: dict[str, list[tuple[str, int]]] = {}
    for kernel in kernels:
        lines = _origin_lines(kernel.get("stacks") or [], framework)
        if not lines:
            continue
        origins[str(kernel["name"])] = lines
        if kernel.get("graph") is not None:
            origins[f"graph_{kernel['graph']}_{kernel['name']}"] = lines
    if not origins:
        return []
    cpu: dict[str, CompiledKernelTime] = {}
    gpu: dict[str, CompiledKernelTime] = {}
    try:
        for event in TraceReader(trace_path):
            name = event.get("name")
            if event.get("ph") != "X" or name not in origins:
                continue
            found = gpu if category_of(event) in GPU_CATEGORIES else cpu
            entry = found.get(name)
            if entry is None:
                entry = found[name] = CompiledKernelTime(name, origins[name])
            entry.us += microseconds(event.get("dur", 0))
            entry.calls += 1
    except TraceError:
        return []
    return sorted((gpu or cpu).values(), key=lambda entry: -entry.us)


def into_compiled_code(
    answer: Answer, trace_path: str | Path, sidecar: Sidecar | None, planner: MarkerPlanner
) -> Answer:
    """The answer moved down into compiled code when its kernels hold most of the answer's
    time (see the module docstring); else the answer as it was.

    The new answer is the statement the slowest kernel was generated from or, for a kernel
    fused from several statements of one function, the lines from the first to the last of
    them. A second kernel within noise of the first is named as a tie.
    """
    kernels = compiled_kernel_times(trace_path, sidecar)
    compiled_us = sum(kernel.us for kernel in kernels)
    if compiled_us <= 0:
        return answer
    if compiled_us < _COMPILED_SHARE * answer.self_ms * 1000:
        # the session stops at the call: say why, and where the rest of the time is
        extern, region_us = extern_kernel_times(trace_path)
        whole = region_us or answer.self_ms * 1000 or 1.0
        answer.compiled_kernels_share = min(1.0, compiled_us / whole)
        answer.extern_kernels = extern
        return answer
    placed = [(kernel, _place(planner, kernel)) for kernel in kernels]
    found = [(kernel, place) for kernel, place in placed if place is not None]
    if not found:
        return answer
    # the call's steady-state share, divided between its kernels by their time
    scale = answer.share / compiled_us
    (top, place), *rest = found
    answer.compiled_from = Contender(
        answer.file, answer.lines, answer.statement, answer.function, answer.self_ms, answer.share
    )
    answer.file, answer.lines, answer.statement, answer.function = place
    answer.self_ms = top.us / 1000
    answer.share = min(1.0, top.us * scale)
    answer.measured_by = "compiled kernels"
    same_place = [kernel for kernel, where in found if where == place]
    work = [
        WorkTime(kernel.name, kernel.us / 1000, kernel.calls, kernel.us / top.us if top.us else 0)
        for kernel in same_place[:_TOP_KERNELS]
    ]
    if answer.basis == "gpu":
        answer.kernels, answer.ops = work, []
    else:
        answer.ops, answer.kernels = work, []
    answer.tied_with = [
        Contender(*where, kernel.us / 1000, min(1.0, kernel.us * scale))
        for kernel, where in rest
        if where != place and kernel.us >= (1 - _TIE_SHARE) * top.us
    ][:1]
    answer.confidence = "tie" if answer.tied_with else answer.confidence
    return answer


def extern_kernel_times(trace_path: str | Path) -> tuple[list[WorkTime], float]:
    """The ops compiled code called instead of generating a kernel (Inductor's *extern
    kernels*: ``mm``, ``addmm``, ``convolution``...) inside the compiled regions of the trace,
    with their share of those regions' time; and that time (µs)."""
    regions: dict[Any, list[tuple[float, float]]] = {}
    ops: list[tuple[Any, float, float, str]] = []
    try:
        for event in TraceReader(trace_path):
            if event.get("ph") != "X":
                continue
            name = str(event.get("name", ""))
            thread = (event.get("pid"), event.get("tid"))
            start = float(event.get("ts", 0))
            duration = microseconds(event.get("dur", 0))
            if name.startswith(_COMPILED_REGION):
                regions.setdefault(thread, []).append((start, start + duration))
            elif event.get("cat") == "cpu_op" and name in _EXTERN_OPS:
                ops.append((thread, start, duration, name))
    except TraceError:
        return [], 0.0
    found: dict[str, list[float]] = {}
    covered_until: dict[Any, float] = {}
    for thread, start, duration, name in sorted(ops, key=lambda op: op[1]):
        if start < covered_until.get(thread, float("-inf")):
            continue  # inside an extern op already counted (addmm calling mm)
        if any(a <= start < b for a, b in regions.get(thread, [])):
            found.setdefault(name, []).append(duration)
            covered_until[thread] = start + duration
    whole = sum(b - a for spans in regions.values() for a, b in spans)
    ranked = sorted(found.items(), key=lambda item: -sum(item[1]))[:_TOP_KERNELS]
    return [
        WorkTime(name, sum(times) / 1000, len(times), min(1.0, sum(times) / whole) if whole else 0)
        for name, times in ranked
    ], whole


def _origin_lines(stacks: list[Any], framework: tuple[str, ...]) -> list[tuple[str, int]]:
    """The innermost frame of your code in each stack, without repeats."""
    found: list[tuple[str, int]] = []
    for stack in stacks:
        for file, line in reversed(stack):
            real = os.path.realpath(file)
            if not real.startswith(framework) and not file.startswith("<"):
                if (real, line) not in found:
                    found.append((real, int(line)))
                break
    return found


def _place(
    planner: MarkerPlanner, kernel: CompiledKernelTime
) -> tuple[str, tuple[int, int], str, str] | None:
    """File, lines, text and function of the statements a kernel was generated from: one
    statement, or the lines from the first to the last when they are in one function (the
    kernel's first file and function when they are not)."""
    located = []
    for file, line in kernel.lines:
        found = statement_at(planner, CodeLine(file, line, "", "__main__"))
        if found is not None:
            located.append((file, found[0], found[1]))
    if not located:
        return None
    file, scope, _ = located[0]
    together = [s for f, sc, s in located if f == file and sc.qualname == scope.qualname]
    start = min(statement.start for statement in together)
    end = max(statement.end for statement in together)
    source, _ = planner.source_of(key_of(CodeLine(file, start, "", "__main__")))
    text = source.line(min(together, key=lambda s: s.start).start).strip()
    if len(together) > 1:
        text += f" … ({len(together)} statements fused into one kernel)"
    return file, (start, end), text, f"{Path(file).stem}:{scope.qualname}"


__all__ = [
    "CompiledKernelTime",
    "compiled_kernel_times",
    "extern_kernel_times",
    "into_compiled_code",
]
