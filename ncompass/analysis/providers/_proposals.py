"""Checks on markers proposed by a provider that is not the built-in planner (a service, an LLM).

A proposal becomes code that runs in the user's process, so beyond the spec schema it may only
*add markers* to the modules it was shown: no replacements, no custom range contexts, no
``{expression}`` marker names (those are evaluated at run time), and line ranges that exist
in the source it was given.
"""

from __future__ import annotations

import copy
from typing import Any

from ncompass.analysis.providers.base import MarkerRequest
from ncompass.errors import SpecError

BUILTIN_CONTEXTS = frozenset({"torch", "nvtx", "torch+nvtx", "noop"})
_MARKER_KINDS = ("functions", "calls", "ranges")


class InvalidProposal(Exception):
    """A proposal breaks the schema or the rules above; the message says which entry and how."""


def check_proposal(targets: Any, request: MarkerRequest) -> list[dict[str, Any]]:
    """Validate proposed version 1 target dicts against the schema and the request's sources.

    Range anchors (``first``/``last``) and the target's ``sha256`` are filled in from the
    source when missing, so the spec keeps working if the file changes later.

    Returns:
        The targets, normalized (as ``RewriteConfig.to_dict`` writes them).

    Raises:
        InvalidProposal: Naming the first problem.
    """
    if not isinstance(targets, list) or not all(isinstance(t, dict) for t in targets):
        raise InvalidProposal("'targets' must be a list of target objects")
    targets = copy.deepcopy(targets)
    known = set(request.sources) | {
        str(t.get("module") or t.get("file"))
        for t in request.spec.get("targets", [])
        if isinstance(t, dict)
    }
    for target in targets:
        _check_target(target, request, known)
    from ncompass.spec.models import RewriteConfig

    try:
        config = RewriteConfig.from_dict({"version": 1, "targets": targets})
    except SpecError as error:
        raise InvalidProposal(f"not a valid spec: {error}") from error
    normalized: list[dict[str, Any]] = config.to_dict().get("targets", [])
    return normalized


def _check_target(target: dict[str, Any], request: MarkerRequest, known: set[str]) -> None:
    label = str(target.get("module") or target.get("file") or "?")
    if label not in known:
        shown = ", ".join(sorted(known)) or "none"
        raise InvalidProposal(f"target {label!r} is not a module it was shown ({shown})")
    if target.get("replace"):
        raise InvalidProposal(f"{label}: proposals may add markers, not replace code")
    for kind in _MARKER_KINDS:
        entries = target.get(kind) or []
        if not isinstance(entries, list):
            raise InvalidProposal(f"{label}: {kind!r} must be a list")
        for entry in entries:
            if isinstance(entry, dict):
                _check_entry(label, kind, entry)
    source = request.sources.get(label)
    if source is None:
        return
    digest = source.get("sha256")
    if digest:
        if target.get("sha256") not in (None, digest):
            raise InvalidProposal(f"{label}: sha256 does not match the source it was shown")
        target["sha256"] = digest
    lines = source.get("text", "").splitlines()
    for entry in target.get("ranges") or []:
        if isinstance(entry, dict):
            _fill_anchors(label, entry, lines)


def _check_entry(label: str, kind: str, entry: dict[str, Any]) -> None:
    context = entry.get("context")
    if context is not None and context not in BUILTIN_CONTEXTS:
        raise InvalidProposal(
            f"{label}: {kind} entry uses context {context!r}; proposals may only use "
            f"{', '.join(sorted(BUILTIN_CONTEXTS))}"
        )
    if entry.get("values"):
        raise InvalidProposal(f"{label}: {kind} entry has 'values' (only for custom contexts)")
    name = entry.get("name")
    if isinstance(name, str) and ("{" in name or "}" in name):
        raise InvalidProposal(
            f"{label}: marker name {name!r} has {{...}}, which would be evaluated as code"
        )


def _fill_anchors(label: str, entry: dict[str, Any], lines: list[str]) -> None:
    span = entry.get("lines")
    if not (isinstance(span, list | tuple) and len(span) == 2):
        return  # the schema check reports it
    start, end = span
    if not (isinstance(start, int) and isinstance(end, int)) or not 1 <= start <= end:
        return
    if end > len(lines):
        raise InvalidProposal(
            f"{label}: range {entry.get('name') or span} ends at line {end}, "
            f"but the module has {len(lines)} lines"
        )
    for key, number in (("first", start), ("last", end)):
        actual = lines[number - 1].strip()
        given = entry.get(key)
        if given is not None and str(given).strip() != actual:
            raise InvalidProposal(
                f"{label}: range {entry.get('name') or span}: line {number} is {actual!r}, "
                f"not {given!r}"
            )
        if actual:
            entry[key] = actual


__all__ = ["BUILTIN_CONTEXTS", "InvalidProposal", "check_proposal"]
