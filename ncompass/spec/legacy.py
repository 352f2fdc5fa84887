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
"context_values": ...}]}`` to wrap call sites. ``context_values`` is either a list of strings or a
list of ``{"name", "value", "type"}`` items (type ``literal`` or ``variable``); the first value
is the marker name, the others become the context's keyword ``values``.
"""

from __future__ import annotations

from typing import Any

from ncompass.errors import SpecError

_V0_MODULE_KEYS = frozenset(
    {
        "filePath",
        "class_func_context_wrappings",
        "func_line_range_wrappings",
        "class_replacements",
        "class_func_replacements",
    }
)
_SEED_CONTEXT_CLASSES = {
    "ncompass.trace.profile.torch.TorchRecordContext": "torch",
    "ncompass.trace.profile.nvtx.NvtxContext": "nvtx",
}
# A "class" key of class_func_context_wrappings that means "functions at module top level".
_TOP_LEVEL_KEYS = frozenset({"", "<module>", "__module__"})


def is_version_0(data: dict[str, Any]) -> bool:
    """Whether a spec dict has the seed's version 0 shape."""
    if data.get("version") == 0:
        return True
    return isinstance(data.get("targets"), dict)


def version_0_to_1(data: dict[str, Any]) -> dict[str, Any]:
    """Convert a version 0 spec dict to the version 1 dict shape.

    Raises:
        SpecError: when an entry cannot be understood; the message names the module and entry.
    """
    targets = data.get("targets") or {}
    if not isinstance(targets, dict):
        raise SpecError("version 0 'targets' must map module names to their wrappings")
    unknown_top = set(data) - {"version", "targets", "ai_analysis_targets", "full_trace_mode"}
    if unknown_top:
        raise SpecError(
            f"unknown top-level keys in version 0 spec: {', '.join(sorted(unknown_top))}"
        )
    converted: dict[str, Any] = {
        "version": 1,
        "targets": [_convert_module(name, entry) for name, entry in targets.items()],
    }
    for key in ("ai_analysis_targets", "full_trace_mode"):
        if key in data:
            converted[key] = data[key]
    return converted


def _convert_module(module_name: str, entry: Any) -> dict[str, Any]:
    if hasattr(entry, "model_dump"):  # the seed allowed ModuleConfig objects as values
        entry = entry.model_dump(exclude_none=True)
    if not isinstance(entry, dict):
        raise SpecError(f"version 0 target {module_name!r} must be a dict of wrappings")
    unknown = set(entry) - _V0_MODULE_KEYS
    if unknown:
        raise SpecError(
            f"version 0 target {module_name!r} has unknown keys {sorted(unknown)}; "
            f"expected some of {sorted(_V0_MODULE_KEYS)}"
        )
    target: dict[str, Any] = {}
    file_path = entry.get("filePath")
    if module_name == "__main__" and file_path:
        target["file"] = file_path
    else:
        target["module"] = module_name
    functions: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    for class_name, methods in (entry.get("class_func_context_wrappings") or {}).items():
        for method_name, wrapping in (methods or {}).items():
            qualname = (
                method_name if class_name in _TOP_LEVEL_KEYS else f"{class_name}.{method_name}"
            )
            if "wrap_calls" in wrapping:
                for call in wrapping["wrap_calls"]:
                    calls.append(
                        {"in": qualname, "call": call["call_pattern"], **_context_fields(call)}
                    )
            else:
                functions.append({"qualname": qualname, **_context_fields(wrapping)})
    ranges = [
        {
            "in": wrapping["function"],
            "lines": [wrapping["start_line"], wrapping["end_line"]],
            **_context_fields(wrapping),
        }
        for wrapping in entry.get("func_line_range_wrappings") or []
    ]
    replace = [
        {"name": name, "with": _dotted_to_module_attribute(path, parts_in_attribute=1)}
        for name, path in (entry.get("class_replacements") or {}).items()
    ]
    for class_name, methods in (entry.get("class_func_replacements") or {}).items():
        for method_name, path in methods.items():
            replace.append(
                {
                    "name": f"{class_name}.{method_name}",
                    "with": _dotted_to_module_attribute(path, parts_in_attribute=2),
                }
            )
    for key, value in (("functions", functions), ("calls", calls), ("ranges", ranges)):
        if value:
            target[key] = value
    if replace:
        target["replace"] = replace
    return target


def _context_fields(wrapping: dict[str, Any]) -> dict[str, Any]:
    """The v1 ``context``, ``name`` and ``values`` of a v0 wrapping."""
    fields: dict[str, Any] = {}
    context_class = wrapping.get("context_class")
    if context_class:
        fields["context"] = _context_class_to_v1(context_class)
    values = wrapping.get("context_values") or []
    for position, item in enumerate(values):
        key, value = _context_value(item)
        if position == 0:
            fields["name"] = value
        else:
            fields.setdefault("values", {})[key or f"arg{position}"] = value
    return fields


def _context_value(item: Any) -> tuple[str | None, str]:
    """One ``context_values`` item as (keyword, value); variables become name templates."""
    if isinstance(item, str):
        return None, item
    if isinstance(item, dict) and "value" in item:
        kind = item.get("type", "literal")
        if kind == "literal":
            return item.get("name"), str(item["value"])
        if kind == "variable":
            return item.get("name"), "{" + str(item["value"]) + "}"
        raise SpecError(f"context value type must be 'literal' or 'variable', got {kind!r}")
    raise SpecError(
        f"context_values items must be strings or {{name, value, type}} dicts, got {item!r}"
    )


def _context_class_to_v1(context_class: str) -> str:
    """Seed context classes become built-in context names; other dotted paths get a colon."""
    if context_class in _SEED_CONTEXT_CLASSES:
        return _SEED_CONTEXT_CLASSES[context_class]
    if ":" in context_class:
        return context_class
    module, _, attribute = context_class.rpartition(".")
    return f"{module}:{attribute}" if module else context_class


def _dotted_to_module_attribute(path: str, parts_in_attribute: int) -> str:
    """``"pkg.mod.Class"`` → ``"pkg.mod:Class"`` (``Class.method`` when two parts are attribute)."""
    if ":" in path:
        return path
    parts = path.split(".")
    if len(parts) <= parts_in_attribute:
        raise SpecError(f"replacement {path!r} must name a module and an attribute")
    return ".".join(parts[:-parts_in_attribute]) + ":" + ".".join(parts[-parts_in_attribute:])


__all__ = ["is_version_0", "version_0_to_1"]
