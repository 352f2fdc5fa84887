"""The root command group: lazy subcommands and one way to report user errors."""

from __future__ import annotations

import importlib
import sys
from typing import Any

import click

from ncompass._version import __version__
from ncompass.errors import NcompassError

# command name -> ("module:attribute" of its click command, one-line help). The command module is
# imported on first use; the help line lets `ncompass --help` list commands without importing them.
_SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "run": (
        "ncompass.cli._run:run_command",
        "Run a script or module under rewrites and a profiler.",
    ),
    "capture": (
        "ncompass.cli._capture:capture_command",
        "Record a running `ncompass run --on-demand` now.",
    ),
    "rewrite": ("ncompass.cli._rewrite:rewrite_command", "Show the rewritten source of a target."),
    "spec": ("ncompass.cli._spec:spec_group", "Validate, update and migrate target specs."),
    "summarize": ("ncompass.cli._traces:summarize_command", "Summarize where a trace's time went."),
    "breakdown": ("ncompass.cli._traces:breakdown_command", "Temporal and kernel-type breakdown."),
    "filter": ("ncompass.cli._traces:filter_command", "Keep markers and what they launched."),
    "merge": ("ncompass.cli._traces:merge_command", "Merge per-rank traces into one timeline."),
    "compare": ("ncompass.cli._compare:compare_command", "Did it get faster? Compare traces."),
    "session": (
        "ncompass.cli._session:session_group",
        "The iterative loop: run, drill, run again.",
    ),
    "monitor": ("ncompass.cli._monitor:monitor_command", "GPU utilisation while a command runs."),
    "submit": ("ncompass.cli._submit:submit_command", "Run a profiled job on a Ray cluster."),
    "jobs": ("ncompass.cli._jobs:jobs_group", "Ray cluster jobs: list, logs, stop, fetch."),
    "convert": (
        "ncompass.cli._convert:convert_command",
        "Convert an Nsight Systems report to a Chrome trace.",
    ),
    "kernels": ("ncompass.cli._kernels:kernels_group", "Triton kernel ops: conditions, tuning."),
    "serve": ("ncompass.cli._serve:serve_command", "Run the analysis service (FastAPI)."),
}

USER_ERROR_EXIT_CODE = 2
INTERRUPTED_EXIT_CODE = 130  # as a shell reports a process ended by SIGINT


class LazyGroup(click.Group):
    """A group whose subcommands are imported when first needed."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(_SUBCOMMANDS))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = _SUBCOMMANDS.get(cmd_name)
        if entry is None:
            return super().get_command(ctx, cmd_name)
        module_name, attribute = entry[0].split(":")
        command: click.Command = getattr(importlib.import_module(module_name), attribute)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, _SUBCOMMANDS[name][1]) for name in sorted(_SUBCOMMANDS)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except NcompassError as error:
            if ctx.obj and ctx.obj.get("debug"):
                raise
            click.secho(f"error: {error}", err=True, fg="red")
            ctx.exit(getattr(error, "exit_code", None) or USER_ERROR_EXIT_CODE)
        except KeyboardInterrupt as interrupt:  # Ctrl-C, or SIGTERM under `ncompass run`
            if ctx.obj and ctx.obj.get("debug"):
                raise
            click.echo(f"ncompass: {str(interrupt) or 'interrupted'}", err=True)
            ctx.exit(getattr(interrupt, "exit_code", INTERRUPTED_EXIT_CODE))


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="ncompass")
@click.option("--debug", is_flag=True, help="Show full tracebacks for errors.")
@click.pass_context
def ncompass_cli(ctx: click.Context, debug: bool) -> None:
    """Instrument code without editing it, capture traces, and see where the time went."""
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``ncompass`` console script and ``python -m ncompass``."""
    from ncompass.cli._warnings import show_own_warnings_as_lines

    arguments = argv if argv is not None else sys.argv[1:]
    if next((word for word in arguments if not word.startswith("-")), None) == "run":
        from ncompass.capture.termination import stop_on_signals

        # a stop while the command loads is held for `run` to answer (exit 130/143, one line)
        stop_on_signals(hold=True)
    show_own_warnings_as_lines()
    ncompass_cli.main(args=arguments, prog_name="ncompass")
