"""The spec file format: YAML (or JSON) text → data with the line of every entry, validated into
a model with every error at its file and line, and back to YAML.

YAML is composed into nodes first so that each value keeps the line it was written on; pydantic's
error locations (``targets.0.functions.1.qualname``) are then mapped back to those lines, and the
spec's model keeps its entries' lines for the errors the rewriter finds later. Nothing here
names the spec's models: they use it (``RewriteConfig.from_yaml``) and pass themselves in.
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from ncompass.errors import SpecError
from ncompass.spec.bounded_yaml import MAX_YAML_BYTES, YamlLimitError, compose_bounded
from ncompass.spec.legacy import Version0Error, Version0Spec, convert_version_0, is_version_0

Location = tuple[str | int, ...]
Model = TypeVar("Model", bound=BaseModel)
# Keys whose values are kept as written (YAML would turn some hex hashes into numbers).
_VERBATIM_KEYS = frozenset({"sha256"})


def read_spec(path: Path) -> tuple[dict[str, Any], dict[Location, int]]:
    """The data of a spec file (YAML or JSON), and the 1-based line of every location in it.

    Raises:
        SpecError: the file is missing, unreadable, too large, not YAML/JSON, empty or not a
            mapping (naming the file and line, and what to do).
    """
    try:
        text = _read_bounded(path)
    except FileNotFoundError:
        raise SpecError("spec file not found; check the path given to --config", path) from None
    except (OSError, UnicodeDecodeError) as error:
        raise SpecError(f"cannot read spec file: {error}", path) from None
    data, lines = _parse_with_lines(text, path)
    if data is None:
        raise SpecError(
            "the spec file is empty; it needs at least 'version: 1' and 'targets:'", path, 1
        )
    if not isinstance(data, dict):
        raise SpecError("a spec must be a mapping with 'version' and 'targets'", path, 1)
    return data, lines


def _read_bounded(path: Path) -> str:
    """The text of a spec file no larger than :data:`MAX_YAML_BYTES`."""
    with open(path, "rb") as handle:
        raw = handle.read(MAX_YAML_BYTES + 1)
    if len(raw) > MAX_YAML_BYTES:
        raise SpecError(
            f"the spec file is larger than {MAX_YAML_BYTES >> 20} MiB, the most ncompass reads; "
            "a spec names targets and markers and is a few KiB",
            path,
        )
    return raw.decode("utf-8")


def validate_spec(
    model: type[Model], data: dict[str, Any], path: Path | None, lines: dict[Location, int]
) -> tuple[Model, dict[Location, int]]:
    """Validate spec data (version 0 or 1) as ``model``.

    Args:
        model: The spec's model class.
        data: The spec as parsed.
        path: The spec file, None for a dict.
        lines: The line of each location in ``data`` (from :func:`read_spec`; empty for a dict).

    Returns:
        The model, and the line of each of its version 1 locations (for a version 0 spec: the
        lines of the entries each came from).

    Raises:
        SpecError: the first problem, at its line (in a file) or location (in a dict); a
            :class:`SpecProblems` when the model finds several (it holds them all).
    """
    legacy: Version0Spec | None = None
    if is_version_0(data):
        try:
            legacy = convert_version_0(data)
        except Version0Error as error:
            line = _closest_line(error.location, lines) if path else None
            message = error.detail
            if path is None and error.location:
                message = f"{_dotted(error.location)}: {message}"
            raise SpecError(message, path, line) from None
        data = legacy.data
    try:
        validated = model.model_validate(data)
    except ValidationError as error:
        problems = [_problem(model, found, path, lines, legacy) for found in error.errors()]
        if len(problems) == 1:
            raise problems[0] from None
        raise SpecProblems(problems) from None
    return validated, (_v0_lines(lines, legacy) if legacy is not None else lines)


class SpecProblems(SpecError):
    """Several problems the model found in one spec: the first is the message (with a count
    of the others), ``problems`` holds them all, in file order as pydantic reports them."""

    def __init__(self, problems: list[SpecError]) -> None:
        first = problems[0]
        more = len(problems) - 1
        plural = "s" if more != 1 else ""
        also = f" (and {more} more problem{plural}: `ncompass spec validate` lists all)"
        super().__init__(first.detail + also, first.path, first.line)
        self.problems = problems


def _problem(
    model: type[BaseModel],
    error: Any,
    path: Path | None,
    lines: dict[Location, int],
    legacy: Version0Spec | None,
) -> SpecError:
    """One pydantic error as a spec error at its line (file) or location (dict)."""
    location: Location = tuple(error["loc"])
    shown = legacy.origin(location) if legacy is not None else location
    line = _closest_line(shown, lines) if path else None
    message = _describe(model, error, location)
    if path is None and shown:
        message = f"{_dotted(shown)}: {message}"
    return SpecError(message, path, line)


def _v0_lines(lines: dict[Location, int], legacy: Version0Spec) -> dict[Location, int]:
    """Version 1 locations → the lines of the version 0 entries they came from."""
    found: dict[Location, int] = {}
    for location, origin in legacy.origins.items():
        line = lines.get(origin)
        if line is not None:
            found[location] = line
    return found


def _describe(model: type[BaseModel], error: Any, location: Location) -> str:
    """One pydantic error as a sentence a user can act on."""
    kind = error["type"]
    if kind == "extra_forbidden" and location:
        key = str(location[-1])
        expected = _allowed_keys(model, location[:-1])
        close = difflib.get_close_matches(key, expected, n=1)
        hint = (
            f"; did you mean {close[0]!r}?" if close else f"; expected one of {', '.join(expected)}"
        )
        return f"unknown key {key!r}{hint}"
    if "lines" in location and kind != "value_error":
        return "lines must be [start, end]: two 1-based line numbers of the original file"
    if kind == "missing" and location:
        return f"missing required key {str(location[-1])!r}"
    message = str(error["msg"]).removeprefix("Value error, ")
    if location:
        return f"{location[-1]}: {message}" if kind != "value_error" else message
    return message


def _allowed_keys(model: type[BaseModel], location: Location) -> list[str]:
    """The keys a spec entry of ``model`` at ``location`` may have (aliases, as in YAML)."""
    for step in location:
        if isinstance(step, int):
            continue
        field = model.model_fields.get(str(step))
        if field is None:
            field = next((f for f in model.model_fields.values() if f.alias == step), None)
        annotation = getattr(field, "annotation", None)
        inner = getattr(annotation, "__args__", (annotation,))
        model_types = [t for t in inner if isinstance(t, type) and issubclass(t, BaseModel)]
        if not model_types:
            break
        model = model_types[0]
    return sorted(field.alias or name for name, field in model.model_fields.items())


def _dotted(location: Location) -> str:
    return ".".join(str(step) for step in location)


def _closest_line(location: Location, lines: dict[Location, int]) -> int | None:
    """The line of the deepest part of ``location`` the YAML recorded."""
    for depth in range(len(location), -1, -1):
        line = lines.get(location[:depth])
        if line is not None:
            return line
    return None


class _SpecDumper(yaml.SafeDumper):
    """Writes ``lines: [150, 162]`` on one line, as people write it."""


def _represent_list(dumper: yaml.SafeDumper, data: list[Any]) -> yaml.Node:
    flow = len(data) <= 4 and all(isinstance(item, int | float) for item in data)
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flow)


_SpecDumper.add_representer(list, _represent_list)


def dump_spec_yaml(data: dict[str, Any]) -> str:
    """Spec data (the version 1 dict) as YAML, keys in the order given."""
    return yaml.dump(data, Dumper=_SpecDumper, sort_keys=False, allow_unicode=True, width=100)


def _parse_with_lines(text: str, path: Path) -> tuple[Any, dict[Location, int]]:
    """Parse YAML (or JSON) into Python data and a map from location to 1-based line."""
    try:
        node = compose_bounded(text)
    except YamlLimitError as error:
        mark = error.problem_mark
        raise SpecError(str(error.problem), path, mark.line + 1 if mark else None) from None
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        line = mark.line + 1 if mark is not None else None
        problem = error.problem or "invalid YAML"
        raise SpecError(f"invalid YAML: {problem}", path, line) from None
    except yaml.YAMLError as error:
        if path.suffix == ".json":
            return _parse_json(text, path), {}
        raise SpecError(f"invalid YAML: {error}", path) from None
    if node is None:
        return None, {}
    builder = _LinedBuilder(path)
    return builder.build(node, ()), builder.lines


def _parse_json(text: str, path: Path) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise SpecError(f"invalid JSON: {error.msg}", path, error.lineno) from None
    except RecursionError:
        raise SpecError("invalid JSON: values nest too deeply", path) from None


class _LinedBuilder:
    """Builds Python data from a YAML node tree, recording the line of every location."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lines: dict[Location, int] = {}
        # scalars keep YAML's own typing rules (true, 1, 2.5, null, ...)
        self._scalars = yaml.SafeLoader("")

    def build(self, node: yaml.Node, location: Location) -> Any:
        self.lines[location] = node.start_mark.line + 1
        if isinstance(node, yaml.MappingNode):
            result: dict[Any, Any] = {}
            for key_node, value_node in node.value:
                key = self._scalars.construct_object(key_node)
                line = key_node.start_mark.line + 1
                if key in result:
                    raise SpecError(f"duplicate key {key!r}", self.path, line)
                child = (*location, key)
                if key in _VERBATIM_KEYS and isinstance(value_node, yaml.ScalarNode):
                    # an unquoted hash like 1e52... would otherwise become a float
                    self.lines[child] = value_node.start_mark.line + 1
                    result[key] = value_node.value
                else:
                    result[key] = self.build(value_node, child)
                self.lines[child] = line
            return result
        if isinstance(node, yaml.SequenceNode):
            return [self.build(item, (*location, i)) for i, item in enumerate(node.value)]
        return self._scalars.construct_object(node)


__all__ = ["Location", "SpecProblems", "dump_spec_yaml", "read_spec", "validate_spec"]
