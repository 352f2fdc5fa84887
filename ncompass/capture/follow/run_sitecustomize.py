"""The ``sitecustomize.py`` of a run that follows its processes (``tree`` copies this file).

Every new interpreter of the run imports it at start-up, from the run's folder first on
``PYTHONPATH``. When ``NCOMPASS_FOLLOW`` is set it starts
:mod:`~ncompass.capture.follow.bootstrap`, loaded straight from its file in the ``ncompass``
this interpreter would import, without running the ``ncompass`` package's ``__init__`` (and
what that imports): a child that never imports a target or torch pays for the bootstrap alone.
Then it imports the ``sitecustomize`` it hides (the user's own, or the Python's).

Standard library only, and only modules every interpreter has loaded before its
``sitecustomize``. Compiled code is kept in the run's folder (the bootstrap's, and this file's
own when Python writes no bytecode), so that only the run's first process compiles anything.
Imported under any other name (by a tool that walks the package), it does nothing.
"""

import marshal
import os
import sys

TYPE_CHECKING = False  # not typing's: this file imports nothing the interpreter has not loaded
if TYPE_CHECKING:
    from importlib.abc import Loader
    from types import CodeType, ModuleType

_BOOTSTRAP = "ncompass.capture.follow.bootstrap"
_FOLLOW_ENV = "NCOMPASS_FOLLOW"
_CODE_FILE = "bootstrap.code"


def _bootstrap_file() -> "str | None":
    """The bootstrap's source file in the ``ncompass`` an import would find, not imported."""
    for finder in sys.meta_path:
        find_spec = getattr(finder, "find_spec", None)
        spec = find_spec("ncompass", None) if find_spec is not None else None
        if spec is not None:
            for folder in spec.submodule_search_locations or ():
                path = os.path.join(folder, "capture", "follow", "bootstrap.py")
                if os.path.isfile(path):
                    return path
            return None
    return None


def _load(path: str) -> "ModuleType":
    """Load the bootstrap from ``path`` under its own name, from the run's compiled code."""
    try:  # importlib.util's recipe, from the modules the interpreter runs on (already loaded)
        from _frozen_importlib import module_from_spec
        from _frozen_importlib_external import spec_from_file_location
    except ImportError:
        from importlib.util import module_from_spec, spec_from_file_location
    spec = spec_from_file_location(_BOOTSTRAP, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    code = _code(spec.loader, path)
    module = module_from_spec(spec)
    sys.modules[_BOOTSTRAP] = module
    try:
        exec(code, module.__dict__)
    except BaseException:
        sys.modules.pop(_BOOTSTRAP, None)
        raise
    return module


def _code(loader: "Loader", path: str) -> "CodeType":
    """The bootstrap's compiled code, kept in the run's folder by the first process to need it.

    Compiling it costs a child more than all the rest of following, and Python's own cache
    beside the source may be missing (``PYTHONDONTWRITEBYTECODE``, a read-only install).
    """
    stat = os.stat(path)
    key = (path, stat.st_mtime_ns, stat.st_size, sys.implementation.cache_tag)
    cache = os.path.join(os.environ[_FOLLOW_ENV], _CODE_FILE)
    try:
        with open(cache, "rb") as stream:
            if marshal.load(stream) == key:
                code: CodeType = marshal.load(stream)
                return code
    except (OSError, EOFError, ValueError, TypeError):
        pass
    code = loader.get_code(_BOOTSTRAP)  # type: ignore[attr-defined]
    _write_at_once(cache, marshal.dumps(key) + marshal.dumps(code))
    return code


def _keep_compiled() -> None:
    """Write this file's bytecode where the next process's import looks for it.

    Python writes none under ``PYTHONDONTWRITEBYTECODE``, and then every process of the run
    would compile this file again; the run's folder is private and goes with the run. The
    format is CPython's (PEP 552, checked by the source's time and size), written without
    importing ``py_compile`` and what it pulls in.
    """
    cached = globals().get("__cached__")
    if not cached or os.path.exists(cached):
        return
    try:
        from _frozen_importlib_external import MAGIC_NUMBER
    except ImportError:
        from importlib.util import MAGIC_NUMBER
    try:
        with open(__file__, "rb") as stream:
            source = stream.read()
        data = bytearray(MAGIC_NUMBER)
        for field in (0, int(os.stat(__file__).st_mtime), len(source)):
            data += (field & 0xFFFFFFFF).to_bytes(4, "little")
        data += marshal.dumps(compile(source, __file__, "exec", dont_inherit=True))
        os.makedirs(os.path.dirname(cached), exist_ok=True)
    except OSError:
        return  # the run has ended and taken its folder
    _write_at_once(cached, bytes(data))


def _write_at_once(path: str, data: bytes) -> None:
    """Write ``path`` so that no other process ever reads half of it."""
    partial = f"{path}.{os.getpid()}.partial"
    try:
        with open(partial, "wb") as stream:
            stream.write(data)
        os.replace(partial, path)
    except OSError:
        pass  # the run has ended and taken its folder: the next process compiles again


def _follow() -> None:
    try:
        bootstrap = _bootstrap()
    except Exception:
        command = " ".join(getattr(sys, "orig_argv", None) or sys.argv)
        sys.stderr.write(
            f"ncompass: warning: process {os.getpid()} ({command}) cannot import ncompass "
            "(another Python environment?); it runs without markers or recording\n"
        )
        return
    bootstrap.start()
    if sys.dont_write_bytecode:
        _keep_compiled()


def _bootstrap() -> "ModuleType":
    loaded = sys.modules.get(_BOOTSTRAP)
    if loaded is not None:
        return loaded
    path = _bootstrap_file()
    if path is not None:
        return _load(path)
    from ncompass.capture.follow import bootstrap  # no source file (a zipped install): import

    return bootstrap


def _chain() -> None:
    """Import the ``sitecustomize`` this one hides, as if this one were not there."""
    here = os.path.dirname(os.path.abspath(__file__))
    saved = list(sys.path)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    mine = sys.modules.pop("sitecustomize", None)
    try:
        import sitecustomize  # type: ignore[import-not-found]  # noqa: F401
    except ImportError:
        if mine is not None:
            sys.modules["sitecustomize"] = mine
    finally:
        sys.path[:] = saved


if __name__ == "sitecustomize":
    if os.environ.get(_FOLLOW_ENV):
        _follow()
    _chain()
