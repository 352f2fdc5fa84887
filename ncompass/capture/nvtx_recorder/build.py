"""Compiles the NVTX recorder's C source into the user's cache, once per source version."""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
from importlib import resources
from pathlib import Path

from ncompass._files import atomic_output, temporary_path
from ncompass.errors import CaptureError

SOURCE_NAME = "nvtx_recorder.c"
COMPILE_FLAGS: tuple[str, ...] = ("-O2", "-shared", "-fPIC", "-fvisibility=hidden", "-pthread")
_COMPILERS = ("cc", "gcc", "clang")


def recorder_source() -> bytes:
    """Returns the C source of the recorder shipped with ncompass."""
    return resources.files(__package__).joinpath(SOURCE_NAME).read_bytes()


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/ncompass/nvtx_recorder`` (``~/.cache`` when the variable is unset)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "ncompass" / "nvtx_recorder"


def library_path(cache_dir: Path | None = None) -> Path:
    """Where the recorder built from the current source lives (built or not).

    The name carries a hash of the source and flags, so an upgrade never loads a stale build.
    """
    digest = hashlib.sha256(recorder_source() + " ".join(COMPILE_FLAGS).encode()).hexdigest()
    return (cache_dir or default_cache_dir()) / f"libncompass_nvtx_{digest[:16]}.so"


def find_compiler(compiler: str | None = None) -> list[str] | None:
    """Finds a C compiler: ``compiler``, else ``$CC``, else ``cc``, ``gcc``, ``clang`` on PATH.

    Returns:
        The compiler command (``$CC`` may carry arguments, e.g. ``"ccache gcc"``), or None.
    """
    requested = compiler or os.environ.get("CC")
    candidates = [shlex.split(requested)] if requested else [[name] for name in _COMPILERS]
    for command in candidates:
        if command and shutil.which(command[0]):
            return [shutil.which(command[0]) or command[0], *command[1:]]
    return None


def build_recorder(cache_dir: Path | None = None, *, compiler: str | None = None) -> Path:
    """Returns the compiled recorder library, compiling it on first use.

    Safe to call from several processes at once: each compiles to its own temporary file and
    renames it into place atomically.

    Args:
        cache_dir: Where builds are kept; :func:`default_cache_dir` by default.
        compiler: The C compiler to use (command, may include arguments); by default ``$CC``,
            then ``cc``, ``gcc`` or ``clang`` from PATH.

    Returns:
        The path of the shared library, to put in ``NVTX_INJECTION64_PATH``.

    Raises:
        CaptureError: No C compiler is available, or compiling failed.
    """
    target = library_path(cache_dir)
    if target.exists():
        return target
    command = find_compiler(compiler)
    if command is None:
        looked_for = compiler or os.environ.get("CC") or ", ".join(_COMPILERS)
        raise CaptureError(
            f"no C compiler found (looked for {looked_for} on PATH): the NVTX recorder is "
            "built from source on first use. Install one (e.g. `apt-get install gcc`), set CC, "
            "or use Nsight Systems (`--nsys`) instead"
        )
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise CaptureError(f"cannot create the cache directory {target.parent}: {error}") from error
    source_file = temporary_path(target.with_suffix(".c"))
    try:
        source_file.write_bytes(recorder_source())
        with atomic_output(target) as temporary:
            result = subprocess.run(
                [*command, *COMPILE_FLAGS, "-o", str(temporary), str(source_file)],
                capture_output=True,
                text=True,
                check=False,
            )
            if result.returncode != 0:
                raise CaptureError(
                    f"compiling the NVTX recorder with {' '.join(command)} failed "
                    f"(exit code {result.returncode}):\n{result.stderr.strip()}"
                )
    except OSError as error:
        raise CaptureError(f"cannot build the NVTX recorder in {target.parent}: {error}") from error
    finally:
        source_file.unlink(missing_ok=True)
    return target
