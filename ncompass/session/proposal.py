"""What the planners propose: markers per module or file, the reasons, and what was dropped;
and how a proposal becomes the next spec version."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ncompass.errors import NcompassError
from ncompass.spec.models import MODULE_LEVEL, RewriteConfig, TargetSpec

if TYPE_CHECKING:
    from ncompass.rewrite.source import SourceModule
    from ncompass.rewrite.statements import StatementIndex


@dataclass(frozen=True)
class TargetKey:
    """A module by name, or a file by path."""

    module: str | None = None
    file: str | None = None

    @property
    def label(self) -> str:
        """How messages name it."""
        return self.module or Path(self.file or "").name


@dataclass
class Proposal:
    """Markers proposed for the next spec version, and those dropped (with why)."""

    markers: dict[TargetKey, dict[str, list[dict[str, Any]]]] = field(default_factory=dict)
    reasons: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)

    def add(self, key: TargetKey, kind: str, marker: dict[str, Any]) -> None:
        """Add one marker of ``kind`` (functions, calls, ranges) for ``key``."""
        self.markers.setdefault(key, {}).setdefault(kind, []).append(marker)

    @property
    def empty(self) -> bool:
        """Whether nothing is proposed."""
        return not any(kinds for kinds in self.markers.values())

    def count(self) -> int:
        """How many markers are proposed."""
        return sum(len(ms) for kinds in self.markers.values() for ms in kinds.values())


@dataclass(frozen=True)
class EntryPoint:
    """What a whole-run range (``ncompass.full_trace``) wraps: a function or a script's top."""

    key: TargetKey
    qualname: str = MODULE_LEVEL


class SessionInputError(NcompassError):
    """Feedback that cannot be placed: a missing module, lines without code."""


def target_spec(
    key: TargetKey, markers: dict[str, list[dict[str, Any]]], sha256: str
) -> TargetSpec:
    """A target holding ``markers`` (by kind), pinned to the source's ``sha256``."""
    data: dict[str, Any] = {"sha256": sha256, **{k: v for k, v in markers.items() if v}}
    if key.module is not None:
        data["module"] = key.module
    else:
        data["file"] = key.file
    return TargetSpec.model_validate(data)


class SourceReader(Protocol):
    """What reads the source of a target (the planner does, with a cache)."""

    def source_of(self, key: TargetKey) -> tuple[SourceModule, StatementIndex]:
        """The parsed source of a target."""
        ...


def extend_config(
    config: RewriteConfig, proposal: Proposal, sources: SourceReader
) -> RewriteConfig:
    """``config`` plus the proposal's markers, as a new spec."""
    targets = [target.model_copy(deep=True) for target in config.targets]
    for original, copy in zip(config.targets, targets, strict=True):
        copy._spec_path = original.spec_path
    for key, kinds in proposal.markers.items():
        source, _ = sources.source_of(key)
        targets.append(target_spec(key, kinds, source.sha256))
    extended = config.model_copy(update={"targets": targets})
    extended._path = config.path
    return extended


def key_for(target: str) -> TargetKey:
    if target.endswith(".py") or "/" in target:
        return TargetKey(file=str(Path(target).resolve()))
    return TargetKey(module=target)


__all__ = [
    "EntryPoint",
    "Proposal",
    "SessionInputError",
    "TargetKey",
    "extend_config",
    "key_for",
    "target_spec",
]
