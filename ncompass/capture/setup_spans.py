"""Time the program spends once, measured while ``ncompass run`` runs it: its imports and its
model construction, recorded in the sidecar as setup spans.

Two hooks, both reached only when the program imports a module it has not imported yet or
constructs a ``torch.nn.Module``; a steady state that does neither never runs them:

- **imports**: ``importlib._bootstrap._find_and_load``, which the interpreter calls for every
  module not yet in ``sys.modules`` (``import x``, ``from x import y``,
  ``importlib.import_module``), is wrapped for the run. The span covers finding, loading and
  executing the module and everything it imports in turn; the label is the module's name.
- **model construction**: the ``__init__`` of every ``torch.nn.Module`` subclass is wrapped: the
  classes that exist once ``torch.nn`` is imported, and every class defined later through
  ``Module.__init_subclass__``. The label is the constructed object's class name.

Only the outermost span of a thread counts: an import made while constructing a model, a model
built by a module as it is imported, the submodules a model's constructor builds are all inside
the span already open. Times are Unix nanoseconds (``time.time_ns``), the clock of Kineto's
``ts`` plus ``baseTimeNanoseconds``; each span names its process and thread (``os.getpid``,
``threading.get_native_id``, the ``pid``/``tid`` of the trace's CPU events). Everything is undone
when the program returns. Processes a followed run starts are not measured.
"""

from __future__ import annotations

import functools
import importlib._bootstrap as bootstrap
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FunctionType
from typing import Any

from typing_extensions import TypedDict

IMPORT = "import"
CONSTRUCTION = "construction"
_MODULE_MODULE = "torch.nn.modules.module"
_ORIGINAL = "__ncompass_setup_original__"


class SetupSpanRecord(TypedDict):
    """One outermost import or model construction (the sidecar's ``setup_spans``)."""

    kind: str  # "import" or "construction"
    label: str  # the module imported, or the class constructed
    start_unix_us: float
    end_unix_us: float
    pid: int
    tid: int  # the OS thread id, as the trace's CPU events name it


class _Recording:
    """The spans of the run in progress, and what was patched to record them."""

    def __init__(self) -> None:
        self.spans: list[tuple[str, str, int, int, int]] = []
        self.open = threading.local()  # .busy: a setup span is open on this thread
        self.pid = os.getpid()
        self.wrapped: list[tuple[type, Any]] = []  # (class, its own __init__ before wrapping)
        self.module_class: type | None = None
        self.watching = False  # torch.nn was found (hooked, or left alone)

    def timed(self, kind: str, label: Callable[[], str], call: Callable[[], Any]) -> Any:
        """``call()``, recorded as a span when no other span is open on this thread."""
        state = self.open
        if getattr(state, "busy", False):
            return call()
        state.busy = True
        start = time.time_ns()
        try:
            return call()
        finally:
            end = time.time_ns()
            state.busy = False
            self.spans.append((kind, label(), start, end, threading.get_native_id()))

    def records(self) -> list[SetupSpanRecord]:
        return [
            {
                "kind": kind,
                "label": label,
                "start_unix_us": start / 1000,
                "end_unix_us": end / 1000,
                "pid": self.pid,
                "tid": tid,
            }
            for kind, label, start, end, tid in list(self.spans)
        ]


_ACTIVE: _Recording | None = None
_LAST: list[SetupSpanRecord] = []


def _never() -> bool:
    return False


# ``torch.compiler.is_compiling`` once torch has it. torch.compile traces a constructor called
# inside compiled code (``self.layers[:n]`` builds a ``ModuleList``); it knows this function
# (True while tracing), so the wrapper then runs the constructor as written, with nothing a
# ``fullgraph=True`` compilation could break on.
_is_compiling: Callable[[], bool] = _never


def _look_for_the_compiler() -> None:
    global _is_compiling
    compiler = sys.modules.get("torch.compiler")
    found = getattr(compiler, "is_compiling", None)
    if callable(found):
        _is_compiling = found


