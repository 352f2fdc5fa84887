"""The call tree of a discovery run: sampled stacks → where the time goes, statement by statement.

Every sample is credited to the innermost frame of *your* code on its stack (the script, your
modules, third-party model code such as transformers); frames of torch, the standard library and
ncompass are folded into the statement that called them, so ``self.c_fc(x)`` holds the time of
the ``nn.Linear`` under it. Time spent once is set apart as *setup*: imports (frames of
``importlib``), model construction (``__init__``, ``from_pretrained``, weight initialisation) and
``torch.compile``'s compilation (frames of Dynamo's frame conversion and Inductor's compiler:
running compiled code also passes through ``torch._dynamo`` and ``torch._inductor`` frames, and
that is steady-state work), and a launcher starting and watching worker processes
(``torch.distributed.run``'s elastic agent: its CPU time is the same however long the ranks
train). Code Inductor generated (its cache folder) folds into the statement
that called it, like torch. Samples outside the script (the profiler starting and stopping) are
left out.

Lambdas, comprehensions and generator expressions run inside the statement that calls or
consumes them (a marker cannot wrap a lambda's body): their frames are folded into the frame
below them, so ``junk = [a @ b for _ in range(8)]`` holds the time of its ``<listcomp>``.

A function called from more than one statement is a *helper*: its time goes to the statement
that called it, so a slow ``spin(SLOW)`` or ``self.c_fc(x)`` is named rather than the loop or the
``addmm`` inside the helper that every call site shares. A function calling itself (recursion)
is not a second call site. The helpers folded are reported (:attr:`StackProfile.folded`).

Samples of the other processes of the run (a worker, a rank: the discovery run samples every
process it follows) count like the run's own, each weighing its own thread's CPU time, so time
adds up across processes; their stacks are read from their first frame, since a spawned worker
or a rank need not run the script (multiprocessing's and torch's frames fold away like any
framework frame). Each line keeps its time per process, to name the process of the answer.

When the run's trace has GPU work, each kernel's time is credited to the statement sampled
nearest in time to the CPU call that launched it (linked through ``args.correlation``): an
estimate, which the markers of the next run replace with exact numbers.
"""

from __future__ import annotations

import bisect
import getpass
import os
import re
import sysconfig
import tempfile
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib.util import find_spec
from itertools import pairwise
from pathlib import Path
from typing import Any

from ncompass import environment_variables
from ncompass.session.sampler import Frame, StackSamples
from ncompass.spec.models import MODULE_LEVEL

SETUP_KINDS = ("import", "model construction", "compilation", "process launch")
_CONSTRUCTION = frozenset(
    {"__init__", "from_pretrained", "post_init", "_init_weights", "init_weights"}
)
# Files whose frames are on the stack only while torch.compile compiles (not while compiled
# code runs, which passes through eval_frame.py, output_code.py and the generated module).
_COMPILER_FILES = (
    "/torch/_dynamo/convert_frame.py",
    "/torch/_inductor/compile_fx.py",
    "/torch/_inductor/codecache.py",
)
# Files whose frames are on the stack while a launcher starts and watches its worker processes
# (torchrun's elastic agent): once per run, however long the workers train.
_LAUNCHER_FILES = ("/torch/distributed/run.py", "/torch/distributed/launcher/api.py")
_SYNTHETIC = ("<lambda>", "<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>")


def _package_dir(name: str) -> str | None:
    spec = find_spec(name)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    return os.path.realpath(locations[0]) + os.sep if locations else None


def framework_dirs() -> tuple[str, ...]:
    """Folders whose frames are folded into their caller: torch, the standard library,
    ncompass (found without importing torch)."""
    found = [_package_dir("torch"), _package_dir("ncompass"), _package_dir("triton")]
    stdlib = sysconfig.get_paths().get("stdlib")
    if stdlib:
        found.append(os.path.realpath(stdlib) + os.sep)
    found.append(_inductor_cache_dir())
    return tuple(d for d in found if d)


def _inductor_cache_dir() -> str:
    """Where Inductor writes the code it generates (as torch computes it, without importing
    torch)."""
    folder = os.environ.get(environment_variables.TORCHINDUCTOR_CACHE_DIR)
    if not folder:
        try:
            user = getpass.getuser()
        except (KeyError, OSError):
            user = f"uid_{os.getuid()}" if hasattr(os, "getuid") else "unknown_user"
        user = re.sub(r'[\\/:*?"<>|]', "_", user)
        folder = os.path.join(tempfile.gettempdir(), f"torchinductor_{user}")
    return os.path.realpath(folder) + os.sep


