"""Version 0: the seed SDK's dict shape, converted to version 1.

Version 0 looks like::

    {"targets": {"my_module.attention": {
        "filePath": "/abs/path/attention.py",                      # optional
        "class_func_context_wrappings": {"Attention": {"forward": {
            "context_class": "ncompass.trace.profile.torch.TorchRecordContext",
            "context_values": ["attention.forward"]}}},          # or [{name, value, type}]
        "func_line_range_wrappings": [{"function": "forward", "start_line": 12, "end_line": 15,
                                       "context_class": "...", "context_values": [...]}],
        "class_replacements": {"Attention": "fast.attention.FastAttention"},
        "class_func_replacements": {"Attention": {"forward": "fast.kernels.Impl.forward"}}}},
     "ai_analysis_targets": [], "full_trace_mode": False}

A method entry may instead hold ``{"wrap_calls": [{"call_pattern": ..., "context_class": ...,
"context_values": ...}]}`` to wrap call sites. ``func_line_range_wrappings`` may also map a
function name to one wrapping (or a list of them) without ``"function"``. ``context_values`` is
either a list of strings or a list of ``{"name", "value", "type"}`` items (type ``literal`` or
``variable``); the first value is the marker name (a ``literal`` one is taken as written, braces
included), the others become the context's keyword ``values``.

The converter also says where each version 1 entry came from (:class:`Version0Spec`), so that
errors found later (a function that does not exist) point at the version 0 entry's line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ncompass.errors import SpecError

Location = tuple[str | int, ...]

_V0_MODULE_KEYS = frozenset(
    {
        "filePath",
        "class_func_context_wrappings",
        "func_line_range_wrappings",
        "class_replacements",
        "class_func_replacements",
    }
)
_CONTEXT_KEYS = frozenset({"context_class", "context_values"})
_RANGE_KEYS = _CONTEXT_KEYS | {"function", "start_line", "end_line"}
_SEED_CONTEXT_CLASSES = {
    "ncompass.trace.profile.torch.TorchRecordContext": "torch",
    "ncompass.trace.profile.nvtx.NvtxContext": "nvtx",
}
# A "class" key of class_func_context_wrappings that means "functions at module top level".
_TOP_LEVEL_KEYS = frozenset({"", "<module>", "__module__"})


class Version0Error(SpecError):
    """A version 0 entry that cannot be converted.

    Args:
        message: What is wrong and what to do.
        location: Where in the version 0 document (``("targets", "mod", "filePath")``).
    """

    def __init__(self, message: str, location: Location) -> None:
        self.location = location
        super().__init__(message)


@dataclass
class Version0Spec:
    """A version 0 spec converted: the version 1 dict, and for each version 1 entry the
    location of the version 0 entry it came from (``("targets", 0, "ranges", 1)`` →
    ``("targets", "mod", "func_line_range_wrappings", 1)``)."""

    data: dict[str, Any]
    origins: dict[Location, Location] = field(default_factory=dict)

    def origin(self, location: Location) -> Location:
        """The version 0 location of the deepest converted entry containing ``location``."""
        for depth in range(len(location), -1, -1):
            found = self.origins.get(location[:depth])
            if found is not None:
                return found
        return ()


def is_version_0(data: dict[str, Any]) -> bool:
    """Whether a spec dict has the seed's version 0 shape."""
    if data.get("version") == 0:
        return True
    return isinstance(data.get("targets"), dict)


def version_0_to_1(data: dict[str, Any]) -> dict[str, Any]:
    """Convert a version 0 spec dict to the version 1 dict shape.

    Raises:
        Version0Error: when an entry cannot be understood; the message names the entry.
    """
    return convert_version_0(data).data


def convert_version_0(data: dict[str, Any]) -> Version0Spec:
    """Convert a version 0 spec dict, remembering where each entry came from.

    Raises:
        Version0Error: when an entry cannot be understood (with its version 0 location).
    """
    targets = data.get("targets") or {}
    if not isinstance(targets, dict):
        raise Version0Error(
            "version 0 'targets' must map module names to their wrappings", ("targets",)
        )
    unknown_top = set(data) - {"version", "targets", "ai_analysis_targets", "full_trace_mode"}
    if unknown_top:
        raise Version0Error(
            f"unknown top-level keys in version 0 spec: {', '.join(sorted(map(str, unknown_top)))}",
            (sorted(map(str, unknown_top))[0],),
        )
    spec = Version0Spec({"version": 1, "targets": []})
    for index, (name, entry) in enumerate(targets.items()):
        spec.origins[("targets", index)] = ("targets", name)
        spec.data["targets"].append(_Module(spec, index, str(name)).convert(entry))
    for key in ("ai_analysis_targets", "full_trace_mode"):
        if key in data:
            spec.data[key] = data[key]
            spec.origins[(key,)] = (key,)
    return spec


