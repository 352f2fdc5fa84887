"""What runs in every new Python process of a followed run, from the run's ``sitecustomize``.

The process starts on a fast path that imports nothing: the run's ``sitecustomize`` loads this
module from its file without the ``ncompass`` package, and this module needs only what every
interpreter has loaded before its ``sitecustomize`` (``os``, ``sys``, ``marshal``, ``atexit``).
A finder at the front of ``sys.meta_path`` watches for the first import of a target module (the
specs' modules, or a module named like a target file) and of ``torch``. Until one comes,
following costs the process one small settings read (``marshal``) and one small record write
(JSON written by hand, so not even ``json`` is imported). Then:

- a target module: the run's spec is loaded and rewrites are enabled (the usual import hook
  takes over), and with ``--profiler torch`` the profiler starts first so the markers record;
- ``torch`` (with ``--profiler torch``): the profiler starts once torch has finished importing.

The process writes its trace and a record of itself (pid, parent pid, rank, role, command, exit
code, markers placed) when it ends: at interpreter exit; for a ``multiprocessing`` child (which
leaves through ``os._exit``) when its ``Process._bootstrap`` returns; at any ``os._exit``; and
at a SIGTERM the process leaves to its default (a pool's ``terminate``, ``kill``): the trace is
written, then the signal ends the process as it would have. A stop signal that comes while the
trace is written waits until it is. A crash (SIGSEGV, SIGKILL) writes nothing: the run names
the process in one warning line.
"""

from __future__ import annotations

import _thread
import atexit
import marshal
import os
import sys

TYPE_CHECKING = False  # not typing's: importing typing costs a bare child more than all the rest
if TYPE_CHECKING:
    import signal as _signal  # the same names; _signal, already loaded, has no stubs
    from collections.abc import Callable
    from typing import Any
else:
    import _signal  # signal itself would import enum machinery into every child

FOLLOW_ENV = "NCOMPASS_FOLLOW"
"""``environment_variables.NCOMPASS_FOLLOW``, spelled here: this module imports no ncompass."""
SETTINGS_FILE = "run.marshal"
"""The run's settings, in ``marshal`` format: read without importing anything."""
EXIT_PREFIX = "exit-"
START_SUFFIX = ".start.json"
END_SUFFIX = ".end.json"
PROCESS_KEY = "ncompass_process"
"""The top-level key of a per-process trace that says which process recorded it."""

# multiprocessing's own servers: no work of the user's runs in them, and they live until the
# run's interpreter exits; followed (the forkserver's children are the user's) but not listed
_HELPERS = ("multiprocessing.resource_tracker", "multiprocessing.forkserver")

# the multiprocessing names that say nothing about a process's job
_GENERIC_PROCESS_NAMES = ("Process-", "SpawnProcess-", "ForkProcess-", "ForkServerProcess-")


class Followed:
    """This process's part in a followed run.

    Attributes:
        folder: The run's follow folder (settings, process records, exit codes).
        settings: The run's settings (``SETTINGS_FILE`` in the folder).
        pid: The process this state belongs to (a forked child gets its own).
        root: This is the process ``ncompass run`` runs in (it writes no record of its own).
        helper: One of multiprocessing's servers (it writes no record either).
        profiler: The profiler recording this process, once started.
        rewriting: The run's spec is enabled here.
        finished: The record of this process is written.
        exit_code: The exit code, when this process knows it.
    """

    def __init__(
        self, folder: str, settings: dict[str, Any], *, root: bool = False, helper: bool = False
    ) -> None:
        self.folder = folder
        self.settings = settings
        self.pid = os.getpid()
        self.root = root
        self.helper = helper
        self.profiler: Any = None
        self.rewriting = False
        self.finished = False
        self.finishing = False
        self.pending_signal: int | None = None  # a stop signal that came while finishing
        self.exit_code: int | None = None
        self.reported_exits: set[int] = set()
        self.stops: list[Callable[[], object]] = []  # what the run's process hooks end with

    @property
    def records(self) -> str:
        return self.folder

    @property
    def wants_profiler(self) -> bool:
        """This process starts a recorder of its own: the run's windows, or its own trace."""
        kind = self.settings.get("kind") or {}
        if self.settings.get("windows") is not None:
            return bool(kind.get("followed_windows"))
        return bool(kind.get("per_process_traces")) and self.settings.get("traces") is not None


_state: Followed | None = None