@dataclass(frozen=True)
class CodeLine:
    """A line of a function of your code, as a sampled frame shows it.

    Attributes:
        file: The real path of the file.
        line: The line.
        qualname: The function (``Class.method``; ``<module>`` for top-level code). Lambdas and
            comprehensions count as the function they are written in.
        module: The module name (``__main__`` for the script).
    """

    file: str
    line: int
    qualname: str
    module: str


@dataclass
class LineTime:
    """Time of one line of your code: its own (``self_us``), with callees (``total_us``), and
    GPU time credited to it."""

    self_us: float = 0.0
    total_us: float = 0.0
    gpu_us: float = 0.0
    samples: int = 0


@dataclass
class HotPath:
    """The frames of your code from the top of the run down to a hot line, outermost first."""

    frames: list[CodeLine]
    weight_us: float

    @property
    def leaf(self) -> CodeLine:
        """The hot line itself."""
        return self.frames[-1]


@dataclass
class StackProfile:
    """Where a discovery run's time went, by line of your code.

    Attributes:
        lines: Steady-state time per line (setup excluded unless asked for).
        setup_us: Time of each kind of setup (``import``, ``model construction``,
            ``compilation``).
        steady_us: Time of the run outside setup.
        paths: Per hot line, its heaviest path (the frames leading to it).
        windows: Per line, its self time in each third of the steady-state run (for stability).
        functions: Per function of your code (a ``CodeLine`` whose line is 0), the steady-state
            CPU time spent in it and its callees.
        folded: Per helper function folded into the statements that call it (a ``CodeLine``
            whose line is 0), the time moved to its callers.
        callees: Per calling line (file, line), the functions of your code sampled under it
            (``CodeLine`` with line 0) and their time: what a call resolved only at run time
            (a dispatch dict, ``functools.partial``) reached.
        gpu: Whether GPU time was credited.
        processes: Per line, its own time in each process (pid -> µs), when the run sampled
            processes besides its own.
        roles: The processes sampled besides the run's own: pid -> role.
        root_pid: The run's own process.
    """

    lines: dict[CodeLine, LineTime] = field(default_factory=dict)
    setup_us: dict[str, float] = field(default_factory=dict)
    steady_us: float = 0.0
    paths: dict[CodeLine, HotPath] = field(default_factory=dict)
    windows: dict[CodeLine, list[float]] = field(default_factory=dict)
    functions: dict[CodeLine, float] = field(default_factory=dict)
    folded: dict[CodeLine, float] = field(default_factory=dict)
    callees: dict[tuple[str, int], dict[CodeLine, float]] = field(default_factory=dict)
    gpu: bool = False
    processes: dict[CodeLine, dict[int, float]] = field(default_factory=dict)
    roles: dict[int, str] = field(default_factory=dict)
    root_pid: int | None = None

    def process_of(self, lines: list[CodeLine]) -> str | None:
        """The process that spent most of these lines' time, named by its role when it is not
        the run's own (None: the run's own process)."""
        spent: dict[int, float] = defaultdict(float)
        for line in lines:
            for pid, us in self.processes.get(line, {}).items():
                spent[pid] += us
        if not spent:
            return None
        pid = max(spent, key=lambda p: spent[p])
        return None if pid == self.root_pid else self.roles.get(pid, f"pid {pid}")

    def ranked(self) -> list[tuple[CodeLine, LineTime]]:
        """Lines by the time the user cares about: GPU time when there is GPU work, else
        their own CPU time; largest first."""
        return sorted(self.lines.items(), key=lambda item: -self.basis_us(item[1]))

    def basis_us(self, time: LineTime) -> float:
        """The time a line is ranked by."""
        return time.gpu_us if self.gpu else time.self_us

    def sampled_lines(self) -> dict[tuple[str, int], float]:
        """Time per (real file, line), callees included: which lines ran."""
        return {(line.file, line.line): time.total_us for line, time in self.lines.items()}

    @property
    def total_us(self) -> float:
        """What shares are relative to: all GPU time, or the steady-state CPU time."""
        if self.gpu:
            return sum(t.gpu_us for t in self.lines.values())
        return self.steady_us


def normalized_qualname(qualname: str) -> str:
    """A code object's qualname as the statement index names scopes: no ``<locals>``, and a
    lambda or comprehension counts as the function around it."""
    parts = [p for p in qualname.split(".") if p != "<locals>"]
    for position, part in enumerate(parts):
        if part in _SYNTHETIC:
            parts = parts[:position]
            break
    return ".".join(parts) or MODULE_LEVEL


