"""``ncompass submit``: a profiled run on a Ray cluster, its traces back home."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import click

from ncompass.capture.backends.base import PROFILERS
from ncompass.cli._cluster_terminal import ADDRESS, OUTPUT_DIR, TOP, TerminalReporter


@click.command(
    "submit",
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@ADDRESS
@click.option(
    "--gpus",
    "-g",
    type=click.IntRange(min=0),
    default=1,
    show_default=True,
    help="GPUs per node, one rank each (torchrun-style environment); 0: one rank, no GPU.",
)
@click.option(
    "--nodes", type=click.IntRange(min=1), default=1, show_default=True, help="Nodes to span."
)
@click.option(
    "--gpu-resource",
    default=None,
    metavar="NAME",
    help="The Ray resource one GPU is [default: GPU, or gpu_resource in the settings file].",
)
@click.option(
    "--upload-dir",
    "-d",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("."),
    show_default=True,
    help="Folder to upload (.gitignore and .ncompassignore honoured); SCRIPT must be inside.",
)
@click.option(
    "--requirements",
    "-r",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="pip requirements for the job [default: requirements.txt of the upload, if any].",
)
@click.option("--app-name", "-a", default=None, help="Job name [default: the script's name].")
@click.option(
    "--config",
    "-c",
    "configs",
    multiple=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Target spec (YAML/JSON); repeat to merge several. Copied into the upload.",
)
@click.option("--profiler", type=click.Choice(PROFILERS), default="torch", show_default=True)
@click.option("--trace-name", default=None, help="Trace name [default: the app name].")
@OUTPUT_DIR
@click.option("--record-shapes", is_flag=True, help="Record tensor shapes (torch profiler).")
@click.option("--profile-memory", is_flag=True, help="Record allocations (torch profiler).")
@click.option("--with-stack", is_flag=True, help="Record Python stacks of ops (torch profiler).")
@click.option("--full-trace", is_flag=True, help="Wrap the whole run in one top-level range.")
@click.option(
    "--no-follow",
    is_flag=True,
    help="Profile only each rank's own process: the processes a rank starts run untouched.",
)
@click.option(
    "--env",
    "env_pairs",
    multiple=True,
    metavar="KEY=VALUE",
    help="Environment variable for the job; repeatable.",
)
@click.option(
    "--max-upload-mb",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Upload size limit in MiB [default: max_upload_mb in the settings file, else 100].",
)
@click.option("--no-wait", is_flag=True, help="Submit and return; fetch later with jobs fetch.")
@TOP
@click.option("-m", "module", default=None, metavar="MODULE", help="Run a module, like python -m.")
@click.argument("arguments", nargs=-1, type=click.UNPROCESSED)
def submit_command(
    address: str | None,
    gpus: int,
    nodes: int,
    gpu_resource: str | None,
    upload_dir: Path,
    requirements: Path | None,
    app_name: str | None,
    configs: tuple[Path, ...],
    profiler: str,
    trace_name: str | None,
    output_dir: Path | None,
    record_shapes: bool,
    profile_memory: bool,
    with_stack: bool,
    full_trace: bool,
    no_follow: bool,
    env_pairs: tuple[str, ...],
    max_upload_mb: float | None,
    no_wait: bool,
    top: int,
    module: str | None,
    arguments: tuple[str, ...],
) -> None:
    """Run SCRIPT (or -m MODULE) with ARGS under `ncompass run` on a Ray cluster.

    Streams the job's output, exits with its exit code, and fetches every trace it wrote into
    the local trace folder; with several ranks, merges them into one timeline. Example:

    \b
        ncompass submit --gpus 2 --config configs/attn.yaml \\
            examples/tiny_transformer.py --new-tokens 8
    """
    from ncompass.remote.submission import SubmitOptions, submit

    args = list(arguments)
    script: str | None = None
    if module is None:
        if not args:
            raise click.UsageError("give a SCRIPT to run (or -m MODULE)")
        script = args.pop(0)
    flags = [
        flag
        for flag, chosen in (
            ("--record-shapes", record_shapes),
            ("--profile-memory", profile_memory),
            ("--with-stack", with_stack),
            ("--full-trace", full_trace),
            ("--no-follow", no_follow),
        )
        if chosen
    ]
    options = SubmitOptions(
        script=script,
        module=module,
        args=args,
        specs=list(configs),
        profiler=profiler,
        run_flags=flags,
        address=address,
        gpus=gpus,
        nodes=nodes,
        gpu_resource=gpu_resource,
        upload_dir=upload_dir,
        requirements=requirements,
        app_name=app_name,
        trace_name=trace_name,
        output_dir=output_dir,
        env=_environment(env_pairs),
        max_upload_mb=max_upload_mb,
        wait=not no_wait,
    )
    reporter = TerminalReporter()
    result = submit(options, reporter)
    if no_wait:
        click.echo(result.job_id)
        reporter.status(
            f"ncompass: follow it with `ncompass jobs logs {result.job_id} --follow`; fetch its "
            f"traces with `ncompass jobs fetch {result.job_id}`"
        )
        return
    if result.fetch is not None:
        from ncompass.remote.trace_overview import show_fetched_traces

        show_fetched_traces(result.fetch, result.merged, top, reporter)
    raise SystemExit(result.exit_code)


def _environment(pairs: Sequence[str]) -> dict[str, str]:
    env: dict[str, str] = {}
    for pair in pairs:
        key, equals, value = pair.partition("=")
        if not equals or not key:
            raise click.BadParameter(f"{pair!r}: use KEY=VALUE", param_hint="--env")
        env[key] = value
    return env


__all__ = ["submit_command"]
