"""``ncompass serve``: run the analysis service (FastAPI + uvicorn, the ``server`` extra)."""

from __future__ import annotations

import os
from pathlib import Path

import click

from ncompass import environment_variables
from ncompass.errors import NcompassError

TOKEN_ENV = environment_variables.NCOMPASS_ANALYSIS_TOKEN


@click.command("serve")
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on. Anything but loopback exposes the service to the network.",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8000,
    show_default=True,
    help="Port to listen on (0: any free port, printed on start).",
)
@click.option(
    "--allow-host",
    "allow_hosts",
    metavar="NAME",
    multiple=True,
    help="Also answer requests addressed to NAME (repeatable), e.g. this machine's DNS name. "
    "Only the --host address and localhost are answered otherwise (no DNS rebinding).",
)
@click.option(
    "--storage-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where uploads and results are kept: a new or empty folder (the service deletes only "
    "what it wrote, and refuses a folder holding anything else) [default: a temporary folder, "
    "deleted on exit].",
)
@click.option(
    "--max-upload-mb",
    type=click.IntRange(min=1),
    default=1024,
    show_default=True,
    help="Largest trace upload accepted (as sent: gzip counts compressed).",
)
@click.option(
    "--max-inflated-mb",
    type=click.IntRange(min=1),
    default=1024,
    show_default=True,
    help="Largest trace as JSON: a gzip upload that inflates past it is refused as it arrives.",
)
@click.option(
    "--max-storage-mb",
    type=click.IntRange(min=1),
    default=4096,
    show_default=True,
    help="Disk budget for uploads and results; the oldest unused are deleted first.",
)
@click.option(
    "--retention-min",
    type=click.FloatRange(min=0.0, min_open=True),
    default=60.0,
    show_default=True,
    help="Uploads, results and finished jobs are deleted after this many minutes.",
)
@click.option(
    "--job-timeout-s",
    type=click.FloatRange(min=0.0, min_open=True),
    default=600.0,
    show_default=True,
    help="A job still running after this many seconds is stopped and fails; its worker is free.",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Jobs that run at the same time.",
)
@click.option(
    "--log-level",
    type=click.Choice(["critical", "error", "warning", "info", "debug"]),
    default="info",
    show_default=True,
)
def serve_command(
    host: str,
    port: int,
    allow_hosts: tuple[str, ...],
    storage_dir: Path | None,
    max_upload_mb: int,
    max_inflated_mb: int,
    max_storage_mb: int,
    retention_min: float,
    job_timeout_s: float,
    workers: int,
    log_level: str,
) -> None:
    """Run the analysis service that sessions use through base_url / NCOMPASS_ANALYSIS_URL.

    Set NCOMPASS_ANALYSIS_TOKEN to require that token from clients (they send the value of
    the same variable).
    """
    try:
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as error:
        raise NcompassError(
            f"ncompass serve needs FastAPI and uvicorn ({error.name} is missing): "
            "pip install 'ncompass[server]'"
        ) from error
    from ncompass.service.limits import MIB, ServiceLimits
    from ncompass.service.server import is_loopback, listen, make_server, url_of

    try:
        limits = ServiceLimits(
            max_upload_bytes=max_upload_mb * MIB,
            max_storage_bytes=max_storage_mb * MIB,
            retention_s=retention_min * 60.0,
            workers=workers,
            max_inflated_bytes=max_inflated_mb * MIB,
            job_timeout_s=job_timeout_s,
        )
    except ValueError as error:
        raise click.UsageError(str(error)) from error
    token = os.environ.get(TOKEN_ENV) or None
    sock = listen(host, port)
    from ncompass.service.app import create_app

    try:
        app = create_app(
            limits=limits, storage_dir=storage_dir, token=token, host=host, allow_hosts=allow_hosts
        )
    except NcompassError:
        sock.close()
        raise
    url = url_of(sock)
    if not is_loopback(host):
        warning = f"warning: listening on {host}: anyone who can reach {url} can use the service"
        if token is None:
            warning += f"; set {TOKEN_ENV} to require a token"
        click.secho(warning, err=True, fg="yellow")
    provider = app.state.board.provider.name
    click.echo(
        f"ncompass analysis service on {url} (provider: {provider}; "
        f"uploads up to {max_upload_mb} MiB; token {'required' if token else 'not required'}); "
        f"API docs at {url}/docs",
        err=True,
    )
    make_server(app, log_level=log_level).run(sockets=[sock])


__all__ = ["serve_command"]
