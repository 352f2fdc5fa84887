"""``ncompass rewrite``: show what a spec does to a module or file."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ncompass.cli._search_path import SEARCH_PATH_HELP, extend_search_path

if TYPE_CHECKING:
    from ncompass.importer.targets import TargetTable


@click.command("rewrite")
@click.option(
    "--config",
    "-c",
    "configs",
    multiple=True,
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Target spec; repeat to merge several.",
)
@click.option("--diff", is_flag=True, help="Show a unified diff instead of the whole source.")
@click.option(
    "--path", "-p", "paths", multiple=True, type=click.Path(file_okay=False), help=SEARCH_PATH_HELP
)
@click.argument("target")
def rewrite_command(
    configs: tuple[Path, ...], diff: bool, paths: tuple[str, ...], target: str
) -> None:
    """Print the rewritten source of TARGET (a dotted module name or a file path).

    Nothing is imported or run.
    """
    from ncompass.errors import SpecError
    from ncompass.importer.lookup import module_source
    from ncompass.importer.targets import TargetTable
    from ncompass.rewrite.result import rewrite_path
    from ncompass.spec.merge import merge_specs
    from ncompass.spec.models import RewriteConfig

    extend_search_path(paths)
    config = merge_specs([RewriteConfig.from_yaml(path) for path in configs])
    table = TargetTable(config)
    is_file = target.endswith(".py") or os.sep in target
    path = Path(target) if is_file else module_source(target)
    entry = table.for_file(path) if is_file else table.for_module(target)
    label = target if not is_file else path.name
    if entry is None and not is_file:
        entry = table.for_file(path)
    if entry is None and is_file:  # the file of a module target, given by its path
        module = _module_of_file(table, path)
        if module is not None:
            entry, label = table.by_module[module], module
    if entry is None:
        named = sorted([*table.by_module, *table.by_file])
        hint = " (a module target is found by its file only when the module is on sys.path: add -p)"
        raise SpecError(
            f"no target named {target!r} in the spec; it targets: {', '.join(named) or 'nothing'}"
            + (hint if is_file and table.by_module else "")
        )
    result = rewrite_path(path, entry.targets, config, label)
    text = result.diff() if diff else result.readable_code
    click.echo(text, nl=not text.endswith("\n"))


def _module_of_file(table: TargetTable, path: Path) -> str | None:
    """The module target whose source is the file at ``path`` (found without importing)."""
    from ncompass.errors import SpecError
    from ncompass.importer.lookup import module_source

    wanted = os.path.realpath(path)
    for name in table.by_module:
        try:
            if os.path.realpath(module_source(name)) == wanted:
                return name
        except SpecError:
            continue
    return None
