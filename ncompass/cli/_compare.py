"""``ncompass compare BEFORE... -- AFTER...``: did it get faster, where, and is it real?"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click
import orjson

_SEPARATOR = "--"
REGRESSION_EXIT_CODE = 1


class _TwoSidedCommand(click.Command):
    """Splits the traces at ``--``: options may come anywhere, files after ``--`` are AFTER."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if _SEPARATOR not in args:
            if any(arg in ("-h", "--help") for arg in args):
                return super().parse_args(ctx, args)
            raise click.UsageError(
                "separate the two sides with --: ncompass compare BEFORE... -- AFTER...", ctx
            )
        cut = args.index(_SEPARATOR)
        head, tail = args[:cut], args[cut + 1 :]
        ctx.meta["compare.after_count"] = len(_positionals(self, ctx, tail))
        return super().parse_args(ctx, head + tail)


def _positionals(command: click.Command, ctx: click.Context, args: list[str]) -> list[str]:
    """The arguments that are not options or option values."""
    takes_value: dict[str, bool] = {}
    for param in command.get_params(ctx):
        if isinstance(param, click.Option):
            for name in (*param.opts, *param.secondary_opts):
                takes_value[name] = not (param.is_flag or param.count)
    found: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg.startswith("-") and arg.split("=", 1)[0] in takes_value:
            skip = takes_value[arg.split("=", 1)[0]] and "=" not in arg
        else:
            found.append(arg)
    return found


@click.command("compare", cls=_TwoSidedCommand)
@click.argument(
    "traces",
    nargs=-1,
    metavar="BEFORE... -- AFTER...",
    type=click.Path(dir_okay=False, path_type=Path),
)
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
@click.option(
    "--html",
    "html_path",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="OUT.html",
    help="Also write a self-contained HTML page with sortable tables.",
)
@click.option(
    "--top",
    type=click.IntRange(min=1),
    default=20,
    show_default=True,
    metavar="N",
    help="Rows per table in the markdown report.",
)
@click.option(
    "--fail-if-slower",
    "threshold_text",
    metavar="PCT",
    help="Exit 1 when the run (or --marker) is really slower by more than PCT, e.g. 5%.",
)
@click.option(
    "--marker", metavar="NAME", help="With --fail-if-slower: judge this marker, not the run."
)
@click.option(
    "--noise",
    "noise_text",
    metavar="PCT",
    default="10%",
    show_default=True,
    help="Changes within ±PCT are 'same' whatever their interval (run-to-run noise).",
)
@click.pass_context
def compare_command(
    ctx: click.Context,
    traces: tuple[Path, ...],
    as_json: bool,
    html_path: Path | None,
    top: int,
    threshold_text: str | None,
    marker: str | None,
    noise_text: str,
) -> None:
    """Compare traces BEFORE and AFTER a change (each side: ranks or repeated runs).

    Per marker, CPU operator and kernel: time before and after, the change, and whether it is
    real (a 95% bootstrap interval of the ratio that excludes 1, and means and lower quartiles
    moved beyond the --noise band). Exit code 1 when --fail-if-slower finds a real slowdown over the
    threshold; 2 for a user error.

    \b
    Example:
        ncompass compare base-*.json -- new-*.json --fail-if-slower 5%
    """
    from ncompass.analysis.comparison import check_slowdown, compare, parse_threshold
    from ncompass.cli._report_file import write_report
    from ncompass.errors import NcompassError
    from ncompass.overwrite_guard import refuse_overwriting_inputs

    after_count = ctx.meta.get("compare.after_count", 0)
    if marker is not None and threshold_text is None:
        raise click.UsageError("--marker only applies with --fail-if-slower", ctx)
    threshold = parse_threshold(threshold_text) if threshold_text is not None else None
    noise = parse_threshold(noise_text, "--noise")
    before = _traces_only(traces[: len(traces) - after_count])
    after = _traces_only(traces[len(traces) - after_count :])
    if not before or not after:
        raise NcompassError(
            "compare needs at least one trace on each side: ncompass compare BEFORE... -- AFTER..."
        )
    if html_path is not None:
        refuse_overwriting_inputs(html_path, traces)
    comparison = compare(before, after, noise=noise)
    from ncompass.analysis.comparison.flop_rates import flop_rate_changes, flop_rate_markdown

    flop_rates = flop_rate_changes(before, after)  # None: a side has no shapes
    gate = check_slowdown(comparison, threshold, marker) if threshold is not None else None
    if html_path is not None:
        write_report(html_path, comparison.to_html(), traces)
        click.echo(f"wrote {html_path}", err=True)
    if as_json:
        values: dict[str, Any] = comparison.to_dict()
        values["flop_rates"] = flop_rates
        if gate is not None:
            values["gate"] = {
                "failed": gate.failed,
                "threshold": gate.threshold,
                "marker": marker,
                "message": gate.message,
            }
        click.echo(orjson.dumps(values, option=orjson.OPT_INDENT_2).decode())
    else:
        click.echo(comparison.to_markdown(top=top), nl=False)
        click.echo(flop_rate_markdown(flop_rates, top=top), nl=False)
    if gate is not None:
        click.echo(gate.message, err=True)
        if gate.failed:
            sys.exit(REGRESSION_EXIT_CODE)


def _traces_only(paths: tuple[Path, ...]) -> list[Path]:
    """The paths without `ncompass run`'s marker manifests (``NAME.ncompass.json``), which a
    glob such as ``base-*.json`` also matches; the ones left out are named on stderr."""
    from ncompass.capture.trace_files import SIDECAR_SUFFIX

    kept = [path for path in paths if not path.name.endswith(SIDECAR_SUFFIX)]
    skipped = [path.name for path in paths if path.name.endswith(SIDECAR_SUFFIX)]
    if skipped:
        click.echo(f"skipped {', '.join(skipped)}: marker manifests, not traces", err=True)
    return kept