def current() -> Followed | None:
    """This process's part in a followed run (None when the run does not follow, or in none)."""
    state = _state
    return state if state is not None and state.pid == os.getpid() else None


def start() -> None:
    """Follow the run named by ``$NCOMPASS_FOLLOW`` into this process (the ``sitecustomize``
    calls it). Does nothing in the run's own process or when the variable is unset."""
    global _state
    folder = os.environ.get(FOLLOW_ENV)
    if not folder or _state is not None:
        return
    try:
        settings = read_settings(folder)
    except (OSError, ValueError, EOFError, TypeError):
        return  # the run has ended and taken its folder with it: run untouched
    if settings.get("root_pid") == os.getpid():
        return
    command = " ".join(getattr(sys, "orig_argv", None) or sys.argv)
    begin(Followed(folder, settings, helper=any(name in command for name in _HELPERS)))


def read_settings(folder: str) -> dict[str, Any]:
    """The run's settings, as ``tree`` wrote them into its folder."""
    with open(os.path.join(folder, SETTINGS_FILE), "rb") as stream:
        settings: dict[str, Any] = marshal.load(stream)
    if not isinstance(settings, dict):
        raise ValueError(f"{SETTINGS_FILE} holds no settings")
    return settings


def write_settings(folder: str, settings: dict[str, Any]) -> None:
    """Write (or rewrite) the run's settings for its processes to read (plain JSON values
    only), at once."""
    import json

    plain = json.loads(json.dumps(settings))  # marshal takes no subclass (a str enum, say)
    path = os.path.join(folder, SETTINGS_FILE)
    partial = f"{path}.{os.getpid()}.partial"
    with open(partial, "wb") as stream:
        marshal.dump(plain, stream)
    os.replace(partial, path)  # rewritten while children may read it: never half of it


def begin(state: Followed) -> None:
    """Start following in this process: write its start record, watch its imports."""
    global _state
    _state = state
    if not state.root and not state.helper:
        _write_record(os.path.join(state.records, f"{state.pid}{START_SUFFIX}"), identity())
        atexit.register(finish)
        _finish_at_os_exit()
    hooks: dict[str, Callable[[], None]] = {
        "subprocess": _report_subprocess_exits,
        "multiprocessing.popen_fork": _report_multiprocessing_exits,
        "multiprocessing.process": _finish_multiprocessing_children,
    }
    if state.wants_profiler and not state.root and not state.helper:
        hooks["torch"] = start_profiler
    for name in list(hooks):
        if name in sys.modules:
            _quietly(hooks.pop(name))
    _follow_forks()
    own = not state.root and not state.helper and not state.rewriting
    targets = tuple(state.settings.get("modules") or ()) if own else ()
    stems = tuple(state.settings.get("file_stems") or ()) if own else ()
    if hooks or targets or stems:
        sys.meta_path.insert(0, _FollowFinder(hooks, frozenset(targets), frozenset(stems)))


def stop_root() -> None:
    """End following in the run's own process (its import watcher and exit reports)."""
    global _state
    for finder in [f for f in sys.meta_path if isinstance(f, _FollowFinder)]:
        sys.meta_path.remove(finder)
    _state = None


class _FollowFinder:
    """Watches imports: the first target module enables rewrites, some modules get a hook run
    once they are imported. Finds nothing itself."""

    def __init__(
        self,
        after_import: dict[str, Callable[[], None]],
        targets: frozenset[str],
        stems: frozenset[str],
    ) -> None:
        self.after_import = after_import
        self.targets = targets
        self.stems = stems
        self.busy: set[int] = set()  # threads inside find_spec (asking the other finders)

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        thread = _thread.get_ident()
        if thread in self.busy:
            return None
        hook = self.after_import.get(fullname)
        is_target = fullname in self.targets or (
            bool(self.stems) and fullname.rpartition(".")[2] in self.stems
        )
        if hook is None and not is_target:
            return None
        self.busy.add(thread)
        try:
            if is_target:
                self.targets = self.stems = frozenset()
                _quietly(enable_run_spec)
                if "torch" in sys.modules:  # the profiler started with the rewrites
                    self.after_import.pop("torch", None)
                return _spec_from_others(self, fullname, path, target)  # the import hook's
            assert hook is not None
            del self.after_import[fullname]
            spec = _spec_from_others(self, fullname, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _ThenRun(spec.loader, hook)
            return spec
        finally:
            self.busy.discard(thread)
            if not self.after_import and not self.targets and not self.stems:
                self.remove()

    def remove(self) -> None:
        if self in sys.meta_path:
            sys.meta_path.remove(self)

    def invalidate_caches(self) -> None:
        """Nothing cached here."""


def _spec_from_others(skip: object, fullname: str, path: Any, target: Any) -> Any:
    for finder in list(sys.meta_path):
        if finder is skip:
            continue
        find_spec = getattr(finder, "find_spec", None)
        spec = find_spec(fullname, path, target) if find_spec is not None else None
        if spec is not None:
            return spec
    return None


class _ThenRun:
    """A loader that runs a hook once the module it loads has executed."""

    def __init__(self, loader: Any, then: Callable[[], None]) -> None:
        self._loader = loader
        self._then = then

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        module.__loader__ = self._loader  # the module sees its own loader, not this one
        if module.__spec__ is not None:
            module.__spec__.loader = self._loader
        self._loader.exec_module(module)
        _quietly(self._then)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)


