"""``ncompass convert``: an Nsight Systems report → a Chrome/Perfetto trace."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("convert")
@click.argument("report", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    metavar="OUT.json[.gz]",
    help="The trace to write [default: REPORT with .json.gz].",
)
def convert_command(report: Path, output: Path | None) -> None:
    """Convert an Nsight Systems REPORT (.nsys-rep, or its .sqlite export) to a Chrome trace.

    NVTX ranges are linked to the kernels launched inside them on the same thread, projected
    onto the GPU streams, and the trace feeds `ncompass summarize` and `breakdown`. Example:

        ncompass convert run.nsys-rep -o run.json.gz
    """
    from ncompass.traces.nsys import convert_report

    target = output or report.with_name(report.name.rsplit(".", 1)[0] + ".json.gz")
    result = convert_report(report, target)
    click.echo(
        f"ncompass: wrote {result.output}: {result.describe()}; "
        f"see `ncompass summarize {result.output}`",
        err=True,
    )
