"""The shape ``session.json`` must have, checked once when it is read.

A hand-edited or damaged state (a string where an iteration number goes, a list where the marker
times go) is refused with one :class:`~ncompass.session.store.SessionError`-style message naming
the file and the field, instead of a ``TypeError`` wherever the value is first used.
"""

from __future__ import annotations

from typing import Any

_NUMBER = (int, float)
_TEXT_OR_NONE = (str, type(None))
_OBJECT_OR_NONE = (dict, type(None))

# field -> (the types it may have, whether it must be there); absent optional fields take their
# defaults, as IterationRecord.from_dict and ProfilingSession._resume read them
_ITERATION_FIELDS: dict[str, tuple[tuple[type, ...], bool]] = {
    "iteration": ((int,), True),
    "trace_path": ((str,), True),
    "spec_version": ((int,), False),
    "spec_path": (_TEXT_OR_NONE, False),
    "summary_path": (_TEXT_OR_NONE, False),
    "markers": (_OBJECT_OR_NONE, False),
    "manifest": ((list, type(None)), False),
    "feedback": (_OBJECT_OR_NONE, False),
    "exit_code": ((int,), False),
    "note": (_TEXT_OR_NONE, False),
    "stacks_path": (_TEXT_OR_NONE, False),
    "discovery": (_OBJECT_OR_NONE, False),
    "answer": (_OBJECT_OR_NONE, False),
    "sites_ran": (_OBJECT_OR_NONE, False),
}
_STATE_FIELDS: dict[str, tuple[tuple[type, ...], bool]] = {
    "iterations": ((list,), True),
    "session": (_TEXT_OR_NONE, False),
    "config_version": ((int,), False),
    "pending_spec": (_OBJECT_OR_NONE, False),
    "feedback": ((list,), False),
    "provider": (_TEXT_OR_NONE, False),
    "predicted": ((list,), False),
    "setup_ms": ((dict,), False),
    "script": (_TEXT_OR_NONE, False),
}
_NAMES = {
    bool: "true or false",
    int: "an integer",
    float: "a number",
    str: "a string",
    list: "a list",
    dict: "an object",
    type(None): "null",
}


def state_shape_error(state: object) -> str | None:
    """What is wrong with a decoded ``session.json`` (``field is X, not Y``); None if nothing.

    Args:
        state: The decoded JSON.
    """
    if not isinstance(state, dict):
        return f"the file holds {_kind(state)}, not an object"
    wrong = _fields_error(state, _STATE_FIELDS, "")
    if wrong is not None:
        return wrong
    for key, value in (state.get("setup_ms") or {}).items():
        if not _is(value, _NUMBER):
            return f"setup_ms.{key} is {_kind(value)}, not a number"
    for index, record in enumerate(state["iterations"]):
        where = f"iterations[{index}]"
        if not isinstance(record, dict):
            return f"{where} is {_kind(record)}, not an object"
        wrong = _fields_error(record, _ITERATION_FIELDS, f"{where}.")
        if wrong is not None:
            return wrong
        for name, times in (record.get("markers") or {}).items():
            if not isinstance(times, dict):
                return f"{where}.markers.{name} is {_kind(times)}, not an object"
            for key in ("calls", "cpu_total_us", "cpu_self_us", "gpu_total_us"):
                value = times.get(key, 0)
                if not _is(value, (int,) if key == "calls" else _NUMBER):
                    expected = "an integer" if key == "calls" else "a number"
                    return f"{where}.markers.{name}.{key} is {_kind(value)}, not {expected}"
        for name, lines in (record.get("sites_ran") or {}).items():
            if not isinstance(lines, list) or not all(_is(line, (int,)) for line in lines):
                return f"{where}.sites_ran.{name} is {_kind(lines)}, not a list of line numbers"
    return None


def _fields_error(
    record: dict[str, Any], fields: dict[str, tuple[tuple[type, ...], bool]], prefix: str
) -> str | None:
    for key, (types, required) in fields.items():
        if key not in record:
            if required:
                return f"{prefix}{key} is missing"
            continue
        value = record[key]
        if not _is(value, types):
            expected = " or ".join(_NAMES[kind] for kind in types)
            return f"{prefix}{key} is {_kind(value)}, not {expected}"
    return None


def _is(value: object, types: tuple[type, ...]) -> bool:
    """``isinstance``, except that true and false are no numbers here."""
    if isinstance(value, bool):
        return bool in types
    return isinstance(value, types)


def _kind(value: object) -> str:
    shown = repr(value) if isinstance(value, (int, float, str)) else ""
    kind = _NAMES.get(type(value), type(value).__name__)
    return f"{kind} ({shown[:40]})" if shown and not isinstance(value, bool) else kind


__all__ = ["state_shape_error"]