def enable_run_spec() -> None:
    """Load the run's spec and rewrite its targets here (the profiler first, so markers record)."""
    state = current()
    if state is None or state.rewriting:
        return
    state.rewriting = True
    _finish_at_sigterm()  # its record holds the markers placed here
    if state.wants_profiler:
        start_profiler()
    import pickle

    from ncompass.importer.hook import enable_rewrites

    with open(state.settings["spec"], "rb") as stream:
        config = pickle.load(stream)  # written by this run's own process
    enable_rewrites(config)


def start_profiler() -> None:
    """Start this process's profiler, writing into the run's folder of per-process traces."""
    state = current()
    if state is None or state.root or state.helper or state.profiler or not state.wants_profiler:
        return
    _finish_at_sigterm()  # from now on this process has a trace to lose
    if state.settings.get("windows") is not None:  # the run records windows: so does this one
        from ncompass.capture.follow.windows import start_windows

        start_windows(state)
        return
    from pathlib import Path

    from ncompass.capture.backends import make_profiler
    from ncompass.capture.trace_files import claim_trace_path

    path = claim_trace_path(Path(state.settings["traces"]), str(state.pid))
    options = state.settings.get("profiler_options") or {}
    # the run's own profiler: a kind whose every process writes its own trace (torch)
    profiler = make_profiler(state.settings["profiler"], path, **options)
    try:
        from ncompass.capture.termination import stops_go_to_the_main_thread

        with stops_go_to_the_main_thread():  # the profiler's threads never take SIGTERM
            profiler.start()
    except Exception:
        path.unlink(missing_ok=True)
        raise
    state.profiler = profiler
    start_process_hooks(state)


def start_process_hooks(state: Followed) -> None:
    """Call what the run asks of every process that works (the session's stack sampler): the
    settings' ``process_hooks`` map a module to its options; its ``start_in_process(options)``
    returns what to call when the process ends."""
    import functools
    import importlib

    def start(module: str, options: Any) -> None:
        state.stops.append(importlib.import_module(module).start_in_process(options))

    for module, options in (state.settings.get("process_hooks") or {}).items():
        _quietly(functools.partial(start, module, options))


def finish(exit_code: int | None = None) -> None:
    """Write this process's trace and record (once; only in the process that began it)."""
    state = current()
    if state is None or state.finished or state.finishing or state.root or state.helper:
        return
    state.finishing = True
    with _stops_wait(state):
        _write_end(state, exit_code)
    state.finished = True
    pending, state.pending_signal = state.pending_signal, None
    if pending is not None:
        _end_by(pending)  # the stop that came while the trace was written


def _write_end(state: Followed, exit_code: int | None) -> None:
    """Stop the profiler (writing the trace) and write the end record."""
    for stop in state.stops:
        _quietly(stop)
    if exit_code is not None:
        state.exit_code = exit_code
    me = identity()
    trace_file: str | None = None
    profiler, state.profiler = state.profiler, None
    if profiler is not None:
        try:
            profiler.add_metadata(PROCESS_KEY, me)
            trace_file = str(profiler.stop())
        except Exception as error:  # the process is ending: say why, never raise
            sys.stderr.write(f"ncompass: warning: process {state.pid} wrote no trace: {error}\n")
    if state.settings.get("windows") is not None:
        from ncompass.capture.follow.windows import finish_windows

        me.update(finish_windows(state))  # writes the open window first
    if (state.settings.get("kind") or {}).get("gates_recorder"):  # a multiprocessing child
        from ncompass.capture.nvtx_windows import write_recorder_output  # runs no exit handler

        _quietly(write_recorder_output)
    markers: list[Any] = []
    modules: list[list[str]] = []
    if state.rewriting:
        from ncompass.importer.registry import REGISTRY

        markers = REGISTRY.manifest()
        modules = [[module.name, module.path] for module in REGISTRY.modules()]
    record = {
        **me,
        "exit_code": state.exit_code,
        "trace_file": trace_file,
        "markers": markers,
        "modules": modules,
    }
    _write_record(os.path.join(state.records, f"{state.pid}{END_SUFFIX}"), record)


