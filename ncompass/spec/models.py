"""The target spec as validated pydantic models (version 1) and the public ``RewriteConfig``.

A spec names modules (or files) and, inside them, what to wrap in profiling ranges: whole
functions, call sites, runs of statements, and what to replace. Version 0 (the seed SDK's dict
shape) is accepted everywhere a spec is and converted on load (see :mod:`ncompass.spec.legacy`).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

from ncompass.errors import SpecError
from ncompass.spec.file_format import Location, dump_spec_yaml, read_spec, validate_spec
from ncompass.spec.legacy import is_version_0, version_0_to_1

SPEC_VERSION = 1
DEFAULT_CONTEXT = "torch"
MODULE_LEVEL = "<module>"
# the entry lists of a target, each entry a marker model with its own line
_MARKER_LISTS = ("functions", "calls", "ranges", "replace")


class _SpecModel(BaseModel):
    """Base of every spec model: unknown keys are errors, not silently ignored."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=False)

    # 1-based line in the spec file this entry starts on (set by the loader; None for dict specs).
    _line: int | None = PrivateAttr(default=None)

    @property
    def line(self) -> int | None:
        """The line in the spec file where this entry is written, when it came from a file."""
        return self._line


class _MarkerModel(_SpecModel):
    """Base of the markers: they remember the line of the ``context:`` that chose theirs."""

    # the marker's own `context:` line, or its spec's when merging wrote the spec's onto it
    _context_line: int | None = PrivateAttr(default=None)

    @property
    def context_line(self) -> int | None:
        """The line of the ``context:`` this marker's context comes from, when known."""
        return self._context_line


class FunctionMarker(_MarkerModel):
    """Wrap whole function or method bodies, chosen by qualname or glob."""

    qualname: str = Field(min_length=1)
    name: str | None = None
    context: str | None = None
    values: dict[str, Any] = Field(default_factory=dict)


class CallMarker(_MarkerModel):
    """Wrap the statements that call ``call`` inside the function ``in``."""

    in_: str = Field(alias="in", min_length=1)
    call: str = Field(min_length=1)
    name: str | None = None
    context: str | None = None
    values: dict[str, Any] = Field(default_factory=dict)


class RangeMarker(_MarkerModel):
    """Wrap a run of whole statements of one block, given by original line numbers."""

    in_: str = Field(alias="in", min_length=1)
    lines: tuple[int, int]
    first: str | None = None
    last: str | None = None
    name: str | None = None
    context: str | None = None
    values: dict[str, Any] = Field(default_factory=dict)

    @field_validator("lines")
    @classmethod
    def _lines_are_ordered(cls, value: tuple[int, int]) -> tuple[int, int]:
        start, end = value
        if start < 1 or end < start:
            raise ValueError(
                f"lines must be [start, end] with 1 <= start <= end, got {list(value)}"
            )
        return value


class Replacement(_SpecModel):
    """Swap a class or function for another object (``"module:attribute"``)."""

    name: str = Field(min_length=1)
    with_: str = Field(alias="with", min_length=1)

    @field_validator("with_")
    @classmethod
    def _is_module_attribute(cls, value: str) -> str:
        module, sep, attribute = value.partition(":")
        if not sep or not module or not attribute:
            raise ValueError(
                f"'with' must be 'module:attribute' (e.g. 'pkg.fast:Attention'), got {value!r}"
            )
        return value


class TargetSpec(_SpecModel):
    """One module (or file) and everything to instrument or replace in it."""

    module: str | None = None
    file: str | None = None
    requires: str | None = None
    sha256: str | None = None
    functions: list[FunctionMarker] = Field(default_factory=list)
    calls: list[CallMarker] = Field(default_factory=list)
    ranges: list[RangeMarker] = Field(default_factory=list)
    replace: list[Replacement] = Field(default_factory=list)

    # The spec file this target was written in (specs merged from several files keep theirs).
    _spec_path: Path | None = PrivateAttr(default=None)

    @property
    def spec_path(self) -> Path | None:
        """The spec file this target was written in, if it came from a file."""
        return self._spec_path

    @field_validator("requires")
    @classmethod
    def _is_requirement(cls, value: str | None) -> str | None:
        if value is None:
            return None
        from packaging.requirements import InvalidRequirement, Requirement

        try:
            Requirement(value)
        except InvalidRequirement as error:
            raise ValueError(
                f"requires {value!r} is not a requirement like 'torch>=2.1' ({error})"
            ) from None
        return value

    @field_validator("sha256")
    @classmethod
    def _is_sha256(cls, value: str | None) -> str | None:
        if value is None:
            return None
        digest = value.strip().lower()
        if len(digest) != 64 or any(ch not in "0123456789abcdef" for ch in digest):
            raise ValueError(
                "sha256 must be the 64 hex digits of the target file's hash "
                "(`sha256sum FILE`, or the value `ncompass session` writes)"
            )
        return digest

    @model_validator(mode="after")
    def _names_exactly_one_source(self) -> TargetSpec:
        if (self.module is None) == (self.file is None):
            raise ValueError(
                "a target needs exactly one of 'module' (dotted name) or 'file' (path)"
            )
        return self

    @property
    def label(self) -> str:
        """How this target is named in messages and default marker names."""
        if self.module is not None:
            return self.module
        return Path(self.file or "").name

    def marker_count(self) -> int:
        """How many entries (markers and replacements) this target has."""
        return len(self.functions) + len(self.calls) + len(self.ranges) + len(self.replace)