class _Module:
    """Converts one version 0 module entry into a version 1 target."""

    def __init__(self, spec: Version0Spec, index: int, name: str) -> None:
        self.spec = spec
        self.index = index
        self.name = name
        self.where: Location = ("targets", name)

    def _add(
        self, target: dict[str, Any], kind: str, item: dict[str, Any], origin: Location
    ) -> None:
        entries = target.setdefault(kind, [])
        self.spec.origins[("targets", self.index, kind, len(entries))] = origin
        entries.append(item)

    def convert(self, entry: Any) -> dict[str, Any]:
        if hasattr(entry, "model_dump"):  # the seed allowed ModuleConfig objects as values
            entry = entry.model_dump(exclude_none=True)
        if not isinstance(entry, dict):
            raise Version0Error(
                f"version 0 target {self.name!r} must be a dict of wrappings", self.where
            )
        _check_keys(entry, _V0_MODULE_KEYS, f"version 0 target {self.name!r}", self.where)
        target: dict[str, Any] = {}
        file_path = entry.get("filePath")
        if self.name == "__main__" and file_path:
            target["file"] = file_path
        else:
            target["module"] = self.name
        self._functions_and_calls(target, entry.get("class_func_context_wrappings") or {})
        self._ranges(target, entry.get("func_line_range_wrappings") or [])
        self._replacements(target, entry)
        return target

    def _functions_and_calls(self, target: dict[str, Any], classes: Any) -> None:
        where = (*self.where, "class_func_context_wrappings")
        for class_name, methods in _mapping(classes, "{class: {method: wrapping}}", where):
            class_where = (*where, class_name)
            for method_name, wrapping in _mapping(methods, "{method: wrapping}", class_where):
                at = (*class_where, method_name)
                wrapping = _dict(wrapping, "a wrapping", at)
                qualname = (
                    method_name if class_name in _TOP_LEVEL_KEYS else f"{class_name}.{method_name}"
                )
                if "wrap_calls" not in wrapping:
                    _check_keys(wrapping, _CONTEXT_KEYS, "a wrapping", at)
                    marker = {"qualname": qualname, **_context_fields(wrapping, at)}
                    self._add(target, "functions", marker, at)
                    continue
                _check_keys(wrapping, {"wrap_calls"}, "a wrap_calls entry", at)
                calls = wrapping["wrap_calls"]
                if not isinstance(calls, list):
                    raise Version0Error("'wrap_calls' must be a list", (*at, "wrap_calls"))
                for position, call in enumerate(calls):
                    call_at = (*at, "wrap_calls", position)
                    call = _dict(call, "a wrap_calls item", call_at)
                    _check_keys(call, _CONTEXT_KEYS | {"call_pattern"}, "a call", call_at)
                    pattern = _required(call, "call_pattern", call_at)
                    marker = {"in": qualname, "call": pattern, **_context_fields(call, call_at)}
                    self._add(target, "calls", marker, call_at)

    def _ranges(self, target: dict[str, Any], wrappings: Any) -> None:
        where = (*self.where, "func_line_range_wrappings")
        items: list[tuple[Any, Location, str | None]] = []
        if isinstance(wrappings, list):
            items = [(item, (*where, n), None) for n, item in enumerate(wrappings)]
        elif isinstance(wrappings, dict):  # {function: wrapping or [wrappings]}
            for function, value in wrappings.items():
                listed = value if isinstance(value, list) else [value]
                at = (*where, function)
                items.extend(
                    (item, (*at, n) if isinstance(value, list) else at, str(function))
                    for n, item in enumerate(listed)
                )
        else:
            raise Version0Error(
                "'func_line_range_wrappings' must be a list of {function, start_line, "
                "end_line, ...} or map functions to them",
                where,
            )
        for item, at, function in items:
            item = _dict(item, "a line range wrapping", at)
            _check_keys(item, _RANGE_KEYS, "a line range wrapping", at)
            marker = {
                "in": function if function is not None else _required(item, "function", at),
                "lines": [_required(item, "start_line", at), _required(item, "end_line", at)],
                **_context_fields(item, at),
            }
            self._add(target, "ranges", marker, at)

    def _replacements(self, target: dict[str, Any], entry: dict[str, Any]) -> None:
        where = (*self.where, "class_replacements")
        for name, path in _mapping(entry.get("class_replacements") or {}, "{class: path}", where):
            at = (*where, name)
            replacement = {"name": name, "with": _module_attribute(path, 1, at)}
            self._add(target, "replace", replacement, at)
        where = (*self.where, "class_func_replacements")
        for class_name, methods in _mapping(
            entry.get("class_func_replacements") or {}, "{class: {method: path}}", where
        ):
            for method_name, path in _mapping(methods, "{method: path}", (*where, class_name)):
                at = (*where, class_name, method_name)
                replacement = {
                    "name": f"{class_name}.{method_name}",
                    "with": _module_attribute(path, 2, at),
                }
                self._add(target, "replace", replacement, at)