class _stops_wait:
    """While this process writes its trace, a SIGINT or SIGTERM waits (it would cut the write
    short); ``finish`` delivers it once the trace is written. Handlers can be changed on the
    main thread only: elsewhere, :func:`_on_sigterm` holds the signal back itself."""

    def __init__(self, state: Followed) -> None:
        self._state = state
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> None:
        for signum in (_signal.SIGINT, _signal.SIGTERM):
            previous = _set_handler(signum, self._note)
            if previous is not None:
                self._previous[signum] = previous

    def _note(self, signum: int, frame: object) -> None:
        if self._state.pending_signal is None:
            self._state.pending_signal = signum

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            _set_handler(signum, handler)
        pending = self._state.pending_signal
        if pending is not None and not _ends_the_process(self._previous.get(pending)):
            # the program's own handler (or Python's Ctrl-C) gets the signal, after the write
            self._state.pending_signal = None
            self._state.finished = True
            _signal.raise_signal(pending)


def _set_handler(signum: int, handler: Any) -> Any:
    """Set a signal's handler; returns the one it had (None: it cannot be set here, off the
    main thread, or was not set from Python)."""
    try:
        return _signal.signal(signum, handler)
    except (ValueError, OSError, TypeError):
        return None


def _ends_the_process(handler: object) -> bool:
    return handler is _on_sigterm or handler == _signal.SIG_DFL


