"""``ncompass spec update``: carry a spec over to the installed version of the code it targets.

When a library is upgraded, the file a spec was written against changes: line ranges move,
``sha256:`` no longer matches, ``requires:`` excludes the new version. Each marker is placed
again on its own in the installed source, ranges by their anchors (the stripped text of their
first and last lines, searched within the same function) and functions and calls by name; what
cannot be placed is listed with the planner's closest candidates. The new spec is the old text
with only ``lines:``, ``sha256:`` and ``requires:`` rewritten, so comments and layout stay.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ncompass.errors import SpecError
from ncompass.importer.lookup import file_source, module_source
from ncompass.rewrite.plan import plan_rewrite
from ncompass.rewrite.source import SourceModule, read_source
from ncompass.spec.models import CallMarker, FunctionMarker, RangeMarker, RewriteConfig, TargetSpec

Marker = FunctionMarker | CallMarker | RangeMarker


@dataclass(frozen=True)
class Unplaced:
    """A marker that matches nothing in the installed source, and the planner's reason."""

    name: str
    line: int | None
    reason: str


@dataclass
class TargetUpdate:
    """What changes for one target.

    Attributes:
        target: The target as the spec has it.
        source: The installed file it names (None when it cannot be found).
        sha256: The installed file's hash.
        requires: The new ``requires:`` (None: unchanged or absent).
        lines: New ``(start, end)`` per range marker's spec line, where it moved.
        unplaced: Markers that match nothing now.
    """

    target: TargetSpec
    source: Path | None
    sha256: str | None = None
    requires: str | None = None
    lines: dict[int, tuple[int, int]] = field(default_factory=dict)
    unplaced: list[Unplaced] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        """Anything to write for this target."""
        return bool(
            self.lines
            or self.requires is not None
            or (self.sha256 is not None and self.sha256 != self.target.sha256)
        )


def plan_update(config: RewriteConfig) -> list[TargetUpdate]:
    """Place every marker of ``config`` again in the installed source, one at a time.

    ``requires:`` guards are not applied (the point is to carry the spec to the version that is
    installed), except that a spec with one section per version keeps the sections of other
    versions as they are when one section fits the installed version. Nothing is imported or
    run.
    """
    updates: list[TargetUpdate] = []
    for target in config.targets:
        if _another_section_applies(target, config):
            continue  # this target is the section for another version of the same code
        try:
            path = module_source(target.module) if target.module else file_source(target.file or "")
        except SpecError as error:
            update = TargetUpdate(target, None)
            update.unplaced.append(Unplaced(target.label, target.line, error.detail))
            updates.append(update)
            continue
        source = read_source(path, target.module or path.name)
        update = TargetUpdate(target, path, sha256=source.sha256)
        update.requires = _requires_for_installed(target.requires)
        markers: list[Marker] = [*target.functions, *target.calls, *target.ranges]
        for marker in markers:
            _place(update, source, config, marker)
        updates.append(update)
    return updates


def _another_section_applies(target: TargetSpec, config: RewriteConfig) -> bool:
    """A target whose ``requires:`` is unmet while another target of the same module or file
    meets its own: a spec with one section per version keeps the other versions' sections."""
    from ncompass.importer.targets import unmet_requirement

    if unmet_requirement(target.requires) is None:
        return False
    return any(
        other is not target
        and (other.module, other.file) == (target.module, target.file)
        and unmet_requirement(other.requires) is None
        for other in config.targets
    )


def _place(
    update: TargetUpdate, source: SourceModule, config: RewriteConfig, marker: Marker
) -> None:
    """Plan one marker alone (so one failure does not hide the others) and note its lines."""
    kind = (
        "functions"
        if isinstance(marker, FunctionMarker)
        else "calls"
        if isinstance(marker, CallMarker)
        else "ranges"
    )
    alone = update.target.model_copy(
        update={"functions": [], "calls": [], "ranges": [], "replace": [], kind: [marker]}
    )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # drift notes: the new lines are the answer here
            plan = plan_rewrite(source, [alone], config)
    except SpecError as error:
        name = str(marker.name or getattr(marker, "qualname", None) or getattr(marker, "call", ""))
        reason = error.detail
        if isinstance(marker, RangeMarker):
            reason += _closest_lines(source, marker)
        elif isinstance(marker, FunctionMarker) and reason.startswith("no function"):
            reason += _likeliest_functions(source, marker.qualname)
        update.unplaced.append(Unplaced(name, marker.line, reason))
        return
    if isinstance(marker, RangeMarker) and marker.line is not None and plan.sites:
        site = plan.sites[0]
        if (site.start_line, site.end_line) != tuple(marker.lines):
            update.lines[marker.line] = (site.start_line, site.end_line)


