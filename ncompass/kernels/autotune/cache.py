"""The persistent autotune cache: one JSON file per kernel version, Triton version and device.

A file holds the choices for every (dtype, shape bucket) tuned so far::

    $XDG_CACHE_HOME/ncompass/autotune/gemm-3f2a9c1b04de-triton3.9.0-nvidia-a100-sm_80.json
    {"format": 1, "kernel": "gemm", "source_hash": "...", "triton": "3.9.0",
     "device": {"name": "NVIDIA A100", "capability": "sm_80"},
     "entries": {"float16/m4096-n4096-k4096": {"config": {"BLOCK_M": 128, ...}, "ms": 0.41, ...}}}

Editing a kernel changes its source hash and so its file: stale choices are never read.
Writers take an exclusive ``flock`` on ``FILE.lock`` around read-merge-write and replace the file
atomically (``ncompass._files.write_atomic``, flushed to disk), so concurrent processes neither lose
each other's entries nor leave a half-written file; readers need no lock. A file that does not
parse is reported once, moved aside to ``FILE.corrupt`` by the next writer, and tuned again.
An entry whose config the kernel's search space can never give (a hand-edited block size of 65)
is reported once and refused: its calls run PyTorch until it is tuned again with ``force``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import threading
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ncompass import environment_variables
from ncompass._files import write_atomic
from ncompass.errors import NcompassWarning
from ncompass.kernels.autotune.config import KernelConfig
from ncompass.kernels.autotune.device import DeviceIdentity
from ncompass.kernels.autotune.spaces import SPACES
from ncompass.kernels.errors import KernelError
from ncompass.warning_location import stacklevel_outside

FORMAT = 1
CACHE_DIR_VARIABLE = environment_variables.NCOMPASS_AUTOTUNE_DIR


class AutotuneCacheWarning(NcompassWarning):
    """The autotune cache could not be read or written; tuning goes on without it."""


class UnusableCachedChoice(KernelError):
    """A cached config outside its kernel's search space: the call must not run it.

    Attributes:
        reason: What is wrong with the config (``BLOCK_M=65 is not one of 16, 32, 64, 128``).
    """

    def __init__(self, reason: str) -> None:
        super().__init__(f"the cached tuning choice is outside the search space: {reason}")
        self.reason = reason


def outside_space(kernel: str, config: KernelConfig) -> str | None:
    """Why ``kernel``'s search space can never give ``config``, or None (an unknown kernel has
    no space to check against)."""
    space = SPACES.get(kernel)
    return None if space is None else space.outside(config)


def default_cache_dir() -> Path:
    """``$NCOMPASS_AUTOTUNE_DIR``, else ``$XDG_CACHE_HOME/ncompass/autotune`` (``~/.cache``)."""
    override = os.environ.get(CACHE_DIR_VARIABLE)
    if override:
        return Path(override).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "ncompass" / "autotune"


@dataclass(frozen=True)
class TuningKey:
    """Everything a tuning result depends on.

    Attributes:
        kernel: The kernel's name (``gemm``, ``conv2d``, ``norm``).
        source_hash: Hash of the kernel's source files.
        triton: The Triton version (its compiler decides what a config costs).
        device: The device model.
        dtype: The operands' dtype.
        bucket: The problem's shape bucket.
    """

    kernel: str
    source_hash: str
    triton: str
    device: DeviceIdentity
    dtype: str
    bucket: str

    @property
    def entry(self) -> str:
        """The key of this result inside its file."""
        return f"{self.dtype}/{self.bucket}"

    @property
    def file_name(self) -> str:
        """The file holding this result."""
        triton = self.triton.replace("/", "-")
        return f"{self.kernel}-{self.source_hash[:12]}-triton{triton}-{self.device.slug()}.json"


@dataclass(frozen=True)
class CachedChoice:
    """A tuning result as stored.

    Attributes:
        config: The fastest candidate.
        ms: Its measured time.
        candidates: How many candidates were measured.
        timer: Which timer measured them (``cuda-events`` or ``cpu``).
    """

    config: KernelConfig
    ms: float
    candidates: int
    timer: str

    def to_json(self) -> dict[str, Any]:
        """The stored form."""
        return {
            "config": self.config.to_json(),
            "ms": self.ms,
            "candidates": self.candidates,
            "timer": self.timer,
        }

    @classmethod
    def from_json(cls, data: Any) -> CachedChoice:
        """Read the stored form.

        Raises:
            ValueError: it is not a choice.
        """
        if not isinstance(data, dict):
            raise ValueError("an entry is not an object")
        try:
            return cls(
                KernelConfig.from_json(data["config"]),
                float(data["ms"]),
                int(data["candidates"]),
                str(data["timer"]),
            )
        except (KeyError, TypeError) as error:
            raise ValueError(f"an entry lacks or mistypes {error}") from None


@dataclass(frozen=True)
class CacheFile:
    """One cache file as read back (for ``ncompass kernels list``).

    Attributes:
        unusable: Entry -> why its config is outside the kernel's search space.
    """

    path: Path
    kernel: str
    source_hash: str
    triton: str
    device: DeviceIdentity
    entries: dict[str, CachedChoice]
    unusable: dict[str, str] = dataclasses.field(default_factory=dict)


class TuningCache:
    """The autotune cache under ``root`` (default: :func:`default_cache_dir`)."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root if root is not None else default_cache_dir()
        self._warned: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def path(self, key: TuningKey) -> Path:
        """The file ``key`` lives in."""
        return self.root / key.file_name

    def lookup(self, key: TuningKey) -> CachedChoice | None:
        """The stored choice for ``key``, or None (missing, unreadable or corrupt file).

        Raises:
            UnusableCachedChoice: the stored config is outside the kernel's search space
                (reported once as a warning too).
        """
        path = self.path(key)
        try:
            document = _parse(path.read_text(encoding="utf-8"))
        except (FileNotFoundError, NotADirectoryError):
            return None
        except ValueError as error:
            message = (
                f"{path} is corrupt ({error}); tuning again (the next choice saved moves it "
                f"aside to {path.name}.corrupt)"
            )
            self._warn(path, "corrupt", message)
            return None
        except OSError as error:
            self._warn(path, "read", f"cannot read {path} ({error.strerror}); tuning again")
            return None
        entry = document["entries"].get(key.entry)
        if entry is None:
            return None
        try:
            choice = CachedChoice.from_json(entry)
        except ValueError as error:
            message = f"{path}: entry {key.entry!r} is invalid ({error}); tuning again"
            self._warn(path, "entry", message)
            return None
        reason = outside_space(key.kernel, choice.config)
        if reason is not None:
            message = (
                f"{path}: entry {key.entry!r} is outside the {key.kernel} kernel's search space "
                f"({reason}); its calls run PyTorch until `ncompass kernels tune --force` "
                "tunes that shape again (or the file is deleted)"
            )
            self._warn(path, f"outside {key.entry}", message)
            raise UnusableCachedChoice(reason)
        return choice

    def store(self, key: TuningKey, choice: CachedChoice) -> None:
        """Add (or replace) the choice for ``key``, keeping every other process's entries.

        A cache that cannot be written (read-only folder, full disk) is reported once; the
        choice still serves this process.
        """
        path = self.path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with self._lock, _exclusive(path.with_name(path.name + ".lock")):
                document = self._read_for_update(path, key)
                document["entries"][key.entry] = choice.to_json()
                write_atomic(path, json.dumps(document, indent=1, sort_keys=True), fsync=True)
        except OSError as error:
            self._warn(path, "write", f"cannot write the autotune cache {path} ({error})")

    def files(self) -> list[CacheFile]:
        """Every readable cache file under the root, sorted by name (corrupt ones skipped)."""
        return self.scan()[0]

    def scan(self) -> tuple[list[CacheFile], list[tuple[Path, str]]]:
        """Every cache file under the root, sorted by name: the readable ones, and
        ``(path, reason)`` of those that cannot be read or do not parse."""
        found: list[CacheFile] = []
        damaged: list[tuple[Path, str]] = []
        for path in sorted(self.root.glob("*.json")):
            try:
                document = _parse(path.read_text(encoding="utf-8"))
                entries = {
                    name: CachedChoice.from_json(value)
                    for name, value in document["entries"].items()
                }
            except OSError as error:
                damaged.append((path, f"cannot read: {error.strerror}"))
                continue
            except ValueError as error:
                damaged.append((path, f"corrupt: {error}"))
                continue
            device = document["device"]
            unusable = {
                name: reason
                for name, choice in entries.items()
                if (reason := outside_space(document["kernel"], choice.config)) is not None
            }
            found.append(
                CacheFile(
                    path,
                    document["kernel"],
                    document["source_hash"],
                    document["triton"],
                    DeviceIdentity(device["name"], device["capability"]),
                    entries,
                    unusable,
                )
            )
        return found, damaged

    def _read_for_update(self, path: Path, key: TuningKey) -> dict[str, Any]:
        """The current document (under the lock); a corrupt one is moved aside."""
        try:
            return _parse(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            pass
        except ValueError as error:
            aside = path.with_name(path.name + ".corrupt")
            os.replace(path, aside)
            message = f"{path} is corrupt ({error}); moved aside to {aside.name}, starting anew"
            self._warn(path, "corrupt", message)  # once: lookup may have reported it already
        return {
            "format": FORMAT,
            "kernel": key.kernel,
            "source_hash": key.source_hash,
            "triton": key.triton,
            "device": {"name": key.device.name, "capability": key.device.capability},
            "entries": {},
        }

    def _warn(self, path: Path, kind: str, message: str) -> None:
        """Warn once per file and kind of problem (a bad file is not reported at every call)."""
        if (str(path), kind) not in self._warned:
            self._warned.add((str(path), kind))
            warnings.warn(message, AutotuneCacheWarning, stacklevel=stacklevel_outside("ncompass"))


def _parse(text: str) -> dict[str, Any]:
    """A cache document, checked for shape.

    Raises:
        ValueError: not JSON, or not a cache document of this format.
    """
    document = json.loads(text)  # JSONDecodeError is a ValueError
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ValueError(f"not an autotune cache of format {FORMAT}")
    if not isinstance(document.get("entries"), dict) or not isinstance(
        document.get("device"), dict
    ):
        raise ValueError("no 'entries' or 'device' object")
    for field in ("kernel", "source_hash", "triton"):
        if not isinstance(document.get(field), str):
            raise ValueError(f"no {field!r}")
    return document


@contextlib.contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``lock_path`` (a plain file that is never removed).

    Removing lock files would let two processes lock different inodes of the same name.
    Without ``fcntl`` (Windows) writers are not serialised: the atomic replace still keeps the
    file whole, but an entry written at the same moment may be lost and tuned again later.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    with open(lock_path, "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


__all__ = [
    "CACHE_DIR_VARIABLE",
    "AutotuneCacheWarning",
    "CacheFile",
    "CachedChoice",
    "TuningCache",
    "TuningKey",
    "UnusableCachedChoice",
    "default_cache_dir",
    "outside_space",
]