def _mapping(value: Any, shape: str, at: Location) -> list[tuple[str, Any]]:
    if not isinstance(value, dict):
        raise Version0Error(f"expected a mapping {shape}, got {type(value).__name__}", at)
    return [(str(key), item) for key, item in value.items()]


def _dict(value: Any, what: str, at: Location) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise Version0Error(f"{what} must be a mapping, got {value!r}", at)
    return value


def _check_keys(
    entry: dict[str, Any], allowed: set[str] | frozenset[str], what: str, at: Location
) -> None:
    unknown = sorted(str(key) for key in set(entry) - allowed)
    if unknown:
        raise Version0Error(
            f"{what} has unknown keys {unknown}; expected some of {sorted(allowed)}",
            (*at, unknown[0]),
        )


def _required(entry: dict[str, Any], key: str, at: Location) -> Any:
    if key not in entry:
        raise Version0Error(f"missing required key {key!r}", at)
    return entry[key]


def _context_fields(wrapping: dict[str, Any], at: Location) -> dict[str, Any]:
    """The v1 ``context``, ``name`` and ``values`` of a v0 wrapping."""
    fields: dict[str, Any] = {}
    context_class = wrapping.get("context_class")
    if context_class:
        fields["context"] = _context_class_to_v1(context_class)
    values = wrapping.get("context_values") or []
    if not isinstance(values, list):
        raise Version0Error("'context_values' must be a list", (*at, "context_values"))
    for position, item in enumerate(values):
        key, value = _context_value(item, (*at, "context_values", position), position == 0)
        if position == 0:
            fields["name"] = value
        else:
            fields.setdefault("values", {})[key or f"arg{position}"] = value
    return fields


def _context_value(item: Any, at: Location, is_name: bool) -> tuple[str | None, str]:
    """One ``context_values`` item as (keyword, value); variables become name templates."""
    if isinstance(item, str):
        return None, item
    if isinstance(item, dict) and "value" in item:
        kind = item.get("type", "literal")
        if kind == "literal":
            text = str(item["value"])
            if is_name:  # braces in a literal name are text, not a template
                text = text.replace("{", "{{").replace("}", "}}")
            return item.get("name"), text
        if kind == "variable":
            return item.get("name"), "{" + str(item["value"]) + "}"
        raise Version0Error(f"context value type must be 'literal' or 'variable', got {kind!r}", at)
    raise Version0Error(
        f"context_values items must be strings or {{name, value, type}} dicts, got {item!r}", at
    )


def _context_class_to_v1(context_class: str) -> str:
    """Seed context classes become built-in context names; other dotted paths get a colon."""
    if context_class in _SEED_CONTEXT_CLASSES:
        return _SEED_CONTEXT_CLASSES[context_class]
    if ":" in context_class:
        return context_class
    module, _, attribute = context_class.rpartition(".")
    return f"{module}:{attribute}" if module else context_class


def _module_attribute(path: Any, parts_in_attribute: int, at: Location) -> str:
    """``"pkg.mod.Class"`` → ``"pkg.mod:Class"`` (``Class.method`` when two parts are attribute)."""
    if not isinstance(path, str):
        raise Version0Error(f"a replacement must be a dotted path string, got {path!r}", at)
    if ":" in path:
        return path
    parts = path.split(".")
    if len(parts) <= parts_in_attribute:
        raise Version0Error(f"replacement {path!r} must name a module and an attribute", at)
    return ".".join(parts[:-parts_in_attribute]) + ":" + ".".join(parts[-parts_in_attribute:])


__all__ = ["Version0Error", "Version0Spec", "convert_version_0", "is_version_0", "version_0_to_1"]
