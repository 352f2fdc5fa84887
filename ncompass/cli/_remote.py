"""``ncompass submit`` and ``ncompass jobs``: profiled runs on a Ray cluster, traces back home."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click
import orjson

from ncompass.capture.backends.base import PROFILERS
from ncompass.remote.fetch import ChunkProgress, FetchReport

if TYPE_CHECKING:
    from ncompass.remote.jobs import JobsClient

# how long `jobs fetch` looks for the packs of a job that was stopped (its ranks pack their
# traces after Ray has marked it ended)
_STOPPED_PACK_SETTLE_S = 20.0

_ADDRESS = click.option(
    "--address",
    metavar="URL",
    default=None,
    help="The cluster's dashboard, http://HEAD:8265 [default: $RAY_ADDRESS, else the "
    "address saved by `ncompass jobs connect`].",
)
_OUTPUT_DIR = click.option(
    "--output-dir",
    "-o",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Local trace folder; the job's traces go to DIR/JOB_ID/ [default: $NCOMPASS_TRACE_DIR "
    "or ./traces].",
)
_TOP = click.option(
    "--top", type=click.IntRange(min=1), default=10, show_default=True, help="Rows per summary."
)


class _TerminalReporter:
    """Job output on stdout; ncompass's lines, and fetch progress on a terminal, on stderr."""

    def __init__(self) -> None:
        self._progress_shown = False
        self._chunks = 0
        self._bytes = 0

    def status(self, message: str) -> None:
        self._end_progress()
        click.echo(message, err=True)

    def output(self, text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()

    def progress(self, event: ChunkProgress) -> None:
        self._chunks += 1
        self._bytes += event.size
        if sys.stderr.isatty():
            from ncompass._format import format_size

            click.echo(
                f"\rncompass: fetching {event.path} chunk {event.index + 1}/{event.chunks} "
                f"({format_size(self._bytes)} so far)\033[K",
                err=True,
                nl=False,
            )
            self._progress_shown = True

    def _end_progress(self) -> None:
        if self._progress_shown:
            click.echo("", err=True)
            self._progress_shown = False


@click.command(
    "submit",
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@_ADDRESS
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
@_OUTPUT_DIR
@click.option("--record-shapes", is_flag=True, help="Record tensor shapes (torch profiler).")
@click.option("--profile-memory", is_flag=True, help="Record allocations (torch profiler).")
@click.option("--with-stack", is_flag=True, help="Record Python stacks of ops (torch profiler).")
@click.option("--full-trace", is_flag=True, help="Wrap the whole run in one top-level range.")
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
    help="Upload size limit in MB [default: max_upload_mb in the settings file, else 100].",
)
@click.option("--no-wait", is_flag=True, help="Submit and return; fetch later with jobs fetch.")
@_TOP
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
    reporter = _TerminalReporter()
    result = submit(options, reporter)
    if no_wait:
        click.echo(result.job_id)
        reporter.status(
            f"ncompass: follow it with `ncompass jobs logs {result.job_id} --follow`; fetch its "
            f"traces with `ncompass jobs fetch {result.job_id}`"
        )
        return
    if result.fetch is not None:
        _show_traces(result.fetch, result.merged, top, reporter)
    raise SystemExit(result.exit_code)


@click.group("jobs")
def jobs_group() -> None:
    """Jobs on a Ray cluster: list, logs, stop, fetch traces, connect."""


@jobs_group.command("list")
@_ADDRESS
@click.option("--all", "show_all", is_flag=True, help="Also jobs not started by ncompass.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON list.")
def list_command(address: str | None, show_all: bool, as_json: bool) -> None:
    """The cluster's ncompass jobs, oldest first."""
    client = _client(address, "ncompass jobs list")
    states = [state for state in client.jobs() if show_all or state.from_ncompass]
    if as_json:
        rows = [
            {
                "job_id": state.job_id,
                "status": state.status,
                "exit_code": state.exit_code,
                "start_time_s": state.start_time_s,
                "end_time_s": state.end_time_s,
                "entrypoint": state.entrypoint,
                "metadata": state.metadata,
            }
            for state in states
        ]
        click.echo(orjson.dumps(rows, option=orjson.OPT_INDENT_2).decode())
        return
    if not states:
        click.echo(f"no {'' if show_all else 'ncompass '}jobs on {client.cluster.url}", err=True)
        return
    width = max(len(state.job_id) for state in states)
    click.echo(
        f"{'JOB':<{width}}  {'STATUS':<9} {'EXIT':>4}  {'STARTED':<16} {'TIME':>8} {'RANKS':>5}"
    )
    for state in states:
        started = (
            time.strftime("%Y-%m-%d %H:%M", time.localtime(state.start_time_s))
            if state.start_time_s
            else "-"
        )
        end = state.end_time_s or (time.time() if state.start_time_s else None)
        took = f"{end - state.start_time_s:.1f}s" if end and state.start_time_s else "-"
        code = "-" if state.exit_code is None else str(state.exit_code)
        ranks = state.metadata.get("world_size", "-")
        click.echo(
            f"{state.job_id:<{width}}  {state.status:<9} {code:>4}  {started:<16} {took:>8} "
            f"{ranks:>5}"
        )


@jobs_group.command("logs")
@click.argument("job_id")
@_ADDRESS
@click.option("--follow", "-f", is_flag=True, help="Keep streaming until the job ends.")
def logs_command(job_id: str, address: str | None, follow: bool) -> None:
    """Print the output of JOB_ID."""
    client = _client(address, "ncompass jobs logs")
    if not follow:
        click.echo(client.logs(job_id), nl=False)
        return
    reporter = _TerminalReporter()
    client.state(job_id)  # an unknown job is an error before anything streams
    try:
        client.follow(job_id, reporter.output)
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    state = client.state(job_id)
    from ncompass.remote.submission import describe_end

    describe_end(state, reporter, client)
    raise SystemExit(state.final_exit_code())


@jobs_group.command("stop")
@click.argument("job_id")
@_ADDRESS
@click.option(
    "--timeout", type=float, default=30.0, show_default=True, help="Seconds to wait for the end."
)
def stop_command(job_id: str, address: str | None, timeout: float) -> None:
    """Stop JOB_ID (its ranks are interrupted, so their traces are still written)."""
    client = _client(address, "ncompass jobs stop")
    before = client.state(job_id)
    if before.status == "PENDING":
        client.stop(job_id)
        click.echo(
            f"ncompass: job {job_id} has not started; Ray stops it as soon as it does (a job "
            "that never gets its resources fails by itself after RAY_JOB_START_TIMEOUT_SECONDS, "
            "15 min by default)",
            err=True,
        )
        return
    if not client.stop(job_id):
        state = client.state(job_id)
        click.echo(f"ncompass: job {job_id} had already ended ({state.status})", err=True)
        return
    state = client.wait(job_id, timeout_s=timeout)
    ended = "stopped" if state.terminal else f"still {state.status} after {timeout:g} s"
    click.echo(
        f"ncompass: job {job_id} {ended}; fetch what it wrote with `ncompass jobs fetch {job_id}`",
        err=True,
    )


@jobs_group.command("fetch")
@click.argument("job_id")
@_ADDRESS
@_OUTPUT_DIR
@_TOP
def fetch_command(job_id: str, address: str | None, output_dir: Path | None, top: int) -> None:
    """Fetch the traces of JOB_ID (resumes an interrupted fetch; overwrites nothing)."""
    from ncompass.capture.trace_files import trace_dir
    from ncompass.remote.address import resolve_cluster
    from ncompass.remote.config import load_config
    from ncompass.remote.dashboard import Dashboard
    from ncompass.remote.errors import JobNotFoundError, RemoteError
    from ncompass.remote.fetch import fetch_job
    from ncompass.remote.rank_traces import merge_ranks
    from ncompass.remote.submission import describe_fetch

    reporter = _TerminalReporter()
    settings = load_config()
    cluster = resolve_cluster(address, settings)
    dashboard = Dashboard(cluster)
    status = dashboard.job_status(job_id)
    if status is None:
        raise JobNotFoundError(
            f"no job {job_id} on the Ray cluster at {cluster.url}; `ncompass jobs list` shows "
            "the jobs it has"
        )
    if status in ("PENDING", "RUNNING"):
        raise RemoteError(
            f"job {job_id} is {status}: its traces are packed when it ends. Follow it with "
            f"`ncompass jobs logs {job_id} --follow`, then fetch again"
        )
    job_dir = trace_dir(output_dir).resolve() / job_id
    try:
        # a stopped job's ranks may still be packing their traces when Ray marks it ended
        settle_s = _STOPPED_PACK_SETTLE_S if status == "STOPPED" else 0.0
        report = fetch_job(
            dashboard, job_id, job_dir, on_chunk=reporter.progress, settle_s=settle_s
        )
    except KeyboardInterrupt:
        reporter.status(
            f"ncompass: fetch interrupted; run `ncompass jobs fetch {job_id}` again to resume"
        )
        raise SystemExit(130) from None
    reporter.status(describe_fetch(report))
    _show_traces(report, merge_ranks(report), top, reporter)


@jobs_group.command("connect")
@click.argument("address")
@click.option(
    "--token-stdin",
    is_flag=True,
    help="Read the cluster's token from stdin (never from the command line, where `ps` sees it).",
)
@click.option("--gpu-resource", default=None, metavar="NAME", help="Save a default GPU resource.")
def connect_command(address: str, token_stdin: bool, gpu_resource: str | None) -> None:
    """Check that ADDRESS is a Ray dashboard and save it (and a token) as the default cluster.

    The settings file is written owner-only (0600, in a 0700 folder).
    """
    from ncompass.remote.address import Cluster, check_reachable, normalize_address
    from ncompass.remote.config import load_config, save_config
    from ncompass.remote.dashboard import Dashboard

    settings = load_config()
    url = normalize_address(address)
    # A token saved for another cluster is not sent to this one.
    kept = settings.config.token if settings.config.address == url else None
    token = sys.stdin.readline().strip() if token_stdin else kept
    headers = dict(settings.config.headers)
    if token:
        headers["Authorization"] = f"Bearer {token}"
    cluster = Cluster(url, "ncompass jobs connect", headers)
    check_reachable(cluster)
    version = Dashboard(cluster).ray_version()
    update: dict[str, object] = {"address": url, "token": token or None}
    if gpu_resource:
        update["gpu_resource"] = gpu_resource
    path = save_config(settings.config.model_copy(update=update), settings.path)
    click.echo(
        f"ncompass: Ray {version} answers at {url}; saved as the default cluster in {path}"
        f"{' with its token' if token else ''} (readable by you only)",
        err=True,
    )


def _client(address: str | None, command: str) -> JobsClient:
    from ncompass.remote.address import resolve_cluster
    from ncompass.remote.config import load_config
    from ncompass.remote.jobs import JobsClient

    settings = load_config()
    for warning in settings.warnings:
        click.echo(f"warning: {warning}", err=True)
    return JobsClient(resolve_cluster(address, settings), command)


def _environment(pairs: Sequence[str]) -> dict[str, str]:
    env: dict[str, str] = {}
    for pair in pairs:
        key, equals, value = pair.partition("=")
        if not equals or not key:
            raise click.BadParameter(f"{pair!r}: use KEY=VALUE", param_hint="--env")
        env[key] = value
    return env


def _show_traces(
    report: FetchReport, merged: Path | None, top: int, reporter: _TerminalReporter
) -> None:
    """List the fetched files, then the summary (one rank) or per-rank breakdown (several)."""
    from ncompass._format import format_size
    from ncompass.analysis.summary import summarize_trace
    from ncompass.cli._traces import breakdown_command, summarize_command
    from ncompass.remote.rank_traces import cpu_by_rank

    for local in sorted(report.local_paths.values()):
        reporter.status(f"  {local} ({format_size(local.stat().st_size)})")
    traces = report.rank_traces()
    context = click.get_current_context()
    if len(traces) == 1:
        reporter.status(f"ncompass: summary of {traces[0][1]}")
        context.invoke(summarize_command, trace=traces[0][1], as_json=False, top=top)
    elif len(traces) > 1:
        reporter.status(f"ncompass: per-rank breakdown of {len(traces)} ranks")
        context.invoke(breakdown_command, traces=tuple(path for _, path in traces), as_json=False)
        rank, first = traces[0]
        summary = summarize_trace(first, top=top)
        if summary["structured"]["trace"]["gpu_events"] == 0:
            # A CPU-only run: the GPU breakdown is all zeros; compare the ranks' CPU time.
            others = [(other, summarize_trace(path, top=top)) for other, path in traces[1:]]
            reporter.status("ncompass: no GPU events: CPU time per rank of the longest markers")
            for line in cpu_by_rank([(rank, summary), *others], top=top):
                click.echo(line)
        reporter.status(
            f"ncompass: summary of rank {rank} ({first}); the others: `ncompass summarize TRACE`"
        )
        click.echo(summary["markdown"], nl=False)
    if merged is not None:
        reporter.status(f"ncompass: merged timeline of all ranks: {merged} (ui.perfetto.dev)")
