"""Run a script or a module as ``__main__``, the way ``python script.py`` / ``python -m`` would,
with the script itself rewritten when a spec targets its file.

Faithful means: ``sys.argv`` and ``sys.path[0]`` as Python sets them, a fresh ``__main__``
module (also reachable as ``__mp_main__``), ``if __name__ == "__main__":`` blocks run,
``SystemExit`` codes passed through, and uncaught exceptions printed through ``sys.excepthook``
with the user's own frames only, at the original file and lines.
"""

from __future__ import annotations

import builtins
import itertools
import os
import runpy
import shutil
import sys
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.machinery import SourceFileLoader
from types import CodeType, ModuleType, TracebackType

from ncompass.errors import NcompassError, RewriteError, SpecError
from ncompass.importer.hook import active_table
from ncompass.importer.loader import rewritten_code
from ncompass.importer.registry import REGISTRY, RewrittenModule
from ncompass.rewrite.source import decode_source

EXIT_UNCAUGHT = 1
EXIT_INTERRUPTED = 130


class ScriptNotFoundError(NcompassError):
    """The script to run does not exist, is not a file, or is not Python source text."""


@dataclass(frozen=True)
class ScriptOutcome:
    """How a script ended: its exit code and, when it raised, the exception."""

    exit_code: int
    error: BaseException | None = None


def run_script(path: str, args: list[str]) -> ScriptOutcome:
    """Run the file ``path`` as ``__main__`` with ``sys.argv = [path, *args]``.

    Raises:
        ScriptNotFoundError: the file does not exist.
        SpecError / RewriteError: the spec targets the script and does not match it.
    """
    path = script_path(path)
    real = os.path.realpath(path)
    absolute = os.path.abspath(path)  # Python's __main__.__file__ (not symlink-resolved)
    main = ModuleType("__main__")
    main.__dict__.update(
        __file__=absolute,
        __cached__=None,
        __package__=None,
        __spec__=None,
        __loader__=SourceFileLoader("__main__", absolute),
        __builtins__=builtins,  # the module, as in a script Python runs
    )
    with _as_main(main, [path, *args], os.path.dirname(real)):
        # compiled inside: a syntax error is reported as Python reports it (exit code 1)
        return _execute(lambda: exec(_script_code(real), main.__dict__))


def check_script(path: str) -> None:
    """Raise :class:`ScriptNotFoundError` unless ``path`` is a file of Python source text or a
    Python launcher on ``PATH`` (checked before a profiler starts, so a typo costs no profiler
    start-up and leaves no empty trace)."""
    resolved = script_path(path)
    try:
        with open(resolved, "rb") as handle:
            data = handle.read()
    except OSError as error:
        raise ScriptNotFoundError(f"{path}: cannot read the script ({error.strerror})") from None
    _script_text(path, data)  # a binary file is refused here too, before any profiler starts


def script_path(path: str) -> str:
    """The file to run for ``path``: the file itself, or for a bare name that is no file here a
    Python entry point on ``PATH`` (``torchrun``, ``accelerate``, ``deepspeed``: a small script
    whose first line names a Python interpreter), run as that launcher runs.

    Raises:
        ScriptNotFoundError: neither.
    """
    if os.path.isfile(path):
        return path
    launcher = shutil.which(path) if os.sep not in path else None
    if launcher is not None and _is_python_script(launcher):
        return launcher
    hint = "" if launcher is None else f" ({launcher} on PATH is not a Python script)"
    raise ScriptNotFoundError(f"{path}: no such script{hint}; check the path (or use -m MODULE)")


def _is_python_script(path: str) -> bool:
    try:
        with open(path, "rb") as file:
            first = file.readline(256)
    except OSError:
        return False
    return first.startswith(b"#!") and b"python" in first


def run_module(name: str, args: list[str]) -> ScriptOutcome:
    """Run module ``name`` as ``__main__`` like ``python -m name args...``.

    Raises:
        ScriptNotFoundError: no such module.
    """
    import importlib.util

    saved_argv, saved_path0 = list(sys.argv), sys.path[0] if sys.path else None
    # like `python -m`: the current folder comes first, also while the module is looked up
    if sys.path:
        sys.path[0] = os.getcwd()
    else:
        sys.path.append(os.getcwd())
    try:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError) as error:
            raise ScriptNotFoundError(
                f"cannot find module {name!r}: {error}; run from the folder that contains it "
                "or add that folder to PYTHONPATH"
            ) from None
        if spec is None:
            raise ScriptNotFoundError(
                f"no module named {name!r}; run from the folder that contains it or add that "
                "folder to PYTHONPATH"
            )
        sys.argv = [name, *args]
        return _execute(lambda: runpy.run_module(name, run_name="__main__", alter_sys=True))
    finally:
        sys.argv = saved_argv
        if saved_path0 is not None:
            sys.path[0] = saved_path0
        else:
            sys.path.pop(0)


def _script_code(real_path: str) -> CodeType:
    with open(real_path, "rb") as handle:
        data = handle.read()
    text = _script_text(real_path, data)
    table = active_table()
    entry = table.for_file(real_path) if table is not None else None
    if entry is None or table is None:
        return compile(text, real_path, "exec", dont_inherit=True)
    code, manifest = rewritten_code(
        os.path.basename(real_path), real_path, data, entry, table.config
    )
    REGISTRY.record(RewrittenModule("__main__", real_path, entry.digest, manifest))
    return code


