"""A session's folder: spec versions, iteration records, saved configs, cached summaries.

Layout, under ``<trace_output_dir>/<session_name>/``::

    session.json          the iterations (spec version, trace, marker times) and pending state
    specs/v001.yaml       every spec version, each a valid ``ncompass run --config`` spec
    configs/NAME.yaml     configs saved by name (``save_config``)
    cache/                summaries by trace content hash (unless ``cache_dir`` says otherwise)

Traces themselves go to ``<trace_output_dir>/`` (``<session>-i001-suffix.json``). Nothing written
is ever overwritten: versions and iterations only count up, files are written atomically.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson

from ncompass._files import move_if_absent, removed_on_error, temporary_path, write_atomic
from ncompass.errors import NcompassError
from ncompass.session.history import IterationRecord
from ncompass.session.state_shape import state_shape_error
from ncompass.spec.models import RewriteConfig

STATE_FILE = "session.json"
_VERSION = re.compile(r"v(\d{3,})\.yaml$")
_NAME = re.compile(r"^[A-Za-z0-9._-]+$")


class SessionError(NcompassError):
    """A session's folder or state cannot be used (the message says which file and why)."""


class SessionStore:
    """The files of one session.

    Args:
        trace_dir: Where the session's traces go.
        name: The session name (letters, digits, ``.``, ``_``, ``-``).
        cache_dir: Where summaries are cached (default ``<session>/cache``).
    """

    def __init__(self, trace_dir: Path, name: str, cache_dir: Path | None = None) -> None:
        if not _NAME.match(name):
            raise SessionError(
                f"session name {name!r} may only use letters, digits, '.', '_' and '-'"
            )
        self.trace_dir = trace_dir
        self.name = name
        self.root = trace_dir / name
        self.cache_dir = cache_dir or self.root / "cache"

    @property
    def specs_dir(self) -> Path:
        """Where spec versions are kept."""
        return self.root / "specs"

    @property
    def configs_dir(self) -> Path:
        """Where named configs are kept."""
        return self.root / "configs"

    # -- spec versions ---------------------------------------------------------------------------

    def latest_version(self) -> int:
        """The highest spec version written so far (0 when none)."""
        if not self.specs_dir.is_dir():
            return 0
        versions = [
            int(m.group(1)) for p in self.specs_dir.iterdir() if (m := _VERSION.match(p.name))
        ]
        return max(versions, default=0)

    def spec_path(self, version: int) -> Path:
        """The file of spec version ``version``."""
        return self.specs_dir / f"v{version:03d}.yaml"

    def write_version(self, config: RewriteConfig) -> tuple[int, Path]:
        """Keep ``config`` as the next spec version; returns (version, file).

        The file appears whole or not at all, under the first free version number.
        """
        self.specs_dir.mkdir(parents=True, exist_ok=True)
        version = self.latest_version() + 1
        with removed_on_error(temporary_path(self.spec_path(version))) as temporary:
            temporary.write_text(config.to_yaml(), encoding="utf-8")
            while not move_if_absent(temporary, self.spec_path(version)):
                version += 1
        return version, self.spec_path(version)

    # -- named configs -----------------------------------------------------------------------------

    def config_path(self, name: str) -> Path:
        """The file of the config saved as ``name``."""
        if not _NAME.match(name):
            raise SessionError(
                f"config name {name!r} may only use letters, digits, '.', '_' and '-'"
            )
        return self.configs_dir / f"{name}.yaml"

    # -- state -------------------------------------------------------------------------------------

    def load_state(self) -> dict[str, Any]:
        """The saved state (iterations, pending spec), or an empty one for a new session."""
        path = self.root / STATE_FILE
        if not path.exists():
            return {"iterations": []}
        try:
            state = orjson.loads(path.read_bytes())
        except (OSError, orjson.JSONDecodeError) as error:
            raise SessionError(
                f"{path}: the session state cannot be read ({error}); move it aside to start "
                "the session afresh (traces and spec versions stay where they are)"
            ) from None
        wrong = state_shape_error(state)
        if wrong is not None:
            raise SessionError(
                f"{path}: not a session state file ({wrong}); fix it, or move it aside to start "
                "the session afresh (traces and spec versions stay where they are)"
            )
        return state  # type: ignore[no-any-return]

    def save_state(self, iterations: list[IterationRecord], extra: dict[str, Any]) -> None:
        """Write the session state atomically."""
        state = {"session": self.name, "iterations": [r.to_dict() for r in iterations], **extra}
        write_atomic(
            self.root / STATE_FILE, orjson.dumps(state, option=orjson.OPT_INDENT_2), fsync=True
        )


__all__ = ["STATE_FILE", "SessionError", "SessionStore"]