class RewriteConfig(_SpecModel):
    """A target spec: what to instrument, and how.

    Accepts version 1 (``targets`` is a list) and the seed SDK's version 0 dict shape
    (``targets`` maps module names to ``class_func_context_wrappings`` and friends), which is
    converted to version 1 on construction.

    Example:
        >>> RewriteConfig(targets=[{"module": "mypkg.attn", "functions": [{"qualname": "*"}]}])
    """

    version: Literal[1] = 1
    name: str | None = None
    context: str = DEFAULT_CONTEXT
    targets: list[TargetSpec] = Field(default_factory=list)
    ai_analysis_targets: list[str] = Field(default_factory=list)
    full_trace_mode: bool = False

    # The spec file this config was loaded from (None for dicts); relative `file:` targets and
    # error messages use it.
    _path: Path | None = PrivateAttr(default=None)
    _context_line: int | None = PrivateAttr(default=None)

    @model_validator(mode="before")
    @classmethod
    def _convert_version_0(cls, data: Any) -> Any:
        if isinstance(data, dict) and is_version_0(data):
            return version_0_to_1(data)
        return data

    @property
    def path(self) -> Path | None:
        """The spec file this config came from, if any."""
        return self._path

    @property
    def context_line(self) -> int | None:
        """The line of ``context:`` in the spec file, when it came from one and sets it."""
        return self._context_line

    @classmethod
    def from_yaml(cls, path: str | Path) -> RewriteConfig:
        """Load and validate a spec file (YAML or JSON, version 0 or 1).

        The config and its entries remember the file and the line each is written on.

        Raises:
            SpecError: naming the file and line of the first problem, and what to do.
        """
        spec_path = Path(path)
        data, lines = read_spec(spec_path)
        if "version" not in data and not is_version_0(data):
            raise SpecError(
                f"missing 'version' (this ncompass writes version {SPEC_VERSION}; add "
                "'version: 1')",
                spec_path,
                1,
            )
        config, lines = validate_spec(cls, data, spec_path, lines)
        config._remember_source(spec_path.resolve(), lines)
        return config

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RewriteConfig:
        """Validate a spec given as a dict (version 0 or 1).

        Raises:
            SpecError: describing the first problem and where in the dict it is.
        """
        if not isinstance(data, dict):
            raise SpecError(f"a spec must be a dict, got {type(data).__name__}")
        return validate_spec(cls, data, None, {})[0]

    def to_dict(self) -> dict[str, Any]:
        """The version 1 shape, without defaults, ready for YAML or JSON."""
        body = self.model_dump(by_alias=True, exclude_defaults=True, mode="json")
        body.pop("version", None)
        return {"version": SPEC_VERSION, **body}

    def to_yaml(self) -> str:
        """The spec as version 1 YAML text, keys in the order of the spec reference."""
        return dump_spec_yaml(self.to_dict())

    def digest(self) -> str:
        """A stable hash of everything that affects rewriting (part of the bytecode cache key)."""
        payload = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(payload.encode()).hexdigest()[:16]

    def targets_for_module(self, module_name: str) -> list[TargetSpec]:
        """The targets that name ``module_name``."""
        return [target for target in self.targets if target.module == module_name]

    def _remember_source(self, path: Path, lines: dict[Location, int]) -> None:
        """Remember the spec file and each entry's line; ``file:`` targets become absolute."""
        self._path = path
        self._line = lines.get(())
        self._context_line = lines.get(("context",))
        for index, target in enumerate(self.targets):
            target._spec_path = path
            if target.file is not None and not Path(target.file).is_absolute():
                target.file = str((path.parent / target.file).resolve())
            target._line = lines.get(("targets", index))
            for kind in _MARKER_LISTS:
                for position, marker in enumerate(getattr(target, kind)):
                    marker._line = lines.get(("targets", index, kind, position))
                    if isinstance(marker, _MarkerModel):
                        marker._context_line = lines.get(
                            ("targets", index, kind, position, "context")
                        )


__all__ = [
    "DEFAULT_CONTEXT",
    "MODULE_LEVEL",
    "SPEC_VERSION",
    "CallMarker",
    "FunctionMarker",
    "RangeMarker",
    "Replacement",
    "RewriteConfig",
    "TargetSpec",
]