@contextmanager
def recording_setup_spans() -> Iterator[None]:
    """Record the program's outermost imports and model constructions while it runs."""
    global _ACTIVE, _LAST
    if _ACTIVE is not None:  # a run inside a run (a test calling run() from a script): once
        yield
        return
    recording = _Recording()
    _ACTIVE, _LAST = recording, []
    original = bootstrap._find_and_load  # type: ignore[attr-defined]

    def find_and_load(name: str, import_: Any) -> Any:
        loaded = recording.timed(IMPORT, lambda: name, lambda: original(name, import_))
        if not recording.watching and _MODULE_MODULE in sys.modules:
            _watch_constructions(recording)
        if _is_compiling is _never:
            _look_for_the_compiler()
        return loaded

    bootstrap._find_and_load = find_and_load  # type: ignore[attr-defined]
    if _MODULE_MODULE in sys.modules:
        _watch_constructions(recording)
    _look_for_the_compiler()
    try:
        yield
    finally:
        bootstrap._find_and_load = original  # type: ignore[attr-defined]
        _unwatch_constructions(recording)
        _ACTIVE = None
        _LAST = recording.records()


def recorded_setup_spans() -> list[SetupSpanRecord]:
    """The spans of the run in progress, or of the last run once it ended."""
    return _ACTIVE.records() if _ACTIVE is not None else list(_LAST)


def _watch_constructions(recording: _Recording) -> None:
    """Wrap ``__init__`` of every ``Module`` subclass, now and as classes are defined."""
    found = getattr(sys.modules[_MODULE_MODULE], "Module", None)
    if not isinstance(found, type):
        return  # half-imported: the next import looks again
    recording.watching = True
    if "__init_subclass__" in found.__dict__:
        return  # someone else's hook: leave it alone (and construction unmeasured)
    module_class: type = found
    recording.module_class = module_class
    pending = [module_class]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if cls is not module_class:
            _wrap_init(recording, cls)

    def init_subclass(cls: type, /, **kwargs: Any) -> None:
        super(module_class, cls).__init_subclass__(**kwargs)  # type: ignore[arg-type]
        _wrap_init(recording, cls)

    module_class.__init_subclass__ = classmethod(init_subclass)  # type: ignore[assignment]


def _wrap_init(recording: _Recording, cls: type) -> None:
    init = cls.__dict__.get("__init__")
    if not isinstance(init, FunctionType) or hasattr(init, _ORIGINAL):
        return

    # no closure over the recording: torch.compile, tracing a constructor called inside
    # compiled code, must be able to read every cell of this function (a function it can)
    @functools.wraps(init)
    def timed_init(self: Any, *args: Any, **kwargs: Any) -> None:
        if _is_compiling():  # traced by torch.compile: the constructor alone
            init(self, *args, **kwargs)
            return
        recording = _ACTIVE
        if recording is None:
            init(self, *args, **kwargs)
            return
        recording.timed(
            CONSTRUCTION, lambda: type(self).__name__, lambda: init(self, *args, **kwargs)
        )

    setattr(timed_init, _ORIGINAL, init)
    try:
        type.__setattr__(cls, "__init__", timed_init)
    except TypeError:  # an immutable (extension) class: its constructions are not measured
        return
    recording.wrapped.append((cls, init))


def _unwatch_constructions(recording: _Recording) -> None:
    for cls, init in recording.wrapped:
        if hasattr(cls.__dict__.get("__init__"), _ORIGINAL):  # not replaced meanwhile
            type.__setattr__(cls, "__init__", init)
    if recording.module_class is not None:
        del recording.module_class.__init_subclass__  # type: ignore[misc]


__all__ = [
    "CONSTRUCTION",
    "IMPORT",
    "SetupSpanRecord",
    "recorded_setup_spans",
    "recording_setup_spans",
]