def _end_by(signum: int) -> None:
    """End this process by ``signum``'s default action, as it would have ended without us."""
    _set_handler(signum, _signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _on_sigterm(signum: int, frame: object) -> None:
    """SIGTERM, left to its default by the program: write what this process has, then end by
    it (exit code -15, as the program would have had)."""
    state = current()
    if state is not None and state.finishing and not state.finished:
        if state.pending_signal is None:
            state.pending_signal = signum  # finish() ends the process once written
        return
    if state is not None and not state.finished:
        _whatever_happens(lambda: finish(-signum))
    _end_by(signum)


def _drop_the_runs_signal_handlers() -> None:
    """A child forked from the run's own process inherits its stop handlers, which raise into
    the program's code and then ignore every later stop: a pool could never terminate such a
    worker. SIGTERM is the default again (until the child records: :func:`_finish_at_sigterm`),
    Ctrl-C Python's."""
    for signum, handler in (
        (_signal.SIGTERM, _signal.SIG_DFL),  # _finish_at_sigterm takes it once it records
        (_signal.SIGINT, _signal.default_int_handler),
    ):
        if _is_the_runs(_signal.getsignal(signum)):
            _set_handler(signum, handler)


def _is_the_runs(handler: object) -> bool:
    return getattr(handler, "__module__", None) == "ncompass.capture.termination"


def _finish_at_sigterm() -> None:
    """Take SIGTERM over where the program leaves it to its default, once this process has
    something to write (a profiler, or markers placed). A process that records nothing keeps
    the default: SIGTERM ends it at once, even inside a long C call."""
    state = current()
    if state is None or state.root or state.helper:
        return  # the run's own process stops by its own rules (capture.termination)
    handler = _signal.getsignal(_signal.SIGTERM)
    if handler == _signal.SIG_DFL or _is_the_runs(handler):
        _set_handler(_signal.SIGTERM, _on_sigterm)  # off the main thread: stays as it was


def _finish_at_os_exit() -> None:
    """``os._exit`` runs no exit handler: write this process's trace first."""
    original = os._exit
    if getattr(original, "_ncompass", False):
        return

    def exit_now(code: int) -> None:
        _whatever_happens(lambda: finish(code))
        original(code)

    exit_now._ncompass = True  # type: ignore[attr-defined]
    os._exit = exit_now  # type: ignore[assignment]


def _whatever_happens(action: Callable[[], object]) -> None:
    """Run ``action`` on the way out of the process: nothing it raises (a second signal's
    ``KeyboardInterrupt`` included) may stop the process from ending as it was asked to."""
    try:
        action()
    except BaseException:
        return


def identity(process_name: str | None = None) -> dict[str, Any]:
    """Who this process is: pid, parent pid, rank, role and command line.

    Args:
        process_name: Its ``multiprocessing`` name, while ``current_process()`` does not say.
    """
    rank = _rank()
    command = " ".join(getattr(sys, "orig_argv", None) or sys.argv)
    job = _job(process_name)
    role = job or command
    if rank is not None:
        role = f"rank {rank}" + (f" · {job}" if job else "")
    return {
        "pid": os.getpid(),
        "ppid": os.getppid(),
        "rank": rank,
        "role": role,
        "command": command,
    }


def _rank() -> int | None:
    for name in ("RANK", "LOCAL_RANK"):  # set by torchrun and torch.distributed launchers
        value = os.environ.get(name, "")
        if value.isdigit():
            return int(value)
    return None


def _job(process_name: str | None) -> str | None:
    """A DataLoader worker's number, else a multiprocessing child's name (vLLM's EngineCore)."""
    worker = sys.modules.get("torch.utils.data._utils.worker")
    info = getattr(worker, "_worker_info", None)
    if info is not None:
        return f"DataLoader worker {info.id}"
    process = sys.modules.get("multiprocessing.process")
    name: str | None = process_name
    if name is None and process is not None:
        name = process.current_process().name
    if name is None:
        return None
    if name == "MainProcess":
        return None
    title = _process_title()
    if name.startswith(_GENERIC_PROCESS_NAMES) and title:
        return title
    return name


def _process_title() -> str | None:
    """The title a process gave itself with ``setproctitle`` (vLLM names its processes)."""
    module = sys.modules.get("setproctitle")
    get = getattr(module, "getproctitle", None)
    try:
        title = get() if get is not None else None
    except Exception:
        return None
    return title if isinstance(title, str) and title else None


_forks_followed = False


def _follow_forks() -> None:
    global _forks_followed
    if not _forks_followed:
        _forks_followed = True
        os.register_at_fork(after_in_child=lambda: _quietly(_after_fork_in_child))


def _after_fork_in_child() -> None:
    """A forked child is a process of its own: new record, new trace.

    The profiler it inherits (the parent's recording, Kineto state included) is stopped and
    dropped without writing, so the parent's events are never recorded twice; a fresh one
    starts if the parent was recording.
    """
    global _state
    parent = _state
    if parent is None or parent.pid == os.getpid():
        return
    _drop_the_runs_signal_handlers()  # first: what follows takes time a SIGTERM may come in
    inherited = parent.profiler
    if inherited is None and parent.root:
        torch_backend = sys.modules.get("ncompass.capture.backends.torch")
        inherited = torch_backend.TorchProfiler.active() if torch_backend is not None else None
    child = Followed(parent.folder, parent.settings)
    child.rewriting = parent.rewriting or parent.root
    _state = child
    for finder in [f for f in sys.meta_path if isinstance(f, _FollowFinder)]:
        sys.meta_path.remove(finder)
    if inherited is not None:
        inherited.stop_and_discard()
    begin(child)  # a fresh profiler too, if torch is imported


def _finish_multiprocessing_children() -> None:
    """``multiprocessing`` children leave through ``os._exit``: finish when their target ends.

    That is when ``Process.run`` returns, while the interpreter still runs normally (once
    ``_bootstrap`` returns, threading is shut down); a subclass with a ``run`` of its own
    finishes when ``_bootstrap`` returns.
    """
    from multiprocessing import process

    original = process.BaseProcess._bootstrap  # type: ignore[attr-defined]
    if getattr(original, "_ncompass", False):
        return
    original_run = process.BaseProcess.run

    def run(self: Any) -> None:
        code = 1
        try:
            original_run(self)
            code = 0
        except SystemExit as error:
            code = error.code if isinstance(error.code, int) else int(error.code is not None)
            raise
        finally:
            if process.current_process() is self:
                _quietly(lambda: finish(code))

    def bootstrap(self: Any, *args: Any, **kwargs: Any) -> int:
        state = current()
        if state is not None and not state.finished and not state.helper:
            # the process's name is known from here: a child killed later is named by it
            start = os.path.join(state.records, f"{state.pid}{START_SUFFIX}")
            _quietly(lambda: _write_record(start, identity(self.name)))
        code: int = original(self, *args, **kwargs)
        _quietly(lambda: finish(code))
        return code

    bootstrap._ncompass = True  # type: ignore[attr-defined]
    process.BaseProcess._bootstrap = bootstrap  # type: ignore[attr-defined]
    process.BaseProcess.run = run  # type: ignore[method-assign]


def _report_subprocess_exits() -> None:
    import subprocess

    original = subprocess.Popen._handle_exitstatus  # type: ignore[attr-defined]
    if getattr(original, "_ncompass", False):
        return

    def handle(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(self, *args, **kwargs)
        report_exit(self.pid, self.returncode)
        return result

    handle._ncompass = True  # type: ignore[attr-defined]
    subprocess.Popen._handle_exitstatus = handle  # type: ignore[attr-defined]


def _report_multiprocessing_exits() -> None:
    from multiprocessing import popen_fork

    original = popen_fork.Popen.poll
    if getattr(original, "_ncompass", False):
        return

    def poll(self: Any, *args: Any, **kwargs: Any) -> int | None:
        code: int | None = original(self, *args, **kwargs)
        if code is not None:
            report_exit(self.pid, code)
        return code

    poll._ncompass = True  # type: ignore[attr-defined]
    popen_fork.Popen.poll = poll  # type: ignore[method-assign]


def report_exit(pid: int, code: int | None) -> None:
    """Note a child's exit code for the run (its parent is the one process that learns it)."""
    state = current()
    if state is None or code is None or pid in state.reported_exits:
        return
    state.reported_exits.add(pid)
    _quietly(lambda: _write_record(os.path.join(state.folder, f"{EXIT_PREFIX}{pid}"), code))


def _write_record(path: str, value: object) -> None:
    """Write ``value`` as JSON to ``path`` at once (a reader never sees half of it)."""
    partial = f"{path}.{os.getpid()}.partial"
    try:
        data = _json_text(value).encode("ascii")
        descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(descriptor, view) :]
        finally:
            os.close(descriptor)
        os.replace(partial, path)
    except OSError:
        pass  # the run's folder is gone: the run has ended


def _json_text(value: object) -> str:
    """``json.dumps(value)``, by hand for the plain values of a record, so that a process that
    has not imported ``json`` does not import it for its records."""
    if "json" not in sys.modules:
        try:
            return _plain_json(value)
        except TypeError:
            pass  # something json knows better (a subclass, NaN): let it say
    import json

    return json.dumps(value)


def _plain_json(value: object) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if type(value) is int:
        return str(value)
    if type(value) is float and value == value and abs(value) != float("inf"):
        return repr(value)
    if type(value) is str:
        return _json_string(value)
    if type(value) is list or type(value) is tuple:
        return "[" + ", ".join(_plain_json(item) for item in value) + "]"
    if type(value) is dict and all(type(key) is str for key in value):
        items = (f"{_json_string(key)}: {_plain_json(item)}" for key, item in value.items())
        return "{" + ", ".join(items) + "}"
    raise TypeError(f"not a plain JSON value: {type(value).__name__}")


_JSON_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\b": "\\b",
    "\f": "\\f",
}