class _Classifier:
    def __init__(self, script: str, framework: tuple[str, ...]) -> None:
        self.script = os.path.realpath(script)
        self.framework = framework
        self._real: dict[str, str] = {}

    def real(self, file: str) -> str:
        found = self._real.get(file)
        if found is None:
            found = file if file.startswith("<") else os.path.realpath(file)
            self._real[file] = found
        return found

    def is_framework(self, frame: Frame) -> bool:
        file = self.real(frame.file)
        return file.startswith("<") or file.startswith(self.framework)

    def setup_kind(self, frames: list[Frame]) -> str | None:
        for position, frame in enumerate(frames):
            if frame.file.startswith("<frozen importlib"):
                return "import"
            if frame.qualname == MODULE_LEVEL and frame.module == "__mp_main__":
                return "import"  # a spawned child importing the script to find its target
            if position and frame.qualname == MODULE_LEVEL:  # a module's top level: an import
                return "import"
            file = self.real(frame.file)
            if file.endswith(_COMPILER_FILES):
                return "compilation"
            if file.endswith(_LAUNCHER_FILES):
                return "process launch"
            if frame.qualname.rsplit(".", 1)[-1] in _CONSTRUCTION and not self.is_framework(frame):
                return "model construction"
        return None


def stack_profile(
    samples: StackSamples,
    script: str | Path,
    *,
    include_setup: bool = False,
    gpu_launches_us: Sequence[tuple[float, float] | tuple[float, float, Any]] | None = None,
) -> StackProfile:
    """The time of each line of your code in a discovery run.

    Args:
        samples: The run's sampled stacks.
        script: The script that ran (samples without its frames are left out).
        include_setup: Count setup (imports, construction, compilation) like any other time.
        gpu_launches_us: ``(Unix time of the launching CPU call, GPU duration)`` of each GPU
            event, to credit GPU time to the statement sampled nearest in time; a third item,
            the launching process's pid, keeps the credit within that process's samples.
    """
    classifier = _Classifier(str(script), framework_dirs())
    profile = StackProfile()
    steady_times: list[float] = []
    steady_leaves: list[CodeLine] = []
    steady_pids: list[int | None] = []
    steady_weights: list[float] = []
    path_weights: dict[CodeLine, dict[tuple[CodeLine, ...], float]] = defaultdict(
        lambda: defaultdict(float)
    )
    kept: list[tuple[list[CodeLine], float, float]] = []
    kept_pids: list[int | None] = []
    profile.roles, profile.root_pid = dict(samples.processes), samples.root_pid
    for sample, (stack, at, weight) in enumerate(
        zip(samples.stacks, samples.times_us, samples.weights_us, strict=True)
    ):
        frames = [samples.frames[i] for i in stack]
        start = next(
            (i for i, f in enumerate(frames) if classifier.real(f.file) == classifier.script), None
        )
        pid = samples.pid_of(sample)
        if start is None and (pid is None or pid == samples.root_pid):
            continue
        start = start or 0  # another process (a spawned worker, a rank) need not run the script
        frames = frames[start:]
        kind = classifier.setup_kind(frames)
        if kind is not None:
            profile.setup_us[kind] = profile.setup_us.get(kind, 0.0) + weight
            if not include_setup:
                continue
        mine = [
            CodeLine(classifier.real(f.file), f.line, normalized_qualname(f.qualname), f.module)
            for f in frames
            if not classifier.is_framework(f) and not is_synthetic(f.qualname)
        ]
        if mine:
            kept.append((mine, at, weight))
            kept_pids.append(pid)
    helpers = _helpers(kept)
    for mine, _, weight in kept:
        for caller, callee in pairwise(mine):
            if (caller.file, caller.qualname) != (callee.file, callee.qualname):
                called = profile.callees.setdefault((caller.file, caller.line), {})
                function = CodeLine(callee.file, 0, callee.qualname, callee.module)
                called[function] = called.get(function, 0.0) + weight
    for (mine, at, weight), pid in zip(kept, kept_pids, strict=True):
        while len(mine) > 1 and (mine[-1].file, mine[-1].qualname) in helpers:
            helper = CodeLine(mine[-1].file, 0, mine[-1].qualname, mine[-1].module)
            profile.folded[helper] = profile.folded.get(helper, 0.0) + weight
            mine = mine[:-1]
        profile.steady_us += weight
        leaf = mine[-1]
        time = profile.lines.setdefault(leaf, LineTime())
        time.self_us += weight
        time.samples += 1
        if pid is not None and profile.roles:
            by_process = profile.processes.setdefault(leaf, {})
            by_process[pid] = by_process.get(pid, 0.0) + weight
        for function in {CodeLine(line.file, 0, line.qualname, line.module) for line in mine}:
            profile.functions[function] = profile.functions.get(function, 0.0) + weight
        for line in set(mine):
            if line != leaf:
                profile.lines.setdefault(line, LineTime()).total_us += weight
        time.total_us += weight
        path_weights[leaf][tuple(mine)] += weight
        steady_times.append(at)
        steady_leaves.append(leaf)
        steady_pids.append(pid)
        steady_weights.append(weight)
    for leaf, paths in path_weights.items():
        heaviest = max(paths.items(), key=lambda item: item[1])
        profile.paths[leaf] = HotPath(list(heaviest[0]), sum(paths.values()))
    if steady_times:
        # thirds of the steady-state time, not of the clock: compilation or imports set apart
        # between two steady stretches must not leave a third nearly empty
        third_us = profile.steady_us / 3 or 1.0
        done = 0.0
        for leaf, weight in zip(steady_leaves, steady_weights, strict=True):
            third = min(2, int((done + weight / 2) / third_us))
            profile.windows.setdefault(leaf, [0.0, 0.0, 0.0])[third] += weight
            done += weight
    if gpu_launches_us and steady_times:
        _credit_gpu_by_process(profile, steady_times, steady_leaves, steady_pids, gpu_launches_us)
    return profile


