"""``ncompass spec validate`` and ``ncompass spec migrate``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from ncompass.cli._search_path import SEARCH_PATH_HELP, extend_search_path
from ncompass.errors import NcompassError, SpecError
from ncompass.spec.file_format import SpecProblems


@click.group("spec")
def spec_group() -> None:
    """Validate, update and migrate target specs."""


@spec_group.command("validate")
@click.argument("specs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--path", "-p", "paths", multiple=True, type=click.Path(file_okay=False), help=SEARCH_PATH_HELP
)
def validate_command(specs: tuple[Path, ...], paths: tuple[str, ...]) -> None:
    """Check SPECS against the code they target: every marker must match.

    Nothing is imported or run: targets are read as source, and a custom context class
    (module:Class) is checked by reading its module's source; what only importing could show
    is printed as a note. Exits 2 if any spec has a problem.
    """
    from ncompass.importer.validate import validate_spec
    from ncompass.spec.models import RewriteConfig

    extend_search_path(paths)
    failures: list[str] = []
    for spec in specs:
        context_notes: list[str] = []
        try:
            checks = validate_spec(RewriteConfig.from_yaml(spec), context_notes)
        except NcompassError as error:
            for problem in error.problems if isinstance(error, SpecProblems) else [error]:
                failures.append(str(problem))
                click.secho(f"✗ {problem}", fg="red", err=True)
            continue
        _echo_verdict(spec, checks)
        for note in context_notes:
            click.echo(f"    note: {note}")
        for check in checks:
            where = check.source or check.target.label
            if check.skipped:
                click.echo(f"    {check.target.label}: skipped ({check.skipped})")
                continue
            extra = f", {_count(check.replacements, 'replacement')}" if check.replacements else ""
            placed = _count(len(check.sites), "marker")
            click.echo(f"    {check.target.label} ({where}): {placed}{extra}")
            for note in check.notes:
                click.echo(f"      note: {note}")
    if failures:
        raise SystemExit(2)


@spec_group.command("update")
@click.argument("spec", type=click.Path(path_type=Path))
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    help="Write the updated spec here (default: update SPEC in place).",
)
@click.option("--force", is_flag=True, help="Replace OUTPUT if it exists.")
@click.option(
    "--path", "-p", "paths", multiple=True, type=click.Path(file_okay=False), help=SEARCH_PATH_HELP
)
def update_command(spec: Path, output: Path | None, force: bool, paths: tuple[str, ...]) -> None:
    """Carry SPEC over to the installed version of the code it targets.

    Every marker is placed again in the installed source: ranges by their anchors, functions
    and calls by name. The new spec is SPEC with only `lines:`, `sha256:` and `requires:`
    rewritten (comments stay). When a marker cannot be placed, nothing is written: the
    markers are listed with the closest names, and the command exits 2.
    """
    from ncompass.cli._report_file import write_report
    from ncompass.importer.spec_update import plan_update, updated_text
    from ncompass.spec.models import RewriteConfig

    extend_search_path(paths)
    config = RewriteConfig.from_yaml(spec)
    target = output or spec
    if output is not None and output.exists() and not force:
        raise SpecError(f"{output} exists; choose another name or pass --force to replace it")
    updates = plan_update(config)
    unplaced = [miss for update in updates for miss in update.unplaced]
    for miss in unplaced:
        where = f"{spec}:{miss.line}" if miss.line is not None else str(spec)
        click.secho(f"✗ {where}: {miss.name}: {miss.reason}", fg="red", err=True)
    if unplaced:
        click.echo(
            f"{spec}: not updated: {_count(len(unplaced), 'marker')} cannot be placed in the "
            "installed source; fix or remove them, then run `ncompass spec update` again",
            err=True,
        )
        raise SystemExit(2)
    for update in updates:
        moved = len(update.lines)
        what = [f"{_count(moved, 'range')} moved"] if moved else []
        if update.requires is not None:
            what.append(f"requires {update.requires}")
        if update.sha256 != update.target.sha256:
            what.append(f"sha256 of {update.source}")
        click.echo(f"    {update.target.label}: {', '.join(what) or 'unchanged'}")
    if not any(update.changed for update in updates) and output is None:
        click.echo(f"{spec}: already matches the installed source")
        return
    text = updated_text(spec.read_text(encoding="utf-8"), updates)
    write_report(target, text, [spec] if output is not None else [])  # in place: SPEC itself
    click.echo(f"wrote {target}")


@spec_group.command("migrate")
@click.argument("old", type=click.Path(path_type=Path))
@click.option(
    "-o", "--output", type=click.Path(path_type=Path), required=True, help="New YAML spec."
)
@click.option("--force", is_flag=True, help="Replace OUTPUT if it exists.")
def migrate_command(old: Path, output: Path, force: bool) -> None:
    """Convert a version 0 spec (the seed SDK's JSON/dict shape) to a version 1 YAML file."""
    from ncompass.cli._report_file import write_report
    from ncompass.overwrite_guard import refuse_overwriting_inputs
    from ncompass.spec.models import RewriteConfig

    refuse_overwriting_inputs(output, [old])  # even with --force: the old spec is the input
    config = RewriteConfig.from_yaml(old)
    if output.exists() and not force:
        raise SpecError(f"{output} exists; choose another name or pass --force to replace it")
    write_report(output, config.to_yaml(), [old])
    markers = sum(t.marker_count() for t in config.targets)
    click.echo(
        f"wrote {output}: version 1, {_count(len(config.targets), 'target')}, "
        f"{_count(markers, 'entry', 'entries')}"
    )


def _echo_verdict(spec: Path, checks: list[Any]) -> None:
    """``✓ SPEC: N markers in M targets``; no ✓ when every target was skipped (not checked)."""
    skipped = sum(1 for check in checks if check.skipped)
    if checks and skipped == len(checks):
        click.echo(f"- {spec}: not checked: {_count(skipped, 'target')} skipped")
        return
    markers = sum(len(check.sites) for check in checks)
    also = f" ({skipped} skipped)" if skipped else ""
    click.secho(
        f"✓ {spec}: {_count(markers, 'marker')} in {_count(len(checks) - skipped, 'target')}{also}",
        fg="green",
    )


def _count(number: int, one: str, many: str | None = None) -> str:
    """``1 marker``, ``2 markers``."""
    return f"{number} {one if number == 1 else many or one + 's'}"