def _script_text(shown_path: str, data: bytes) -> str:
    """The script's source text.

    Raises:
        ScriptNotFoundError: the file is no text (a binary, or bytes its encoding cannot
            decode): not the script's own error, so one line and exit code 2, not the
            tokenize traceback Python would print.
    """
    if b"\0" in data:
        raise ScriptNotFoundError(
            f"{shown_path}: a binary file (it holds NUL bytes), not a Python script; "
            "pass the .py file to run"
        )
    try:
        return decode_source(data)
    except (SyntaxError, UnicodeDecodeError, LookupError) as error:
        reason = error.msg if isinstance(error, SyntaxError) else str(error)
        raise ScriptNotFoundError(
            f"{shown_path}: not Python source text ({reason}); pass the .py file to run, "
            "or declare its encoding (# -*- coding: NAME -*-)"
        ) from None


@contextmanager
def _as_main(main: ModuleType, argv: list[str], directory: str) -> Iterator[None]:
    saved_main = sys.modules.get("__main__")
    saved_mp_main = sys.modules.get("__mp_main__")
    saved_argv = list(sys.argv)
    saved_path0 = sys.path[0] if sys.path else None
    sys.modules["__main__"] = main
    sys.modules["__mp_main__"] = main
    sys.argv = argv
    if sys.path:
        sys.path[0] = directory
    else:
        sys.path.append(directory)
    try:
        yield
    finally:
        sys.argv = saved_argv
        if saved_path0 is not None:
            sys.path[0] = saved_path0
        if saved_main is not None:
            sys.modules["__main__"] = saved_main
        if saved_mp_main is not None:
            sys.modules["__mp_main__"] = saved_mp_main
        else:
            sys.modules.pop("__mp_main__", None)


def _execute(body: Callable[[], object]) -> ScriptOutcome:
    try:
        body()
    except SystemExit as exit_:
        return ScriptOutcome(_exit_code(exit_.code))
    except NcompassError:
        raise  # a spec that does not match a module the script imports: a user error, exit 2
    except KeyboardInterrupt as interrupt:
        _report(interrupt)
        # Ctrl-C: 130; a SIGTERM turned into an interrupt carries its own (143)
        return ScriptOutcome(getattr(interrupt, "exit_code", EXIT_INTERRUPTED), interrupt)
    except BaseException as error:  # the user's uncaught exception, reported as Python would
        wrapped = spec_error_in_chain(error)
        if wrapped is not None:
            raise wrapped from None
        _report(error)
        return ScriptOutcome(EXIT_UNCAUGHT, error)
    return ScriptOutcome(0)


def spec_error_in_chain(error: BaseException) -> SpecError | RewriteError | None:
    """The spec error ``error`` was raised from or while handling, if any.

    A library that imports its modules lazily (transformers' ``_LazyModule``) re-raises an
    import failure as its own ``RuntimeError``; when the failure is a spec that does not match
    a module it imports, that spec error is what the user has to fix.
    """
    seen: set[int] = set()
    pending: list[BaseException | None] = [error]
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, SpecError | RewriteError):
            return current
        pending.extend((current.__context__, current.__cause__))  # the cause is looked at first
    return None


def _exit_code(code: object) -> int:
    """``SystemExit.code`` as a process exit code, printing a message code like Python does."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _report(error: BaseException) -> None:
    """Print an uncaught exception through ``sys.excepthook``, without ncompass's own frames."""
    _trim_chain(error)
    trimmed = error.__traceback__
    try:
        sys.excepthook(type(error), error, trimmed)
    except Exception:  # a broken excepthook must not hide the user's error
        traceback.print_exception(type(error), error, trimmed)


def _trim_chain(error: BaseException) -> None:
    """Trim the tracebacks of ``error`` and of the exceptions it was raised from or during
    (the default hook prints each exception's own traceback, whatever it is given)."""
    seen: set[int] = set()
    pending: list[BaseException | None] = [error]
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        current.with_traceback(_user_frames(current.__traceback__))
        pending.extend((current.__cause__, current.__context__))
        grouped = getattr(current, "exceptions", None)  # an exception group (3.11+)
        if isinstance(grouped, tuple):
            pending.extend(item for item in grouped if isinstance(item, BaseException))


def _user_frames(tb: TracebackType | None) -> TracebackType | None:
    """The traceback without ncompass's own frames (the runner, the loader, call helpers),
    runpy's and the import machinery's, as Python shows a plain run."""
    package = os.path.dirname(os.path.dirname(__file__)) + os.sep
    kept: list[TracebackType] = []
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        hidden = (
            filename.startswith((package, "<frozen ", "<ncompass ")) or filename == runpy.__file__
        )
        if not hidden:
            kept.append(tb)
        tb = tb.tb_next
    for earlier, later in itertools.pairwise(kept):
        earlier.tb_next = later
    if kept:
        kept[-1].tb_next = None
    return kept[0] if kept else None


__all__ = [
    "ScriptNotFoundError",
    "ScriptOutcome",
    "check_script",
    "run_module",
    "run_script",
    "spec_error_in_chain",
]
