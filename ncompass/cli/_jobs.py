"""``ncompass jobs``: the jobs on a Ray cluster: list, logs, stop, fetch traces, connect."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import click
import orjson

from ncompass.cli._cluster_terminal import ADDRESS, OUTPUT_DIR, TOP, TerminalReporter
from ncompass.remote.job_plan import JOB_STOP_WAIT_S

if TYPE_CHECKING:
    from ncompass.remote.jobs import JobsClient


@click.group("jobs")
def jobs_group() -> None:
    """Jobs on a Ray cluster: list, logs, stop, fetch traces, connect."""


@jobs_group.command("list")
@ADDRESS
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
@ADDRESS
@click.option("--follow", "-f", is_flag=True, help="Keep streaming until the job ends.")
def logs_command(job_id: str, address: str | None, follow: bool) -> None:
    """Print the output of JOB_ID."""
    client = _client(address, "ncompass jobs logs")
    if not follow:
        click.echo(client.logs(job_id), nl=False)
        return
    reporter = TerminalReporter()
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
@ADDRESS
@click.option(
    "--timeout",
    type=float,
    default=float(JOB_STOP_WAIT_S + 10),
    show_default=True,
    help="Seconds to wait for the end (the ranks write and pack their traces first).",
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
@ADDRESS
@OUTPUT_DIR
@TOP
def fetch_command(job_id: str, address: str | None, output_dir: Path | None, top: int) -> None:
    """Fetch the traces of JOB_ID (resumes an interrupted fetch; overwrites nothing)."""
    from ncompass.remote.job_fetch import fetch_ended_job
    from ncompass.remote.trace_overview import show_fetched_traces

    reporter = TerminalReporter()
    try:
        fetched = fetch_ended_job(job_id, reporter, address=address, output_dir=output_dir)
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    show_fetched_traces(fetched.report, fetched.merged, top, reporter)


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
    from ncompass.remote.connect import connect

    token = sys.stdin.readline().strip() if token_stdin else None
    saved = connect(address, token=token, gpu_resource=gpu_resource)
    click.echo(
        f"ncompass: Ray {saved.ray_version} answers at {saved.url}; saved as the default cluster "
        f"in {saved.settings_path}{' with its token' if saved.with_token else ''} (readable by "
        "you only)",
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


__all__ = ["jobs_group"]
