"""The remote settings file: the default cluster address, a token, and defaults for ``submit``.

``~/.config/ncompass/remote.yaml`` (``$XDG_CONFIG_HOME`` is honoured; ``$NCOMPASS_REMOTE_CONFIG``
names another file)::

    address: http://head-node:8265     # the Ray dashboard (Jobs API)
    token: ...                          # sent as "Authorization: Bearer ..." (Ray token auth,
                                        # or an authenticating proxy in front of the dashboard)
    headers: {X-Team: perf}             # any other HTTP headers the dashboard needs
    gpu_resource: GPU                   # the Ray resource one rank reserves (e.g. a custom one)
    python: python                      # the cluster's Python, as the job's shell finds it
    max_upload_mb: 100                  # the upload size limit

The file holds a credential, so it is written owner-only: 0600 in a 0700 folder, atomically.
A file readable by others that holds a token is reported, never silently used as if safe.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ncompass import environment_variables
from ncompass._files import write_atomic
from ncompass.remote.errors import RemoteError
from ncompass.spec.bounded_yaml import load_bounded

CONFIG_ENV = environment_variables.NCOMPASS_REMOTE_CONFIG
CONFIG_NAME = "remote.yaml"
DEFAULT_MAX_UPLOAD_MB = 100.0
_PRIVATE_DIR_MODE = 0o700
_PRIVATE_FILE_MODE = 0o600


class RemoteConfig(BaseModel):
    """What ``remote.yaml`` may hold; every key is optional."""

    model_config = ConfigDict(extra="forbid")

    address: str | None = None
    token: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    gpu_resource: str = "GPU"
    python: str = "python"
    max_upload_mb: float = Field(default=DEFAULT_MAX_UPLOAD_MB, gt=0)

    def has_secret(self) -> bool:
        """Whether the file holds anything that must stay private."""
        return bool(self.token) or bool(self.headers)


@dataclass
class ConfigFile:
    """A loaded settings file and what was noticed while reading it.

    Attributes:
        path: Where the settings live (the file may not exist).
        config: The settings (defaults when the file does not exist).
        warnings: Problems worth telling the user that do not stop the command.
    """

    path: Path
    config: RemoteConfig
    warnings: list[str] = field(default_factory=list)


def config_path() -> Path:
    """``$NCOMPASS_REMOTE_CONFIG``, else ``$XDG_CONFIG_HOME/ncompass/remote.yaml``."""
    explicit = os.environ.get(CONFIG_ENV)
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base).expanduser() / "ncompass" / CONFIG_NAME


def load_config(path: Path | None = None) -> ConfigFile:
    """Read the settings file; a missing file gives the defaults.

    Raises:
        RemoteError: the file is not valid YAML or has unknown or malformed keys (the file,
            line or key is named).
    """
    path = path or config_path()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ConfigFile(path, RemoteConfig())
    except OSError as error:
        raise RemoteError(f"{path}: cannot read the remote settings ({error.strerror})") from None
    try:
        data: Any = load_bounded(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        raise RemoteError(f"{where}: not valid YAML ({getattr(error, 'problem', error)})") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise RemoteError(f"{path}: expected a mapping of settings (address: ..., token: ...)")
    try:
        config = RemoteConfig.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        key = ".".join(str(part) for part in first["loc"]) or "(top level)"
        raise RemoteError(f"{path}: setting {key!r}: {first['msg']}") from None
    loaded = ConfigFile(path, config)
    if config.has_secret() and _readable_by_others(path):
        loaded.warnings.append(
            f"{path} holds a token but others can read it; run: chmod 600 {path}"
        )
    return loaded


def save_config(config: RemoteConfig, path: Path | None = None) -> Path:
    """Write the settings owner-only (0600 in a 0700 folder), replacing the file atomically.

    Raises:
        RemoteError: the folder or file cannot be written.
    """
    path = path or config_path()
    data = config.model_dump(exclude_defaults=True)
    text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
    try:
        _private_folder(path.parent)
        # created 0600 before anything is written: the token is never readable by others
        write_atomic(path, text, fsync=True, mode=_PRIVATE_FILE_MODE)
    except OSError as error:
        raise RemoteError(f"{path}: cannot write the remote settings ({error.strerror})") from None
    return path


def _private_folder(folder: Path) -> None:
    ours = not folder.exists() or folder.name == "ncompass"
    folder.mkdir(parents=True, exist_ok=True, mode=_PRIVATE_DIR_MODE)
    if ours:
        # mkdir's mode is masked by the umask and ignored for a folder that already exists; a
        # folder of someone else's choosing ($NCOMPASS_REMOTE_CONFIG) is left as it is.
        os.chmod(folder, _PRIVATE_DIR_MODE)


def _readable_by_others(path: Path) -> bool:
    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    return bool(mode & (stat.S_IRWXG | stat.S_IRWXO))


__all__ = ["CONFIG_ENV", "ConfigFile", "RemoteConfig", "config_path", "load_config", "save_config"]