def _credit_gpu_by_process(
    profile: StackProfile,
    times: list[float],
    leaves: list[CodeLine],
    pids: list[int | None],
    launches: Sequence[tuple[float, float] | tuple[float, float, Any]],
) -> None:
    """GPU time to the statement sampled nearest each launch in the process that launched it
    (any process's samples when the launch names no sampled process)."""
    sampled = set(pids) if profile.roles else set()
    by_process: dict[Any, list[tuple[float, float]]] = defaultdict(list)
    for launch in launches:
        pid = launch[2] if len(launch) > 2 else None
        by_process[pid if pid in sampled else None].append((launch[0], launch[1]))
    for pid, chosen in by_process.items():
        if pid is None:
            _credit_gpu(profile, times, leaves, chosen)
            continue
        mine = [position for position, owner in enumerate(pids) if owner == pid]
        _credit_gpu(profile, [times[i] for i in mine], [leaves[i] for i in mine], chosen)


def is_synthetic(qualname: str) -> bool:
    """Whether a code object is a lambda, a comprehension or a generator expression: code that
    runs inside the statement calling or consuming it."""
    return qualname.rsplit(".", 1)[-1] in _SYNTHETIC


def _helpers(kept: list[tuple[list[CodeLine], float, float]]) -> set[tuple[str, str]]:
    """Functions called from more than one statement: helpers, whose time is credited to the
    statement that called them (``spin(SLOW)``, not the loop inside ``spin``). A recursive call
    (the function calling itself) is not another call site."""
    sites: dict[tuple[str, str], set[tuple[str, int]]] = defaultdict(set)
    for mine, _, _ in kept:
        for caller, callee in pairwise(mine):
            if (caller.file, caller.qualname) != (callee.file, callee.qualname):
                sites[(callee.file, callee.qualname)].add((caller.file, caller.line))
    return {function for function, callers in sites.items() if len(callers) > 1}


def _credit_gpu(
    profile: StackProfile,
    times: list[float],
    leaves: list[CodeLine],
    launches: list[tuple[float, float]],
) -> None:
    """GPU time to the statement sampled nearest each launch (within ten sampling periods)."""
    horizon = 10 * max(1.0, (times[-1] - times[0]) / max(1, len(times) - 1))
    for at, duration in launches:
        position = bisect.bisect_left(times, at)
        best = None
        for candidate in (position - 1, position):
            if (
                0 <= candidate < len(times)
                and abs(times[candidate] - at) <= horizon
                and (best is None or abs(times[candidate] - at) < abs(times[best] - at))
            ):
                best = candidate
        if best is not None:
            profile.lines[leaves[best]].gpu_us += duration
            profile.gpu = True


__all__ = [
    "SETUP_KINDS",
    "CodeLine",
    "HotPath",
    "LineTime",
    "StackProfile",
    "framework_dirs",
    "is_synthetic",
    "normalized_qualname",
    "stack_profile",
]
