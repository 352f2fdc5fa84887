"""``ncompass summarize | breakdown | filter | merge``: thin commands over the trace analysis."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click
import orjson

_TRACE = click.Path(dir_okay=False, path_type=Path)

_JOBS = click.option(
    "--jobs",
    "-j",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Read N traces at once in worker processes, or one large trace in N parts "
    "[default: one per core, for over 32 MB of JSON in all; 1: one by one].",
)


_FORCE_OVERWRITE = click.option(
    "--force-overwrite",
    is_flag=True,
    help="Replace the output file if it exists [default: refuse, leaving it unchanged].",
)


def _every_row_at_most(_context: click.Context, _parameter: click.Parameter, top: int) -> int:
    """``--top``, with a count beyond any list (``99999999999999999999``) read as "every row":
    slicing takes no number past ``sys.maxsize``."""
    return min(top, sys.maxsize)


@click.command("summarize")
@click.argument("traces", nargs=-1, required=True, type=_TRACE)
@click.option("--json", "as_json", is_flag=True, help="Print the whole summary as JSON.")
@click.option(
    "--top",
    type=click.IntRange(min=1),
    default=20,
    show_default=True,
    metavar="N",
    callback=_every_row_at_most,
    help="How many markers, kernels and CPU operators to list.",
)
@click.option(
    "--html",
    "html_path",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="OUT.html",
    help="Also write a self-contained HTML page with charts.",
)
@_FORCE_OVERWRITE
@_JOBS
@click.option(
    "--peak-flops",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    metavar="FLOP/S",
    help="The device's peak FLOP/s (every dtype), in place of the GPU table's or this "
    "machine's measured one [env NCOMPASS_PEAK_FLOPS].",
)
@click.option(
    "--peak-bandwidth",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    metavar="BYTES/S",
    help="The device's peak memory bandwidth [env NCOMPASS_PEAK_BANDWIDTH].",
)
@click.option(
    "--calibrate",
    is_flag=True,
    help="Measure this machine's peaks again (a GEMM and a copy; CPU traces are measured "
    "once per machine anyway).",
)
@click.option(
    "--no-efficiency",
    is_flag=True,
    help="Leave out FLOPs, bytes and the roofline (a second pass over a trace with shapes).",
)
def summarize_command(
    traces: tuple[Path, ...],
    as_json: bool,
    top: int,
    html_path: Path | None,
    force_overwrite: bool,
    jobs: int | None,
    peak_flops: float | None,
    peak_bandwidth: float | None,
    calibrate: bool,
    no_efficiency: bool,
) -> None:
    """Summarize where the time of TRACE went: markers, kernels, bottlenecks, advice.

    Several TRACES (the ranks of one job, or repeated runs) give one combined report: the
    ranks side by side, the slowest one named, and the top markers and kernels per rank.
    """
    from ncompass.cli._report_file import write_report
    from ncompass.overwrite_guard import refuse_overwriting_inputs, refuse_replacing

    if html_path is not None:  # before any trace is read
        refuse_overwriting_inputs(html_path, traces)
        refuse_replacing(html_path, replace=force_overwrite)
    if len(traces) > 1:
        _summarize_several(traces, as_json=as_json, top=top, html_path=html_path, jobs=jobs)
        return
    from ncompass.analysis.summary import summarize_trace

    trace = traces[0]
    summary = summarize_trace(
        trace,
        top=top,
        jobs=jobs,
        peak_flops=peak_flops,
        peak_bandwidth=peak_bandwidth,
        calibrate=calibrate or None,
        efficiency=not no_efficiency,
    )
    if html_path is not None:
        from ncompass.analysis.html_page import render_html

        write_report(html_path, render_html(summary, top=top), [trace])
        click.echo(f"wrote {html_path}", err=True)
    if as_json:
        click.echo(orjson.dumps(summary, option=orjson.OPT_INDENT_2).decode())
    else:
        click.echo(summary["markdown"], nl=False)


def _summarize_several(
    traces: tuple[Path, ...], *, as_json: bool, top: int, html_path: Path | None, jobs: int | None
) -> None:
    from ncompass.analysis.ranks import summarize_traces
    from ncompass.cli._report_file import write_report

    summary = summarize_traces(traces, top=top, jobs=jobs)
    if html_path is not None:
        from ncompass.analysis.ranks_page import render_ranks_html

        write_report(html_path, render_ranks_html(summary), traces)
        click.echo(f"wrote {html_path}", err=True)
    if as_json:
        click.echo(orjson.dumps(summary, option=orjson.OPT_INDENT_2).decode())
    else:
        click.echo(summary["markdown"], nl=False)


@click.command("breakdown")
@click.argument("traces", nargs=-1, required=True, type=_TRACE)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option(
    "--exclude-last-step",
    is_flag=True,
    help="Count only GPU work launched before the last ProfilerStep (as HTA does).",
)
@_JOBS
def breakdown_command(
    traces: tuple[Path, ...], as_json: bool, exclude_last_step: bool, jobs: int | None
) -> None:
    """Temporal and kernel-type breakdown of GPU time, one TRACE per rank."""
    from ncompass.analysis.breakdown import breakdown

    result = breakdown(traces, exclude_last_profiler_step=exclude_last_step, jobs=jobs)
    if as_json:
        click.echo(orjson.dumps(result.to_dict(), option=orjson.OPT_INDENT_2).decode())
        return
    from ncompass.analysis.breakdown_table import breakdown_lines

    for line in breakdown_lines(result):
        click.echo(line)


@click.command("filter")
@click.argument("traces", nargs=-1, required=True, type=_TRACE)
@click.option(
    "-o",
    "--output",
    "output",
    required=True,
    type=click.Path(path_type=str),
    metavar="OUT",
    help="Where to write the filtered trace (.json or .json.gz); for several TRACES, a "
    "directory (OUTDIR/) that gets NAME.filtered.json[.gz] per input.",
)
@click.option(
    "--min-duration-us",
    type=click.FloatRange(min=0.0),
    default=0.0,
    show_default=True,
    metavar="X",
    help="Drop events shorter than X microseconds.",
)
@click.option("--no-kernels", is_flag=True, help="Drop the GPU events the markers launched.")
@click.option(
    "--direct-children", is_flag=True, help="Also keep the CPU events directly inside markers."
)
@_FORCE_OVERWRITE
@_JOBS
def filter_command(
    traces: tuple[Path, ...],
    output: str,
    min_duration_us: float,
    no_kernels: bool,
    direct_children: bool,
    force_overwrite: bool,
    jobs: int | None,
) -> None:
    """Keep the markers of each TRACE and what they launched; write OUT (a folder for several)."""
    from ncompass.traces.filter import filter_trace, filter_traces

    if not _names_a_directory(output):
        if len(traces) > 1:
            from ncompass.errors import NcompassError

            named_like_a_trace = output.endswith((".json", ".gz"))
            directory = Path(output).parent / "filtered" if named_like_a_trace else output
            raise NcompassError(
                f"-o {output} names a file, but {len(traces)} traces were given: pass a directory "
                f"(-o {directory}/) to get one filtered file per trace"
            )
        written = filter_trace(
            traces[0],
            output,
            include_cuda_kernels=not no_kernels,
            include_direct_children=direct_children,
            min_duration_us=min_duration_us,
            replace=force_overwrite,
        )
        click.echo(f"wrote {written}", err=True)
        return
    for written in filter_traces(
        traces,
        output,
        include_cuda_kernels=not no_kernels,
        include_direct_children=direct_children,
        min_duration_us=min_duration_us,
        jobs=jobs,
        replace=force_overwrite,
    ):
        click.echo(f"wrote {written}", err=True)


def _names_a_directory(output: str) -> bool:
    """``-o`` names a directory: an existing one, or a path ending in a separator."""
    return output.endswith(("/", os.sep)) or Path(output).is_dir()


@click.command("merge")
@click.argument("traces", nargs=-1, required=True, type=_TRACE)
@click.option(
    "-o",
    "--output",
    "output",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="OUT",
    help="Where to write the merged trace (.json or .json.gz).",
)
@_FORCE_OVERWRITE
@_JOBS
def merge_command(
    traces: tuple[Path, ...], output: Path, force_overwrite: bool, jobs: int | None
) -> None:
    """Merge per-rank TRACES into one timeline, one process per rank."""
    from ncompass.traces.merge import merge_traces

    written = merge_traces(traces, output, jobs=jobs, replace=force_overwrite)
    click.echo(f"wrote {written}", err=True)
