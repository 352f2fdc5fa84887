"""Which modules and files a spec targets, looked up in O(1) from a module name or a path."""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from dataclasses import dataclass
from pathlib import Path

from ncompass._version import __version__
from ncompass.errors import NcompassWarning
from ncompass.spec.models import RewriteConfig, TargetSpec


class SkippedTargetWarning(NcompassWarning):
    """A target was skipped because its ``requires:`` guard is not met."""


@dataclass(frozen=True)
class ModuleTargets:
    """The targets naming one module or file, and the digest that keys their cached rewrite."""

    targets: tuple[TargetSpec, ...]
    digest: str


class TargetTable:
    """A spec indexed for the import hook's fast path.

    Args:
        config: The spec. Targets whose ``requires:`` is unmet are dropped, with a warning
            when no other target of the same module or file fits the installed version (a spec
            may hold one section per version of a library).

    Attributes:
        skipped: The modules (or files) no target fits, each with why its targets were skipped.
    """

    def __init__(self, config: RewriteConfig) -> None:
        self.config = config
        by_module: dict[str, list[TargetSpec]] = {}
        by_file: dict[str, list[TargetSpec]] = {}
        unmet: dict[tuple[str | None, str | None], list[str]] = {}
        for target in config.targets:
            reason = unmet_requirement(target.requires)
            if reason is not None:
                unmet.setdefault((target.module, target.file), []).append(reason)
            elif target.module is not None:
                by_module.setdefault(target.module, []).append(target)
            elif target.file is not None:
                by_file.setdefault(_real(target.file), []).append(target)
        # one section per version of the same code: only a module no section fits is skipped
        self.skipped = [
            (module or file or "?", reasons)
            for (module, file), reasons in unmet.items()
            if not (module in by_module or (file is not None and _real(file) in by_file))
        ]
        for label, reasons in self.skipped:
            warnings.warn(_skipped_message(config, label, reasons), SkippedTargetWarning, 3)
        self.by_module = {name: self._entry(ts) for name, ts in by_module.items()}
        self.by_file = {path: self._entry(ts) for path, ts in by_file.items()}
        # A module name can only be a file target if its last part is the file's stem
        # (or the package name, for an __init__.py): a set lookup rejects everything else.
        self.file_stems = frozenset(_stem(path) for path in self.by_file)

    def _entry(self, targets: list[TargetSpec]) -> ModuleTargets:
        payload = json.dumps(
            {
                "targets": [t.model_dump(by_alias=True, mode="json") for t in targets],
                "context": self.config.context,
                "version": __version__,
            },
            sort_keys=True,
        )
        return ModuleTargets(tuple(targets), hashlib.sha256(payload.encode()).hexdigest()[:20])

    def __bool__(self) -> bool:
        return bool(self.by_module or self.by_file)

    def for_module(self, name: str) -> ModuleTargets | None:
        """The targets naming module ``name``."""
        return self.by_module.get(name)

    def for_file(self, path: str | os.PathLike[str]) -> ModuleTargets | None:
        """The targets naming the file at ``path``."""
        return self.by_file.get(_real(path))

    def may_be_file_target(self, module_name: str) -> bool:
        """Cheap pre-check before resolving a module's path."""
        return bool(self.file_stems) and module_name.rpartition(".")[2] in self.file_stems


def _skipped_message(config: RewriteConfig, label: str, reasons: list[str]) -> str:
    """``ncompass: SPEC: skipping target T: why; how to carry the spec over``."""
    where = f"{config.path}: " if config.path is not None else ""
    message = f"ncompass: {where}skipping target {label}: {'; '.join(dict.fromkeys(reasons))}"
    other_version = any("is installed, the spec requires" in reason for reason in reasons)
    if other_version and config.path is not None:
        message += f"; `ncompass spec update {config.path} -o NEW.yaml` carries it over"
    return message


def _real(path: str | os.PathLike[str]) -> str:
    return os.path.realpath(os.fspath(path))


def _stem(path: str) -> str:
    file = Path(path)
    return file.parent.name if file.name == "__init__.py" else file.stem


def unmet_requirement(requires: str | None) -> str | None:
    """Why a ``requires:`` guard (``"torch>=2.1"``) is not met, or None when it is."""
    if not requires:
        return None
    from importlib import metadata

    from packaging.requirements import InvalidRequirement, Requirement

    try:
        requirement = Requirement(requires)
    except InvalidRequirement as error:
        return f"invalid requires {requires!r}: {error}"
    try:
        installed = metadata.version(requirement.name)
    except metadata.PackageNotFoundError:
        return f"{requirement.name} is not installed (requires {requires})"
    if requirement.specifier and not requirement.specifier.contains(installed, prereleases=True):
        return f"{requirement.name} {installed} is installed, the spec requires {requires}"
    return None


__all__ = ["ModuleTargets", "SkippedTargetWarning", "TargetTable", "unmet_requirement"]