def _likeliest_functions(source: SourceModule, qualname: str, most: int = 6) -> str:
    """`` (functions of M now, likeliest first: a, b)``: a renamed function is among them."""
    import difflib

    from ncompass.rewrite.statements import StatementIndex

    names = [scope.qualname for scope in StatementIndex(source).functions()]
    ratio = {n: difflib.SequenceMatcher(None, qualname, n).ratio() for n in names}
    likeliest = sorted(names, key=lambda n: -ratio[n])[:most]
    return f" (functions of {source.label} now, likeliest first: {', '.join(likeliest)})"


def _closest_lines(source: SourceModule, marker: RangeMarker) -> str:
    """Where each anchor is in the function now, or the closest lines to it."""
    import difflib

    from ncompass.rewrite.locate import LookupFailure, find_scope
    from ncompass.rewrite.statements import StatementIndex

    try:
        scope = find_scope(StatementIndex(source), marker.in_)
    except LookupFailure:
        return ""
    lines = {n: source.line(n).strip() for n in range(scope.start, scope.end + 1)}
    hints: list[str] = []
    for label, anchor in (("first", marker.first), ("last", marker.last)):
        if anchor is None:
            continue
        exact = [n for n, text in lines.items() if text == anchor.strip()]
        if exact:
            hints.append(f"{label} is at line {', '.join(map(str, exact))}")
            continue
        close = difflib.get_close_matches(anchor.strip(), list(lines.values()), n=2, cutoff=0.5)
        where = [f"{n} {text!r}" for text in close for n, t in lines.items() if t == text][:2]
        hints.append(f"{label} is nowhere; closest: {', '.join(where) or 'none'}")
    return f" ({scope.qualname}: {'; '.join(hints)})" if hints else ""


def _requires_for_installed(requires: str | None) -> str | None:
    """``dist>=X.Y,<X+1`` for the installed version when ``requires`` excludes it, else None."""
    if not requires:
        return None
    from importlib import metadata

    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.version import InvalidVersion, Version

    try:
        requirement = Requirement(requires)
        installed = Version(metadata.version(requirement.name))
    except (InvalidRequirement, InvalidVersion, metadata.PackageNotFoundError):
        return None
    if requirement.specifier.contains(installed, prereleases=True):
        return None
    major, minor = (*installed.release, 0, 0)[:2]
    return f"{requirement.name}>={major}.{minor},<{major + 1}"


def updated_text(text: str, updates: Sequence[TargetUpdate]) -> str:
    """The spec's text with each target's ``lines:``, ``sha256:`` and ``requires:`` rewritten.

    Targets and markers are found by the spec lines the loader recorded; a target without a
    ``sha256:`` gets one on the line after its ``module:``/``file:``.
    """
    lines = text.splitlines(keepends=True)
    starts = sorted(u.target.line for u in updates if u.target.line is not None)
    for update in sorted(updates, key=lambda u: u.target.line or 0, reverse=True):
        first = update.target.line  # from the last target up: an inserted line moves no other
        if first is None or not update.changed:
            continue
        following = [start for start in starts if start > first]
        last = (following[0] - 1) if following else len(lines)
        span = range(first - 1, last)
        for spec_line, (start, end) in update.lines.items():
            _substitute(lines, range(spec_line - 1, last), _LINES, rf"\g<1>[{start}, {end}]")
        if update.requires is not None:
            _substitute(lines, span, _REQUIRES, rf'\g<1>"{update.requires}"')
        if update.sha256 is not None and not _substitute(
            lines, span, _SHA256, rf"\g<1>{update.sha256}"
        ):
            _insert_sha256(lines, span, update.sha256)
    return "".join(lines)


_LINES = re.compile(r"""(["']?lines["']?\s*:\s*)\[\s*\d+\s*,\s*\d+\s*\]""")
_REQUIRES = re.compile(
    r"""(["']?requires["']?\s*:\s*)(?:"[^"]*"|'[^']*'|[^,}\n#]+?)(?=\s*(?:[,}#]|$))"""
)
_SHA256 = re.compile(r"""(["']?sha256["']?\s*:\s*["']?)[0-9a-fA-F]{64}""")
_WHERE = re.compile(r"""^(\s*(?:-\s+)?)(module|file)\s*:""")


def _substitute(lines: list[str], span: range, pattern: re.Pattern[str], replacement: str) -> bool:
    """Replace the first match of ``pattern`` on the lines of ``span``; whether there was one."""
    for index in span:
        new, count = pattern.subn(replacement, lines[index], count=1)
        if count:
            lines[index] = new
            return True
    return False


def _insert_sha256(lines: list[str], span: range, sha256: str) -> None:
    for index in span:
        match = _WHERE.match(lines[index])
        if match is None:
            continue
        indent = " " * len(match.group(1))
        lines.insert(index + 1, f"{indent}sha256: {sha256}\n")
        return


__all__ = ["TargetUpdate", "Unplaced", "plan_update", "updated_text"]