def _json_string(text: str) -> str:
    """A JSON string, ASCII only, as ``json.dumps`` writes it."""
    if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text:
        return f'"{text}"'
    parts = ['"']
    for char in text:
        code = ord(char)
        if char in _JSON_ESCAPES:
            parts.append(_JSON_ESCAPES[char])
        elif 0x20 <= code < 0x7F:
            parts.append(char)
        elif code < 0x10000:
            parts.append(f"\\u{code:04x}")
        else:  # a surrogate pair, as json writes it
            code -= 0x10000
            parts.append(f"\\u{0xD800 | (code >> 10):04x}\\u{0xDC00 | (code & 0x3FF):04x}")
    parts.append('"')
    return "".join(parts)


def _quietly(action: Callable[[], object]) -> None:
    """Run what following adds; a failure is one warning, never the program's own error."""
    try:
        action()
    except Exception as error:
        sys.stderr.write(f"ncompass: warning: following process {os.getpid()}: {error}\n")


__all__ = [
    "EXIT_PREFIX",
    "FOLLOW_ENV",
    "PROCESS_KEY",
    "SETTINGS_FILE",
    "Followed",
    "begin",
    "current",
    "enable_run_spec",
    "finish",
    "identity",
    "read_settings",
    "report_exit",
    "start",
    "start_profiler",
    "stop_root",
    "write_settings",
]
